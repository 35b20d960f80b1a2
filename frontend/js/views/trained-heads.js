// @ts-check
// The trained-heads page's drawings (frontend/js/pages/trained-heads.js): every layer x head with its
// label and its weights for the chosen token, the head view (one line per head of a layer from the chosen
// token to each token), and the table of the chosen token's weights.

import { t } from "../i18n.js";
import { el, fmt } from "./dom.js";
import { headCanvas, strongest } from "./head-canvas.js";
import { scrollRegion } from "./matrix.js";

// The heads' labels are the API's names of their patterns (data-label keeps them); shown translated.
const LABELS = {
  "previous token": t("previous token"),
  induction: t("induction"),
  "first token": t("first token"),
  "current token": t("current token"),
  "next token": t("next token"),
  "no single pattern": t("no single pattern"),
};
/** @param {any} head */
export const labelOf = (head) => LABELS[head.label] ?? head.label;

/**
 * @typedef {object} Shown what every drawing of the page reads
 * @property {any} trace the model's answer for the text
 * @property {any} model the model's card
 * @property {number | null} selected the chosen token (0-based)
 * @property {(token: any) => string} name a token's name for people ("byte 3 “a”")
 * @property {(key: string) => void} toggle switches the head `layer.head` off or on
 * @property {(row: number) => void} pick chooses a token
 */

/** One layer: each head's figure. @param {any} layer @param {Shown} shown */
export function layerSection(layer, shown) {
  return el(
    "section",
    { class: "th-layer", "aria-labelledby": `layer-${layer.index}` },
    el("h2", { id: `layer-${layer.index}`, text: t("Layer {layer}", { layer: layer.index + 1 }) }),
    el("div", { class: "th-heads" }, ...layer.heads.map((head) => headFigure(layer, head, shown))),
  );
}

/** A head: its label and score, its switch, its weights, and where the chosen token looks. */
function headFigure(layer, head, shown) {
  const { trace, model, selected: i } = shown;
  const name = t("Layer {layer} head {head}", { layer: layer.index + 1, head: head.index + 1 });
  const best = i === null ? null : strongest(head.weights, i, model.causal);
  const reads =
    best === null
      ? t("Choose a byte.")
      : `${shown.name(trace.tokens[i])} → ${shown.name(trace.tokens[best.key])}: ${fmt(best.weight)}`;
  return el(
    "figure",
    {
      class: `th-head${head.off ? " off" : ""}`,
      dataset: { layer: String(layer.index), head: String(head.index), label: head.label },
    },
    caption(layer, head, name, shown),
    headCanvas({
      weights: head.weights,
      selected: i,
      onPick: (row) => shown.pick(row),
      causal: model.causal,
      label: t("{head} weights, labelled {label}", { head: name, label: labelOf(head) }),
    }),
    el("p", { class: "th-reads", text: reads }),
  );
}

/** A head's caption: its label (a button that opens its figure), its score, and its switch. */
function caption(layer, head, name, shown) {
  const score = Math.max(...Object.values(head.pattern_scores).map(Number));
  const pattern = Object.keys(head.pattern_scores).find((p) => head.pattern_scores[p] === score);
  const scored =
    head.ablation && !head.off
      ? t("score {score} → {after} with the heads off", {
          score: fmt(score),
          after: fmt(head.ablation.ablated[pattern]),
        })
      : t("score {score}", { score: fmt(score) });
  const open = (e) =>
    e.target.setAttribute("aria-expanded", String(e.target.closest("figure").classList.toggle("open")));
  const off = el("input", {
    type: "checkbox",
    checked: head.off,
    "aria-label": t("Switch off {head}", { head: name }),
    onchange: () => shown.toggle(`${layer.index}.${head.index}`),
  });
  return el(
    "figcaption",
    {},
    el("button", {
      type: "button",
      class: "link",
      "aria-expanded": "false",
      text: t("Head {head}: {label}", { head: head.index + 1, label: labelOf(head) }),
      onclick: open,
    }),
    el("span", { class: "muted", text: ` (${scored})` }),
    el("label", { class: "th-off" }, off, " ", t("off")),
  );
}

/** The chosen token's weights from every head to every token it can see. @param {Shown} shown */
export function weightsTable(shown) {
  const { trace, model, selected: i } = shown;
  const keys = model.causal ? trace.tokens.slice(0, i + 1) : trace.tokens;
  const header = keys.map((token) =>
    el("th", { scope: "col", "aria-label": shown.name(token), text: `${token.index + 1} ${token.text}` }),
  );
  const rows = trace.layers.flatMap((layer) =>
    layer.heads.map((head) =>
      el(
        "tr",
        {},
        el("th", { scope: "row", text: `L${layer.index + 1} H${head.index + 1} ${labelOf(head)}` }),
        ...head.weights[i].slice(0, keys.length).map((value) => el("td", { text: fmt(value) })),
      ),
    ),
  );
  const table = el(
    "table",
    { class: "th-table" },
    el("caption", {
      text: t("Weights from {token} to every token it can see", { token: shown.name(trace.tokens[i]) }),
    }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: t("Head") }), ...header)),
    el("tbody", {}, ...rows),
  );
  return scrollRegion(t("Weights of the chosen token"), table);
}

const SVG = "http://www.w3.org/2000/svg";
const ROW = 16;

/** An SVG element. @param {string} tag @param {Record<string, any>} attrs @param {string} [text] */
function node(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text) e.textContent = text;
  return e;
}

/**
 * The head view: the chosen token on the left, every token on the right, one line per head of `layer`
 * to each token, as opaque as that head's weight; and the key of the heads' colours.
 * @param {any} layer @param {Shown} shown
 */
export function headLines(layer, shown) {
  const { trace, model, selected: i } = shown;
  const colour = (head) => `hsl(${(head.index * 360) / model.heads} 70% 26%)`; // 4.5:1 on white at every hue
  const picture = node("svg", {
    viewBox: `0 0 320 ${trace.tokens.length * ROW + 4}`,
    class: "th-lines",
    role: "img",
    "aria-label": t("Where each head of layer {layer} sends {token}", {
      layer: layer.index + 1,
      token: shown.name(trace.tokens[i]),
    }),
  });
  trace.tokens.forEach((token, j) => {
    const weight = j === i ? 700 : 400;
    picture.append(node("text", { x: 60, y: j * ROW + 14, "text-anchor": "end", "font-weight": weight }, token.text));
    picture.append(node("text", { x: 260, y: j * ROW + 14 }, token.text));
  });
  // Each head's lines are offset a little from the others' (heads that agree lie side by side, not on top of
  // each other) and never fainter than 0.3, so every head stays readable; the width says the weight.
  for (const head of layer.heads) {
    const offset = (head.index - (layer.heads.length - 1) / 2) * 2.5;
    head.weights[i].forEach((w, j) => {
      if (w > 0.02) picture.append(line(head, i, j, w, offset, colour(head)));
    });
  }
  const keys = layer.heads.map((h) => {
    const key = el("span", { text: "━ ".concat(t("head {head}", { head: h.index + 1 }), " ") });
    key.style.color = colour(h); // the CSS object model: the page's CSP refuses style attributes
    return key;
  });
  return [el("p", { class: "th-key" }, ...keys), picture];
}

function line(head, i, j, w, offset, stroke) {
  return node("line", {
    x1: 66,
    y1: i * ROW + 10 + offset,
    x2: 254,
    y2: j * ROW + 10 + offset,
    "data-head": head.index,
    "data-key": j,
    "data-weight": w.toFixed(3),
    stroke,
    "stroke-opacity": (0.3 + 0.7 * w).toFixed(2),
    "stroke-width": (1 + 2.5 * w).toFixed(2),
  });
}
