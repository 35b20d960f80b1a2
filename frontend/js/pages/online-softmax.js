// @ts-check
// The online softmax explorable: the learner's tokens (the workbench's, carried by a link, or the
// online-softmax preset's eight), their scores cut into tiles, and FlashAttention-2's loop stepped a
// tile at a time (POST /api/v1/attention/tiled): each row's running maximum, rescale factor, running
// sum and unnormalised output, the skipped tiles, the final division and its equality with the plain
// softmax (POST /api/v1/attention), or where a broken loop first parts. The view lives in the URL
// hash; the lesson's four manipulations tick as they are done and are reported as parameter-changed
// events (the server completes `experiment`).

import { getJSON, postJSON } from "../api.js";
import { parameterEvents } from "../events.js";
import { HashState } from "../hash-state.js";
import { drawn, el } from "../views/dom.js";
import { finalL, finalView, NARROW, readYours, runningView, tileGrid, yoursView } from "../views/tiles.js";
import { N_, sentences, significant, t, tn } from "../i18n.js";
import { $, backLink, FROM_LESSON, startPage } from "../shell.js";

const LESSON = "online-softmax";
const INSTANCE = "online-softmax-explorable";
const MANIPULATIONS = [
  { id: "step-tile", text: N_("Step a tile: watch m, α, l and Õ change row by row.") },
  { id: "block-size", text: N_("Change the block size: more or fewer tiles, the same output.") },
  { id: "finish", text: N_("Step to the end: the final division, equal to the plain softmax.") },
  { id: "failure-mode", text: N_("Break the loop with a failure mode: see the tile where it first parts.") },
];
const STAGE_WORDS = {
  status: N_("whether the tile is computed"),
  m: N_("the running maximum m"),
  l: N_("the running sum l"),
  o_tilde: N_("the unnormalised output Õ"),
  output: N_("the output"),
  lse: N_("the log-sum-exp L"),
};

// The page's runtime, beside its configuration (`state`, kept in the hash by VIEW).
const page = {
  state: /** @type {any} */ (null),
  preset: null, // the online-softmax preset's request
  modes: new Map(), // the online softmax's failure modes, from the registry
  generation: 0, // the latest render asked: an older answer is not drawn
};
const shell = startPage({ lesson: LESSON, instance: INSTANCE, manipulations: MANIPULATIONS });
const events = parameterEvents({ lesson: LESSON, instance: INSTANCE });

const VIEW = new HashState(
  [
    {
      name: "tokens",
      key: "t",
      type: "matrix",
      default: () => page.preset.tokens,
      check: (rows) => rows.length >= 2 && rows.length <= 16 && rows[0].length % 2 === 0 && rows[0].length <= 16,
    },
    { name: "block", type: "integer", default: 2, check: (v, s) => v >= 1 && v <= s.tokens.length },
    { name: "head", type: "integer", default: 0, check: (v) => v === 0 || v === 1 },
    { name: "tile", type: "integer", default: 0, check: (v) => v >= 0 }, // tiles stepped so far
    { name: "compare", type: "string", default: "", check: (v) => v === "" || page.modes.has(v) },
    // the learner's running values at the tile where their loop first parts, from the trace script's link
    { name: "yours", type: "string", default: "", check: (v, s) => v === "" || readYours(v, shapeOf(s)) !== null },
    FROM_LESSON,
  ],
  { keep: "online-softmax" },
);

const tilesPerHead = (n, block) => Math.ceil(n / block) ** 2;
const shapeOf = (s) => ({
  width: s.tokens[0].length / 2,
  block: s.block,
  tiles: tilesPerHead(s.tokens.length, s.block),
});
// tiles per head at the state's block size: known before the server answers, so a step taken while
// a new block size is being computed counts against the new loop
const total = () => tilesPerHead(page.state.tokens.length, page.state.block);
const settle = (s) => {
  VIEW.settle(s);
  s.tile = Math.min(s.tile, tilesPerHead(s.tokens.length, s.block));
  return s;
};

function body(failureMode) {
  const request = {
    tokens: page.state.tokens,
    heads: 2,
    causal: true,
    block_q: page.state.block,
    block_k: page.state.block,
  };
  if (failureMode) request.failure_mode = failureMode;
  return request;
}

function update(change, parameter, value, manipulation) {
  change(page.state);
  page.state = settle(page.state);
  VIEW.save(page.state);
  const finished = page.state.tile >= total() ? "finish" : null; // the last tile stepped: the final division shows
  for (const id of [manipulation, finished]) shell.experiment.tick(id);
  events({ parameter, value, ...(manipulation ? { manipulation } : {}) });
  if (finished) events({ parameter: "tile", value: page.state.tile, manipulation: finished });
  drawControls();
  return render();
}

async function render() {
  const mine = ++page.generation;
  const [answer, plain, right] = await Promise.all([
    postJSON("/api/v1/attention/tiled", body(page.state.compare || null)),
    postJSON("/api/v1/attention", {
      tokens: page.state.tokens,
      heads: 2,
      causal: true,
      include: ["heads.scores", "heads.output"],
    }),
    page.state.compare ? postJSON("/api/v1/attention/tiled", body(null)) : null, // the right loop, to set beside
  ]);
  if (mine !== page.generation) return;
  const n = page.state.tokens.length;
  const head = answer.heads[page.state.head];
  page.state = settle(page.state);
  const first =
    answer.first_difference && answer.first_difference.head === page.state.head ? answer.first_difference.tile : null;
  $("shape").textContent = `n = ${n}, d_model = ${page.state.tokens[0].length}, H = 2, B_q = B_k = ${page.state.block}`;
  $("position").textContent =
    page.state.tile === 0
      ? t("Before the first tile")
      : t("Tile {tile} of {all}", { tile: page.state.tile, all: total() });
  drawCounts(answer);
  const hidden = plain.heads[page.state.head].scores.map((row, i) => row.map((_, j) => j > i));
  $("grid").replaceChildren(
    tileGrid({
      scores: plain.heads[page.state.head].scores,
      hidden,
      tiles: head.tiles,
      block: page.state.block,
      done: page.state.tile,
      first,
    }),
  );
  const running =
    page.state.tile === 0
      ? [
          el("p", {
            class: "note",
            text: t("Every row starts with m = −∞, l = 0 and Õ = 0. Press Step to compute the first tile."),
          }),
        ]
      : stepped(head, right?.heads[page.state.head], first);
  if (page.state.tile >= total()) running.push(finalView(head, plain.heads[page.state.head].output, finalL(head)));
  $("running").replaceChildren(...running);
  drawEquality(answer);
  document.querySelector("main").classList.remove("awaits-data");
  drawn();
}

/** How many tiles were computed, masked and skipped, and what a head holds at once against the n × n weights. */
function drawCounts(answer) {
  const { computed, masked, skipped } = answer.tiles;
  const { tiled, plain: whole } = answer.memory;
  const held =
    tiled < whole
      ? t("each head holds {tiled} numbers at once instead of the {plain} of the n × n weights.", {
          tiled,
          plain: whole,
        })
      : t(
          "each head holds {tiled} numbers at once, no fewer than the {plain} of the n × n weights: a tile as large as the whole matrix saves nothing.",
          { tiled, plain: whole },
        );
  $("counts").textContent = sentences(
    t("{computed} tiles computed ({masked} of them masked on the diagonal), {skipped} skipped;", {
      computed,
      masked,
      skipped,
    }),
    held,
  );
}

/**
 * The current tile's running values; from the tile where a slip first parts on, the right loop's beside the
 * broken one's (each with what it really carried into the tile), and at the tile the learner's trace names,
 * their own values beside the right loop's.
 * @param {any} head @param {any} right @param {number | null} first
 */
function stepped(head, right, first) {
  const index = page.state.tile - 1;
  const broken = right && first !== null && index >= first;
  const yours = page.state.yours ? readYours(page.state.yours, shapeOf(page.state)) : null;
  const mine = yours && yours.tile === index + 1 ? yours : null;
  if (!broken && !mine) {
    const where = yours ? [el("p", { class: "note", text: t("Your values are drawn at tile {tile}.", yours) })] : [];
    return [runningView(head.tiles, index), ...where];
  }
  const correct = right ?? head; // without a slip chosen, the answer is the right loop's
  const side = (loop, title, view) =>
    el("div", { class: "os-side", dataset: { loop } }, el("h3", { text: title }), view);
  const mode = page.modes.get(page.state.compare)?.name ?? page.state.compare;
  return [
    side("right", t("Done right"), runningView(correct.tiles, index)),
    mine ? side("yours", t("Yours, from the trace script"), yoursView(correct.tiles, index, mine)) : null,
    broken ? side("broken", t("As “{mode}” computes it", { mode }), runningView(head.tiles, index)) : null,
  ].filter(Boolean);
}

function drawEquality(answer) {
  const node = $("equality");
  const difference = answer.max_difference_from_plain;
  node.dataset.stage = "equality";
  node.dataset.value = String(difference);
  node.classList.toggle("differs", difference > 1e-12);
  const first = answer.first_difference;
  if (first) {
    const where =
      first.tile === null
        ? t("after the last tile, in {what}", { what: t(STAGE_WORDS[first.stage]) })
        : t("at tile {tile} (head {head}), first in {what}", {
            tile: first.tile + 1,
            head: first.head + 1,
            what: t(STAGE_WORDS[first.stage]),
          });
    node.textContent = t(
      "{mode}: the loop parts from the right one {where}; the output differs from the plain softmax by up to {difference}.",
      {
        mode: page.modes.get(page.state.compare)?.name ?? page.state.compare,
        where,
        difference: significant(difference),
      },
    );
  } else if (difference > 1e-12) {
    node.textContent = t(
      "{mode}: with these tiles it computes the same loop as the right one, yet the output differs from the plain softmax by up to {difference}.",
      { mode: page.modes.get(page.state.compare)?.name ?? page.state.compare, difference: significant(difference) },
    );
  } else if (page.modes.get(page.state.compare)?.needs.includes("causal") && page.state.block === 1) {
    // the slip of the diagonal (the online slip that needs the mask) at 1 x 1 tiles: why nothing changes
    node.textContent = t(
      "{mode}: at 1 × 1 tiles a diagonal tile is one cell, a query and its own key, which it always sees: no tile is partly hidden, so this slip has nothing to skip. With larger tiles it drops each row's own block.",
      { mode: page.modes.get(page.state.compare)?.name ?? page.state.compare },
    );
  } else {
    node.textContent = page.state.compare
      ? t(
          "{mode}: with these tiles nothing goes wrong (one tile per row block, or no maximum to carry): the output equals the plain softmax, max difference {difference}.",
          {
            mode: page.modes.get(page.state.compare)?.name ?? page.state.compare,
            difference: significant(difference, 2),
          },
        )
      : t("The tiled output equals the plain softmax over all the keys: max difference {difference}.", {
          difference: significant(difference, 2),
        });
  }
}

function drawControls() {
  const n = page.state.tokens.length;
  if ($("block").options.length !== n) {
    $("block").replaceChildren(
      ...Array.from({ length: n }, (_, k) =>
        el("option", {
          value: String(k + 1),
          text: tn(
            "{block} × {block}: {count} tile a head",
            "{block} × {block}: {count} tiles a head",
            tilesPerHead(n, k + 1),
            {
              block: k + 1,
            },
          ),
        }),
      ),
    );
  }
  $("block").value = String(page.state.block);
  $("head").value = String(page.state.head);
  $("compare").value = page.state.compare;
  $("back-step").disabled = page.state.tile <= 0;
  $("step").disabled = page.state.tile >= total();
  backLink(page.state.lesson);
}

function wire() {
  const step = (by) => () =>
    update(
      (s) => {
        s.tile += by;
      },
      "tile",
      page.state.tile + by,
      "step-tile",
    );
  $("step").addEventListener("click", step(1));
  $("back-step").addEventListener("click", step(-1));
  $("block").addEventListener("change", (e) =>
    update(
      (s) => {
        s.block = Number(e.target.value);
        s.tile = 0;
        s.yours = ""; // traced at another block size
      },
      "block",
      Number(e.target.value),
      "block-size",
    ),
  );
  $("head").addEventListener("change", (e) =>
    update(
      (s) => {
        s.head = Number(e.target.value);
        s.yours = ""; // traced on the other head
      },
      "head",
      Number(e.target.value),
    ),
  );
  $("compare").addEventListener("change", (e) =>
    update(
      (s) => {
        s.compare = e.target.value;
      },
      "failure_mode",
      e.target.value || null,
      e.target.value ? "failure-mode" : null,
    ),
  );
  NARROW.addEventListener("change", () => render()); // the running table turned, or back, with the width
  // A link followed or a host's change: its state, settled, and only this page's keys kept.
  VIEW.onChange((changed) => {
    page.state = settle(changed);
    VIEW.save(page.state);
    drawControls();
    render();
  });
}

async function init() {
  const [online, registry] = await Promise.all([
    getJSON("/api/v1/presets/online-softmax"),
    getJSON("/api/v1/failure-modes"),
  ]);
  page.preset = online.request;
  page.modes = new Map(registry.failure_modes.filter((m) => m.tiled).map((m) => [m.id, m]));
  for (const mode of page.modes.values())
    $("compare").append(el("option", { value: mode.id, text: mode.name, title: mode.description }));
  $("head").replaceChildren(
    ...[0, 1].map((h) => el("option", { value: String(h), text: t("Head {head}", { head: h + 1 }) })),
  );
  page.state = settle(VIEW.load());
  VIEW.save(page.state);
  wire();
  drawControls();
  await render();
  shell.drawn();
}

init().catch((error) => {
  $("equality").textContent = t("Could not compute the tiles: {reason}", { reason: error.message });
});
