// @ts-check
// What the KV cache page says of its decode beside the decode done right: the same numbers as the full
// pass (or to rounding), where a broken one parts and by how much, StreamingLLM's renumbering, and the
// absorbed latent form beside the naive one.

import { significant, t } from "../i18n.js";
import { whole } from "./kv-cache.js";

/** Whether the decode turns its cached keys by their places in a rolling cache (StreamingLLM). @param {any} s */
export const renumbers = (s) => Boolean(s.window && s.renumber && s.rope && s.kind !== "mla");

// The largest difference between two decodes' outputs, position by position.
const apart = (a, b) => a.steps.map((s, i) => Math.max(...s.output.map((v, j) => Math.abs(v - b.steps[i].output[j]))));

// What holds at the current position, and over the run: a broken decode is often identical at first.
/**
 * @param {HTMLElement} node @param {any} answer @param {any} correct @param {string | null} broken
 * @param {boolean} renumbered @param {{ state: any, modes: Map<string, any> }} page
 */
export function drawEquality(node, answer, correct, broken, renumbered, { state, modes }) {
  const difference = answer.max_difference_from_full_pass;
  node.dataset.stage = "equality";
  node.dataset.value = String(difference);
  node.classList.toggle("differs", difference > 1e-12);
  const larger = broken && answer.steps.at(-1).cache_elements > correct.steps.at(-1).cache_elements;
  if (renumbered) drawRenumbered(node, apart(answer, correct), state.position);
  else if (larger && difference <= 1e-12) {
    node.classList.add("differs");
    node.textContent = t(
      "{mode}: the same numbers as the decode done right, but its cache ends holding {broken} numbers where {right} would do.",
      {
        mode: modes.get(broken)?.name ?? broken,
        broken: whole(answer.steps.at(-1).cache_elements),
        right: whole(correct.steps.at(-1).cache_elements),
      },
    );
  } else if (difference === 0)
    node.textContent = t("Same numbers as recomputing the full causal pass: max difference 0.");
  else if (difference <= 1e-12)
    node.textContent = t(
      "Same numbers as recomputing the full causal pass, to float64 rounding: max difference {difference}.",
      { difference: significant(difference, 2) },
    );
  else {
    const by = apart(answer, correct); // per position, against the right decode
    const here = by[state.position - 1];
    const from = by.findIndex((d) => d > 1e-12) + 1;
    const mode = modes.get(broken)?.name ?? broken;
    node.dataset.here = String(here);
    node.classList.toggle("differs", here > 1e-12);
    node.textContent = renumbers(state) // the right decode is itself renumbered: measured against it alone
      ? t(
          "{mode}: at position {position} the decode differs from the renumbered decode done right by up to {here}; it differs from position {from} on.",
          { mode, position: state.position, here: significant(here), from },
        )
      : here > 1e-12
        ? t(
            "{mode}: at position {position} the decode differs from recomputing the full pass by up to {here}; over the run it differs from position {from} on, by up to {difference}.",
            { mode, position: state.position, here: significant(here), from, difference: significant(difference) },
          )
        : t(
            "{mode}: identical to recomputing the full pass at position {position}; it differs from position {from} on, by up to {difference}.",
            { mode, position: state.position, from, difference: significant(difference) },
          );
  }
}

// StreamingLLM's renumbering: the text's numbers until the cache first drops a position, then its own.
function drawRenumbered(node, by, position) {
  const from = by.findIndex((d) => d > 1e-12) + 1;
  const here = by[position - 1];
  node.dataset.here = String(here);
  node.classList.toggle("differs", here > 1e-12);
  node.textContent =
    from === 0
      ? t(
          "Positions in the cache: no position has left the cache yet, so every key is turned at its own position in the text and the numbers are the full pass's.",
        )
      : t(
          "Positions in the cache: the same numbers as the full pass until the cache first dropped a position; from position {from} the keys are turned by their places in the cache, and here the output moves by {here}.",
          {
            from,
            here: significant(here),
          },
        );
}

// Absorbed latent attention: what changes (K and V never formed) and what does not (the numbers).
/** @param {HTMLElement} node @param {any} answer @param {any} naive @param {boolean} isAbsorbed */
export function drawAbsorbed(node, answer, naive, isAbsorbed) {
  node.hidden = !naive;
  if (!naive) return;
  const [absorbed, plain] = isAbsorbed ? [answer, naive] : [naive, answer];
  const difference = Math.max(...apart(absorbed, plain));
  node.dataset.value = String(difference);
  node.textContent = isAbsorbed
    ? t(
        "Absorbed: K and V are never formed. Each query is moved into the latent space (through W_UK) and scored against the cached latents themselves; the output is read back through W_UV. The numbers equal the naive form's to within {difference}: the same products, multiplied in another order, so only float64 rounding differs.",
        { difference: significant(difference, 2) },
      )
    : t(
        "Naive: the keys and values are rebuilt from the cached latent (through W_UK and W_UV) at every step. Tick “Absorbed” to fold W_UK into the query instead: the numbers stay equal, to within {difference}.",
        { difference: significant(difference, 2) },
      );
}
