// The attention block as the playground draws it: the residual stream X as the backbone, the
// branch through W_Q, W_K, W_V and the split into heads (each head one lane: Q, K, V, RoPE,
// scores ÷ √d_head, the mask, the softmax, the weights mixing V, its output), the concatenation
// in stable head order, W_O, and the ⊕ back into the stream. Every number is the API's.

import { el, math } from "./dom.js";
import { glyph } from "./glyph.js";
import { heatmap } from "./heatmap.js";
import { changes } from "./marks.js";
import { differs, shapeLabel, stage, VARIANT_NAMES } from "./stage.js";
import { svg } from "./svg.js";
import { locale, t, tn } from "../i18n.js";

const sub = (n) => `_${n}`; // O_1: drawn as O<sub>1</sub> by math() (one notation for subscripts)
const dims = (list) => list.map((f) => `f${f + 1}`);
const masks = (head) => head.masked_scores.map((row) => row.map((v) => v === null));
const perHead = new Set(["q", "k", "v", "scores", "weights", "head-output"]);

// The rows a variant holds for a stage (per-head stages: head h's).
function rowsOf(source, stageName, h) {
  if (!source) return null;
  if (source.heads) {
    const head = source.heads[h];
    const part = { q: "query", k: "key", v: "value", scores: "scores", weights: "weights", "head-output": "output" }[
      stageName
    ];
    return perHead.has(stageName) ? head?.[part] : source[stageName];
  }
  const value = source[stageName];
  return perHead.has(stageName) ? value?.[h] : value;
}

function sameShape(a, b) {
  return (
    Array.isArray(a) &&
    Array.isArray(b) &&
    a.length === b.length &&
    a.every((row, i) => Array.isArray(row) && row.length === b[i].length)
  );
}

function variantsOf(view, stageName, h, main) {
  const out = [{ name: "main", rows: main }];
  const { broken, divergence, yours } = view;
  if (broken && divergence && differsAt(divergence, stageName, h)) {
    const rows = stageName === "wo" ? view.brokenWo : rowsOf(broken, stageName, h);
    if (rows) out.push({ name: "broken", rows, marks: differs(main, rows) });
  }
  const mine = yours && rowsOf(yours, stageName, h);
  if (mine && sameShape(mine, main)) out.push({ name: "yours", rows: mine, marks: differs(main, mine) });
  return out;
}

// Whether a stage's numbers differ: a head's own stage only where that head's numbers do (an
// identical head is not marked because another head differs), a shared stage where it does.
function differsAt(found, stageName, h) {
  const own = h !== null && found.heads ? found.heads.find((x) => x.head === h) : null;
  if (own && PER_HEAD.has(stageName)) return own.stages.includes(stageName);
  return found.stages.includes(stageName);
}

// "first" (the first difference, in pipeline order over every head), "after", "identical" (a
// head's stage whose numbers equal the correct ones where another head's differ), or null.
function divergenceOf(view, stageName, h = null) {
  const found = view.divergence ? view.divergence : view.yoursDivergence;
  if (!found) return null;
  if (!differsAt(found, stageName, h))
    return h !== null && PER_HEAD.has(stageName) && found.stages.includes(stageName) ? "identical" : null;
  const firstHere = found.first === stageName && (found.first_head == null || h === null || found.first_head === h);
  return firstHere ? "first" : "after";
}

const PER_HEAD = new Set(["q", "k", "v", "scores", "weights", "head-output"]);

// wide: shown only where a lane runs in one row (on a phone the weights take a row of their own).
function arrow(label, wide = false) {
  return el(
    "span",
    { class: `flow-arrow${wide ? " wide" : ""}`, "aria-hidden": "true" },
    el("span", { class: "flow-label" }, math(label || "")),
  );
}

function lane(view, head) {
  const { state, response } = view;
  const h = head.index,
    d = response.shape.d_head,
    n = response.shape.n;
  const rope = state.rope ? ` (RoPE ${state.rope})` : "";
  const open = (key) => view.open.has(key);
  const common = (stageName, title, shape, rows, table, glyphOf = {}, extra = null) =>
    stage({
      key: `${stageName}:${h}`,
      stage: stageName,
      head: h,
      title,
      shape,
      open: open(`${stageName}:${h}`),
      onToggle: view.onToggle,
      variants: variantsOf(view, stageName, h, rows),
      table,
      glyphOf,
      divergence: divergenceOf(view, stageName, h),
      extra,
    });
  const kvFeatures = head.feature_indices.map((f, c) => (state.reuse ? f : head.kv_head * d + c));
  const shapeHead = `[n][d_head] = [${n}][${d}]`;
  const before = (part, letter) =>
    head[part]
      ? el(
          "div",
          { class: "before-rope", dataset: { part } },
          el(
            "p",
            { class: "note" },
            math(
              t("{matrix} before RoPE; the table below is after the rotation.", { matrix: `${letter}${sub(h + 1)}` }),
            ),
          ),
          glyph({ rows: head[part] }),
        )
      : null;
  const qkv = el(
    "div",
    { class: "qkv-group" },
    el(
      "div",
      { class: "qkv" },
      common(
        "q",
        ["Q", el("sub", { text: h + 1 }), rope && el("span", { class: "rope-mark", text: "↻" })],
        "",
        head.query,
        {
          caption: t("Q, head {head}{rope}: [n][d_head]", { head: h + 1, rope }),
          colLabels: dims(head.feature_indices),
        },
        {},
        before("query_before_rope", "Q"),
      ),
      common(
        "k",
        ["K", el("sub", { text: h + 1 }), rope && el("span", { class: "rope-mark", text: "↻" })],
        "",
        head.key,
        { caption: t("K, head {head}{rope}: [n][d_head]", { head: h + 1, rope }), colLabels: dims(kvFeatures) },
        {},
        before("key_before_rope", "K"),
      ),
      common("v", ["V", el("sub", { text: h + 1 })], "", head.value, {
        caption: t("V, head {head}: [n][d_head]", { head: h + 1 }),
        colLabels: dims(kvFeatures),
      }),
    ),
    shapeLabel(shapeHead),
    rope ? el("span", { class: "shape", text: t("RoPE ↻ on Q, K") }) : null,
  );
  const masked = masks(head);
  const keyCols = Array.from({ length: n }, (_, j) => `k${j + 1}`);
  const scores = common(
    "scores",
    ["S", el("sub", { text: h + 1 })],
    `[n][n] = [${n}][${n}]`,
    head.scores,
    {
      caption: t("Scores Q K^T / √{d}, head {head} (masked cells: −∞ before the softmax)", { d, head: h + 1 }),
      colLabels: keyCols,
      rowLabel: (i) => `q${i + 1}`,
      masked,
    },
    { masked },
  );
  const weights = weightsStage(view, head, masked);
  const output = common("head-output", ["O", el("sub", { text: h + 1 })], shapeHead, head.output, {
    caption: t("Output of head {head} (weights × V)", { head: h + 1 }),
    colLabels: dims(kvFeatures),
  });
  const shares =
    state.kv < state.heads
      ? " · " +
        t("K, V from K/V head {kv}, shared with {heads}", {
          kv: head.kv_head + 1,
          heads: new Intl.ListFormat(locale).format(sharers(response, head)),
        })
      : "";
  const list = head.feature_indices.map((f) => f + 1);
  const features =
    list.length === 1
      ? t("reads feature {feature}", { feature: list[0] })
      : head.features
        ? t("reads features {first}–{last}", { first: head.features[0] + 1, last: head.features[1] })
        : t("reads features {list}", { list: list.join(", ") });
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
    el(
      "h3",
      { class: "lane-title", id: `lane-${h}` },
      t("Head {head}", { head: h + 1 }),
      " ",
      el("span", { class: "muted", text: `${features}${shares}` }),
      same
        ? el("span", { class: "divergence-badge identical", text: t("identical: every number equals the correct one") })
        : null,
    ),
    el(
      "div",
      { class: "lane-flow" },
      qkv,
      arrow(`QKᵀ ÷ √${d}`),
      scores,
      arrow(state.causal ? t("mask, softmax") : "softmax", true),
      weights,
      arrow("A·V", true),
      output,
    ),
  );
}

function sharers(response, head) {
  return response.heads
    .filter((other) => other.kv_head === head.kv_head && other.index !== head.index)
    .map((o) => t("head {head}", { head: o.index + 1 }));
}

function weightsStage(view, head, masked) {
  const h = head.index;
  const variants = variantsOf(view, "weights", h, head.weights);
  const before = view.previous?.heads[h];
  const picked = view.picked && view.picked[0] === h ? view.picked.slice(1) : null;
  const tables = variants.map((v) =>
    el(
      "div",
      { class: "variant", dataset: { variant: v.name } },
      heatmap({
        head: h,
        weights: v.rows,
        masked: v.name === "main" ? masked : masks(view.broken && v.name === "broken" ? view.broken.heads[h] : head),
        id: v.name === "main" ? `heatmap-${h}` : `heatmap-${v.name}-${h}`,
        title:
          variants.length > 1
            ? t("Weights, head {head} ({variant})", { head: h + 1, variant: VARIANT_NAMES[v.name] })
            : t("Weights, head {head}", { head: h + 1 }),
        marks: v.marks || (before && v.name === "main" ? changes(before.weights, head.weights) : null),
        pick: v.name === "main" ? (i, j) => view.pick(h, i, j) : null,
        picked: v.name === "main" ? picked : null,
      }),
    ),
  );
  const divergence = divergenceOf(view, "weights", h);
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
      shapeLabel(`[n][n] = [${head.weights.length}][${head.weights.length}]`),
    ),
    el("div", { class: "weights-tables" }, tables),
  );
}

function identity(size) {
  return Array.from({ length: size }, (_, i) => Array.from({ length: size }, (_, j) => (i === j ? 1 : 0)));
}

function projectionsBlock(view) {
  const { state, response } = view;
  const { n, d_model: dm, heads, d_head: d, kv_heads: kv } = response.shape;
  const open = view.open.has("projections");
  const learned = state.qkv === "learned";
  const names = [
    ["query", "W_Q"],
    ["key", "W_K"],
    ["value", "W_V"],
  ];
  const matrices = names.map(([part, label]) => [label, view.projections[part] || identity(dm)]);
  const owners = (label) => Array.from({ length: label === "W_Q" ? dm : kv * d }, (_, c) => String(Math.floor(c / d)));
  return el(
    "div",
    { class: "block projections", dataset: { part: "projections" } },
    el(
      "button",
      {
        type: "button",
        class: "stage-open",
        "aria-expanded": open ? "true" : "false",
        "aria-controls": "numbers-projections",
        onclick: () => view.onToggle("projections"),
      },
      el(
        "span",
        { class: "glyphs" },
        matrices.map(([, m]) => glyph({ rows: m, cell: 7 })),
      ),
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
    ),
    el(
      "div",
      { class: "stage-numbers", id: "numbers-projections", hidden: !open },
      matrices.map(([label, m]) =>
        el(
          "table",
          {},
          el(
            "caption",
            {},
            math(
              t("{matrix} (row: input coordinate)", {
                matrix: `${label} [d_model][${label === "W_Q" ? "d_model" : "kv·d_head"}]`,
              }),
            ),
          ),
          matrixRows(m, owners(label)),
        ),
      ),
    ),
    el(
      "p",
      { class: "block-note" },
      math(
        [
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
        ]
          .filter(Boolean)
          .join("; ")
          .concat("."), // the translated words outside a template literal, where the extractor sees them
      ),
    ),
  );
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
