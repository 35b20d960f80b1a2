// @ts-check
// The attention block as the playground draws it: the residual stream X as the backbone, the
// branch through W_Q, W_K, W_V and the split into heads (each head one lane: Q, K, V, RoPE,
// scores ÷ √d_head, the mask, the softmax, the weights mixing V, its output), the concatenation
// in stable head order, W_O, and the ⊕ back into the stream. Every number is the API's.

import { t, tn } from "../i18n.js";
import { el, math } from "./dom.js";
import { glyph } from "./glyph.js";
import { lane } from "./lane.js";
import { stage } from "./stage.js";
import { svg } from "./svg.js";
import { arrow, divergenceOf, variantsOf } from "./variants.js";

const sub = (n) => `_${n}`; // O_1: drawn as O<sub>1</sub> by math() (one notation for subscripts)

function identity(size) {
  return Array.from({ length: size }, (_, i) => Array.from({ length: size }, (_, j) => (i === j ? 1 : 0)));
}

// W_Q, W_K, W_V: glyphs that open to their numbers, and what the projection and the split do.
function projectionsBlock(view) {
  const { state, response } = view;
  const { d_model: dm, d_head: d, kv_heads: kv } = response.shape;
  const open = view.open.has("projections");
  const names = [
    ["query", "W_Q"],
    ["key", "W_K"],
    ["value", "W_V"],
  ];
  const matrices = names.map(([part, label]) => [label, view.projections[part] || identity(dm)]);
  const owners = (label) => Array.from({ length: label === "W_Q" ? dm : kv * d }, (_, c) => String(Math.floor(c / d)));
  const learned = state.qkv === "learned";
  const button = el(
    "button",
    {
      type: "button",
      class: "stage-open",
      "aria-expanded": open ? "true" : "false",
      "aria-controls": "numbers-projections",
      onclick: () => view.onToggle("projections"),
    },
    el("span", { class: "glyphs" }, ...matrices.map(([, m]) => glyph({ rows: m, cell: 7 }))),
    el(
      "span",
      { class: "stage-label" },
      el("span", { class: "stage-title" }, math("W_Q, W_K, W_V")),
      el("span", {
        class: "shape",
        text: learned ? t("learned-looking: every feature mixes every coordinate") : t("identity: Q = K = V = X"),
      }),
      el("span", { class: "visually-hidden", text: open ? t(": hide the matrices") : t(": show the matrices") }),
    ),
  );
  const tables = matrices.map(([label, m]) => {
    const matrix = `${label} [d_model][${label === "W_Q" ? "d_model" : "kv·d_head"}]`;
    const caption = el("caption", {}, math(t("{matrix} (row: input coordinate)", { matrix })));
    return el("table", {}, caption, matrixRows(m, owners(label)));
  });
  return el(
    "div",
    { class: "block projections", dataset: { part: "projections" } },
    button,
    el("div", { class: "stage-numbers", id: "numbers-projections", hidden: !open }, ...tables),
    el("p", { class: "block-note" }, math(projectionsNote(view))),
  );
}

// What the projections and the split make, with their shapes (and GQA's and RoPE's part).
function projectionsNote(view) {
  const { state, response } = view;
  const { n, d_model: dm, heads, d_head: d, kv_heads: kv } = response.shape;
  const parts = [
    tn(
      "Q = X W_Q: [n][d_model] = [{n}][{dm}]; split into {count} head: [n][H][d_head] = [{n}][{count}][{d}]",
      "Q = X W_Q: [n][d_model] = [{n}][{dm}]; split into {count} heads: [n][H][d_head] = [{n}][{count}][{d}]",
      heads,
      { n, dm, d },
    ),
    kv < heads
      ? tn("K and V into {count} K/V head (grouped-query)", "K and V into {count} K/V heads (grouped-query)", kv)
      : "",
    state.rope
      ? t("RoPE rotates each head's Q and K pairs by position ({kind}, base {base})", {
          kind: state.rope,
          base: state.base,
        })
      : "",
  ];
  return `${parts.filter(Boolean).join("; ")}.`;
}

function matrixRows(m, owners) {
  return el(
    "tbody",
    {},
    m.map((row, i) =>
      el(
        "tr",
        {},
        el("th", { scope: "row", text: `x${i + 1}` }),
        row.map((v, j) => el("td", { dataset: { owner: owners[j] }, text: v.toFixed(2) })),
      ),
    ),
  );
}

function mergeRow(view) {
  const { response, state } = view;
  const { n, d_model: dm, d_head: d, heads } = response.shape;
  const owners = Array.from({ length: dm }, (_, c) => String(Math.floor(c / d)));
  const shown = (stageName) => view.open.has(stageName) || (stageName === "concat" && Boolean(view.showConcat));
  const global = (stageName, title, shape, rows, table, glyphOf = {}) =>
    stage({
      key: stageName,
      stage: stageName,
      title,
      shape,
      open: shown(stageName),
      onToggle: view.onToggle,
      variants: variantsOf(view, stageName, 0, rows),
      table,
      glyphOf,
      divergence: divergenceOf(view, stageName),
    });
  const parts = Array.from({ length: heads }, (_, h) => `O${sub(h + 1)}`).join(" | ");
  return el(
    "div",
    { class: "merge-row" },
    global(
      "concat",
      `concat [${parts}]`,
      `[n][d_model] = [${n}][${dm}]`,
      response.concat,
      {
        caption: t("Concatenation [{parts}], in head order", { parts }),
        owners,
        colLabels: owners.map((o, c) => `O${sub(Number(o) + 1)}·${(c % d) + 1}`),
      },
      { owners },
    ),
    arrow("× W_O"),
    global(
      "wo",
      state.wo === "learned" ? t("W_O (mixes heads)") : t("W_O (identity)"),
      `[d_model][d_model] = [${dm}][${dm}]`,
      view.wo,
      {
        caption: t("W_O (row: concatenated feature, fed by the head that owns it)"),
        owners,
        byRow: true,
        rowLabel: (i) => `f${i + 1}`,
      },
      { owners, byRow: true },
    ),
    arrow("="),
    global("output", "Y = concat W_O", `[n][d_model] = [${n}][${dm}]`, response.output, {
      caption: t("Y, the attention block's output"),
    }),
  );
}

function plus() {
  const node = svg("svg", {
    class: "plus",
    viewBox: "0 0 24 24",
    width: 28,
    height: 28,
    role: "img",
    "aria-label": t("add"),
  });
  node.append(svg("circle", { cx: 12, cy: 12, r: 10.5 }), svg("path", { d: "M12 6v12M6 12h12" }));
  return node;
}

// The residual stream: X, the ⊕ where Y is added back, X + Y.
function backbone(view) {
  const { response, state } = view;
  const { n, d_model: dm } = response.shape;
  const residual = stage({
    key: "residual",
    stage: "residual",
    title: "X + Y",
    shape: `[n][d_model] = [${n}][${dm}]`,
    open: view.open.has("residual"),
    onToggle: view.onToggle,
    variants: variantsOf(view, "residual", 0, response.residual),
    table: { caption: t("The residual stream after the block: X + Y") },
    divergence: divergenceOf(view, "residual"),
  });
  return [
    el(
      "div",
      { class: "descend", "aria-hidden": "true" },
      el("span", { class: "up-arrow", text: t("↑ X enters the branch") }),
      el("span", { class: "down-arrow", text: t("Y is added back ↓") }),
    ),
    el(
      "div",
      { class: "stream-row" },
      el(
        "div",
        { class: "stream" },
        el(
          "a",
          { class: "stream-x", href: "#tokens-title", "aria-label": t("X, the residual stream: the tokens you edit") },
          glyph({ rows: state.tokens, cell: 8 }),
          el("span", { class: "stage-title", text: "X" }),
        ),
        el("span", { class: "stream-line", "aria-hidden": "true" }),
        el("span", { class: "shape", text: t("residual stream") }),
        el("span", { class: "stream-line", "aria-hidden": "true" }),
        plus(),
        el("span", { class: "stream-line short", "aria-hidden": "true" }),
      ),
      el("div", { class: "residual" }, residual),
    ),
  ];
}

export function diagram(view) {
  return el(
    "div",
    { class: "diagram-body" },
    el(
      "div",
      { class: "branch" },
      el("div", { class: "proj-row" }, projectionsBlock(view)),
      el(
        "div",
        { class: "lanes" },
        view.response.heads.map((head) => lane(view, head)),
      ),
      mergeRow(view),
    ),
    ...backbone(view),
  );
}
