// @ts-check
// The KV cache page's failure modes and what they need (each mode's `needs`, GET /api/v1/failure-modes):
// how the page meets each need, switching a control and saying so, and clears a mode whose needs a
// control took away.

import { listed, sentences, t } from "../i18n.js";

export const WINDOW = 3; // what a long-context slip switches on when no window is set

// How this page meets each need a failure mode has (its `needs`, from GET /api/v1/failure-modes): whether
// the state meets it, what to switch, and what to say, a sentence of its own (`said`) or a few words in
// "“{mode}” needs …: switched on." Needs this page always meets (it decodes, causally, with four heads)
// have no entry. What was switched is said beside the controls (`switched`), never done silently.
const MEETS = {
  grouped_heads: {
    met: (s) => s.kind === "gqa",
    meet: (s) => {
      s.kind = "gqa";
    },
    said: (mode) =>
      t(
        "“{mode}” breaks how query heads share key/value heads, so it needs GQA: switched to GQA, 2 key/value heads for 4 query heads.",
        { mode },
      ),
  },
  head_slices: {
    met: (s) => s.kind !== "mla",
    meet: (s) => {
      s.kind = "mha";
    },
  },
  rope: {
    met: (s) => s.rope,
    meet: (s) => {
      s.rope = true;
    },
    said: (mode) => t("“{mode}” breaks the positions RoPE turns by, so it needs RoPE: turned RoPE on.", { mode }),
  },
  whole_cache: {
    met: (s) => !s.window && !s.logit,
    meet: (s) => {
      s.window = 0;
      s.logit = false;
    },
    said: (mode) => t("“{mode}” is computed over a cache that keeps every position: turned the window off.", { mode }),
  },
  window: {
    met: (s) => Boolean(s.window),
    meet: (s) => {
      s.window = WINDOW;
    },
    word: () => t("a window of {window}", { window: WINDOW }),
  },
  sinks: {
    met: (s) => s.sinks > 0,
    meet: (s) => {
      s.sinks = 1;
    },
    word: () => t("one sink"),
  },
  sink_logit: {
    met: (s) => s.logit,
    meet: (s) => {
      s.logit = true;
    },
    word: () => t("the sink logits"),
  },
  positions: {
    met: (s) => s.renumber,
    meet: (s) => {
      s.renumber = true;
    },
    word: () => t("positions in the cache"),
  },
  whole_keys: {
    met: (s) => s.kind !== "mla",
    meet: (s) => {
      s.kind = "mha";
    },
    word: () => t("MHA (a latent's RoPE key is not renumbered)"),
  },
};
// The needs this page's menu is about: a mode with one of them is offered here (the rest: the workbench).
export const OFFERED = new Set(["decode", "grouped_heads", "window", "sinks", "sink_logit", "positions"]);
// A long-context slip (the long-context lesson counts choosing one): it needs a window, sinks, a sink logit or positions.
export const long = (mode) =>
  Boolean(mode) && mode.needs.some((n) => ["window", "sinks", "sink_logit", "positions"].includes(n));
const unmet = (s, mode) => Object.keys(MEETS).filter((need) => mode.needs.includes(need) && !MEETS[need].met(s));

/**
 * The state with the chosen mode's needs met, and what was switched to meet them, in words ("" when nothing).
 * @param {any} s @param {Map<string, any>} modes
 * @returns {string}
 */
export function settle(s, modes) {
  const mode = modes.get(s.compare);
  if (!mode) return "";
  const said = [];
  const words = [];
  for (const need of unmet(s, mode)) {
    if (MEETS[need].met(s)) continue; // met on the way, by what an earlier need switched
    MEETS[need].meet(s);
    if (MEETS[need].said) said.push(MEETS[need].said(mode.name));
    else if (MEETS[need].word) words.push(MEETS[need].word());
  }
  if (words.length) said.push(t("“{mode}” needs {what}: switched on.", { mode: mode.name, what: listed(words) }));
  return sentences(...said);
}

// A control changed so that the chosen mode's needs no longer hold: the mode is cleared, not the change undone.
/** @param {any} s @param {Map<string, any>} modes */
export function dropUnmet(s, modes) {
  const mode = modes.get(s.compare);
  if (mode && unmet(s, mode).length) s.compare = "";
}
