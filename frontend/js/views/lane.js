// @ts-check
// One head's lane of the workbench's diagram: its Q, K and V (RoPE marked, the numbers before the rotation
// beside them), its scores ÷ √d_head with the mask, its weights (a heatmap a learner can pick a cell of), and
// its output; the title says which features it reads and whose keys and values it shares.

import { listed, locale, t } from "../i18n.js";
import { el, math } from "./dom.js";
import { glyph } from "./glyph.js";
import { heatmap } from "./heatmap.js";
import { changes } from "./marks.js";
import { shapeLabel, stage, VARIANT_NAMES } from "./stage.js";
import { arrow, divergenceOf, PER_HEAD, variantsOf } from "./variants.js";

const sub = (n) => `_${n}`; // Q_1: drawn as Q<sub>1</sub> by math() (one notation for subscripts)
const dims = (list) => list.map((f) => `f${f + 1}`);
export const masks = (head) => head.masked_scores.map((row) => row.map((v) => v === null));

/** One head's lane. @param {any} view what the diagram draws (pages/workbench.js `view`) @param {any} head */
export function lane(view, head) {
  const { state, response } = view;
  const h = head.index;
  const d = response.shape.d_head;
  const n = response.shape.n;
  const masked = masks(head);
  const common = stageMaker(view, h);
  const kvFeatures = head.feature_indices.map((f, c) => (state.reuse ? f : head.kv_head * d + c));
  const scoresTable = {
    caption: t("Scores Q K^T / √{d}, head {head} (masked cells: −∞ before the softmax)", { d, head: h + 1 }),
    colLabels: Array.from({ length: n }, (_, j) => `k${j + 1}`),
    rowLabel: (i) => `q${i + 1}`,
    masked,
  };
  const scores = common(
    "scores",
    ["S", el("sub", { text: h + 1 })],
    `[n][n] = [${n}][${n}]`,
    head.scores,
    scoresTable,
    {
      masked,
    },
  );
  const output = common("head-output", ["O", el("sub", { text: h + 1 })], `[n][d_head] = [${n}][${d}]`, head.output, {
    caption: t("Output of head {head} (weights × V)", { head: h + 1 }),
    colLabels: dims(kvFeatures),
  });
  const flow = [
    qkvGroup(view, head, kvFeatures),
    arrow(`QKᵀ ÷ √${d}`),
    scores,
    arrow(state.causal ? t("mask, softmax") : "softmax", true),
    weightsStage(view, head, masked),
    arrow("A·V", true),
    output,
  ];
  // A head whose numbers are all the correct ones while another head's differ says so once.
  const found = view.divergence;
  const same =
    found?.heads && found.stages.some((s) => PER_HEAD.has(s)) && !found.heads.find((x) => x.head === h)?.stages.length;
  return el(
    "section",
    {
      class: "lane",
      dataset: { head: String(h), owner: String(h), ...(same ? { identical: "true" } : {}) },
      "aria-labelledby": `lane-${h}`,
    },
    laneTitle(view, head, same),
    el("div", { class: "lane-flow" }, ...flow),
  );
}

/** A stage of head h's lane, its variants and divergence from the view. */
function stageMaker(view, h) {
  return (stageName, title, shape, rows, table, glyphOf = {}, extra = null) =>
    stage({
      key: `${stageName}:${h}`,
      stage: stageName,
      head: h,
      title,
      shape,
      open: view.open.has(`${stageName}:${h}`),
      onToggle: view.onToggle,
      variants: variantsOf(view, stageName, h, rows),
      table,
      glyphOf,
      divergence: divergenceOf(view, stageName, h),
      extra,
    });
}

/** Q, K and V side by side, RoPE marked on Q and K. */
function qkvGroup(view, head, kvFeatures) {
  const { state, response } = view;
  const h = head.index;
  const common = stageMaker(view, h);
  const rope = state.rope ? ` (RoPE ${state.rope})` : "";
  const turned = (letter) => [
    letter,
    el("sub", { text: h + 1 }),
    rope && el("span", { class: "rope-mark", text: "↻" }),
  ];
  const q = common(
    "q",
    turned("Q"),
    "",
    head.query,
    { caption: t("Q, head {head}{rope}: [n][d_head]", { head: h + 1, rope }), colLabels: dims(head.feature_indices) },
    {},
    beforeRope(head, "query_before_rope", "Q"),
  );
  const k = common(
    "k",
    turned("K"),
    "",
    head.key,
    { caption: t("K, head {head}{rope}: [n][d_head]", { head: h + 1, rope }), colLabels: dims(kvFeatures) },
    {},
    beforeRope(head, "key_before_rope", "K"),
  );
  const v = common("v", ["V", el("sub", { text: h + 1 })], "", head.value, {
    caption: t("V, head {head}: [n][d_head]", { head: h + 1 }),
    colLabels: dims(kvFeatures),
  });
  const { n, d_head: d } = response.shape;
  return el(
    "div",
    { class: "qkv-group" },
    el("div", { class: "qkv" }, q, k, v),
    shapeLabel(`[n][d_head] = [${n}][${d}]`),
    rope ? el("span", { class: "shape", text: t("RoPE ↻ on Q, K") }) : null,
  );
}

/** Q or K before its rotation, under RoPE: a glyph and a note that the table is after it. */
function beforeRope(head, part, letter) {
  if (!head[part]) return null;
  const matrix = `${letter}${sub(head.index + 1)}`;
  return el(
    "div",
    { class: "before-rope", dataset: { part } },
    el("p", { class: "note" }, math(t("{matrix} before RoPE; the table below is after the rotation.", { matrix }))),
    glyph({ rows: head[part] }),
  );
}

/** The lane's title: the head, the features it reads, whose keys and values it shares. */
function laneTitle(view, head, same) {
  const { state, response } = view;
  const h = head.index;
  const heads = new Intl.ListFormat(locale).format(sharers(response, head));
  const shared = t("K, V from K/V head {kv}, shared with {heads}", { kv: head.kv_head + 1, heads });
  const shares = state.kv < state.heads ? " · ".concat(shared) : "";
  const list = head.feature_indices.map((f) => f + 1);
  const features =
    list.length === 1
      ? t("reads feature {feature}", { feature: list[0] })
      : head.features
        ? t("reads features {first}–{last}", { first: head.features[0] + 1, last: head.features[1] })
        : t("reads features {list}", { list: listed(list) });
  return el(
    "h3",
    { class: "lane-title", id: `lane-${h}` },
    t("Head {head}", { head: h + 1 }),
    " ",
    el("span", { class: "muted", text: `${features}${shares}` }),
    same
      ? el("span", { class: "divergence-badge identical", text: t("identical: every number equals the correct one") })
      : null,
  );
}

function sharers(response, head) {
  return response.heads
    .filter((other) => other.kv_head === head.kv_head && other.index !== head.index)
    .map((o) => t("head {head}", { head: o.index + 1 }));
}

/** The weights: a heatmap for each variant, the picked cell marked, changes since the last edit marked. */
function weightsStage(view, head, masked) {
  const h = head.index;
  const variants = variantsOf(view, "weights", h, head.weights);
  const before = view.previous?.heads[h];
  const picked = view.picked && view.picked[0] === h ? view.picked.slice(1) : null;
  const main = (v) => v.name === "main";
  const tables = variants.map((v) =>
    el(
      "div",
      { class: "variant", dataset: { variant: v.name } },
      heatmap({
        head: h,
        weights: v.rows,
        masked: main(v) ? masked : masks(view.broken && v.name === "broken" ? view.broken.heads[h] : head),
        id: main(v) ? `heatmap-${h}` : `heatmap-${v.name}-${h}`,
        title:
          variants.length > 1
            ? t("Weights, head {head} ({variant})", { head: h + 1, variant: VARIANT_NAMES[v.name] })
            : t("Weights, head {head}", { head: h + 1 }),
        marks: v.marks || (before && main(v) ? changes(before.weights, head.weights) : null),
        pick: main(v) ? (i, j) => view.pick(h, i, j) : null,
        picked: main(v) ? picked : null,
      }),
    ),
  );
  const divergence = divergenceOf(view, "weights", h);
  const size = head.weights.length;
  return el(
    "figure",
    {
      class: "stage weights-stage",
      dataset: { stage: "weights", head: String(h), owner: String(h), ...(divergence ? { divergence } : {}) },
    },
    divergence === "first" ? el("p", { class: "divergence-badge", text: t("first difference") }) : null,
    el(
      "div",
      { class: "stage-label" },
      el("span", { class: "stage-title" }, "A", el("sub", { text: h + 1 }), " ", t("weights")),
      shapeLabel(`[n][n] = [${size}][${size}]`),
    ),
    el("div", { class: "weights-tables" }, tables),
  );
}
