// @ts-check
// The inside-the-model page's drawings, each a table whose cells carry their numbers (the accessible truth):
// the logit lens as a grid of streams by positions (the top byte, its probability, the rank of the byte
// that comes next) and a patching grid (a component's cells by positions: the exact effect or attribution
// patching's estimate, coloured against the whole difference the metric measures, flagged where the
// estimate is not to be trusted). Every number is the API's (POST /api/v1/models/{id}/lens and /patch).

import { diverging, fill, viridis } from "./color.js";
import { el, fmt } from "./dom.js";
import { scrollRegion } from "./matrix.js";
import { t } from "../i18n.js";

/** A byte as a learner reads it: a printable character in quotes, or its name (the API's text). */
const shown = (text) => (text.length === 1 && text !== " " ? `‘${text}’` : text === " " ? t("space") : text);
const percent = (p) => `${fmt(100 * p, p >= 0.1 ? 0 : 1)}%`;

/** A stream's name: 0 is the embedding, l the stream after layer l (the last, the model's own output). */
export function streamName(layer, last) {
  if (layer === 0) return t("embedding");
  return layer === last ? t("after layer {layer} (the output)", { layer }) : t("after layer {layer}", { layer });
}

/** A stream's row: its full name, a short one for a phone's width, and a note under it. */
export function streamRow(layer, last) {
  return {
    name: streamName(layer, last),
    short: layer === 0 ? t("embedding") : t("after L{layer}", { layer }),
    note: layer === last ? t("the output") : "",
  };
}

/** A head's name, counted from 1 as people count: layer 0 head 1 of the API is "layer 1 head 2". */
export const headName = (layer, head) => t("layer {layer} head {head}", { layer: layer + 1, head: head + 1 });
/** The same, short: "L1 H2". */
export const headShort = (layer, head) => `L${layer + 1} H${head + 1}`;

/** A row's header: its short name in view (a phone's width), its full name for a screen reader, a note under it. */
function rowHead(row) {
  return el(
    "th",
    { scope: "row", class: "in-row" },
    el("span", { "aria-hidden": "true", text: row.short ?? row.name }),
    row.short ? el("span", { class: "visually-hidden", text: row.name }) : null,
    row.note ? el("small", { text: row.note }) : null,
  );
}

function positionHeads(tokens) {
  return tokens.map((token) =>
    el(
      "th",
      { scope: "col", "aria-label": t("position {position}: {byte}", { position: token.index + 1, byte: token.text }) },
      el("span", { class: "in-pos", "aria-hidden": "true", text: String(token.index + 1) }),
      el("span", { class: "in-byte", "aria-hidden": "true", text: shown(token.text) }),
    ),
  );
}

/**
 * The lens as a grid: a row per stream (or per head's write), a column per position.
 * @param {{ rows: { name: string, short?: string, note?: string, layer: number, positions: any[] }[], tokens: any[], title: string,
 *   stage: string, differs?: { layer: number, position: number } | null }} view
 */
export function lensGrid({ rows, tokens, title, stage, differs = null }) {
  const body = rows.map((row) => {
    const cells = row.positions.map((p) => lensCell(row, p, differs));
    return el("tr", { dataset: { layer: String(row.layer) } }, rowHead(row), ...cells);
  });
  const table = el(
    "table",
    { class: "heatmap in-lens", dataset: { stage } },
    el("caption", { text: title }),
    el(
      "thead",
      {},
      el("tr", {}, el("th", { scope: "col", class: "corner in-row", text: t("stream") }), ...positionHeads(tokens)),
    ),
    el("tbody", {}, ...body),
  );
  return scrollRegion(title, table);
}

function lensCell(row, p, differs) {
  const best = p.top[0];
  const next = p.next
    ? t("next {byte}: rank {rank}", { byte: shown(p.next.text), rank: p.next.rank })
    : t("next: not in the text");
  const cell = el(
    "td",
    {
      class: `cell in-lens-cell${p.next?.rank === 1 ? " in-right" : ""}`,
      title: next,
      dataset: {
        layer: String(row.layer),
        position: String(p.position),
        top: String(best.byte),
        probability: String(best.probability),
        rank: p.next ? String(p.next.rank) : "",
      },
    },
    el("span", { class: "in-top", text: shown(best.text) }),
    el("span", { class: "in-prob", text: percent(best.probability) }),
    el("span", { class: "in-rank", text: p.next ? `#${p.next.rank}` : "–", "aria-label": next }),
  );
  fill(cell, viridis(best.probability));
  if (differs && differs.layer === row.layer && differs.position === p.position) cell.classList.add("in-first");
  return cell;
}

/**
 * A patching grid: a row per component (a head, or a stream), a column per position; each cell the value
 * of `values` there, coloured against `whole` (the clean metric minus the corrupted), a button that picks it.
 * @param {{ values: number[][][] | number[][], rows: { name: string, short?: string, note?: string, index: number[] }[], tokens: any[],
 *   title: string, stage: string, whole: number, flagged: Map<string, string>, picked: string,
 *   differs?: string, pick: (cell: number[]) => void }} view
 */
export function effectGrid({ values, rows, tokens, title, stage, whole, flagged, picked, differs = "", pick }) {
  const body = rows.map((row) => {
    const line = row.index.reduce((at, i) => at[i], /** @type {any} */ (values));
    const cells = line.map((value, position) => {
      const cell = [...row.index, position];
      const key = cell.join(".");
      return effectCell({ value, key, cell, name: row.name, whole, why: flagged.get(key), picked, differs, pick });
    });
    return el("tr", {}, rowHead(row), ...cells);
  });
  const table = el(
    "table",
    { class: "heatmap in-effects", dataset: { stage } },
    el("caption", { text: title }),
    el(
      "thead",
      {},
      el("tr", {}, el("th", { scope: "col", class: "corner in-row", text: "" }), ...positionHeads(tokens)),
    ),
    el("tbody", {}, ...body),
  );
  return scrollRegion(title, table);
}

function effectCell({ value, key, cell, name, whole, why, picked, differs, pick }) {
  const position = cell[cell.length - 1] + 1;
  // the name starts with the number shown, as a voice user says it
  const label = t("{value}, {component} at position {position}", { component: name, position, value: fmt(value, 2) });
  const button = el(
    "button",
    {
      type: "button",
      class: "cell-pick",
      "aria-pressed": picked === key ? "true" : "false",
      "aria-label": why ? label.concat(" ", t("(flagged)")) : label,
      onclick: () => pick(cell),
    },
    fmt(value, 2),
    why ? el("span", { class: "in-flag", "aria-hidden": "true", text: "⚑" }) : null,
  );
  const node = el(
    "td",
    {
      class: `cell${picked === key ? " picked" : ""}${why ? " flagged" : ""}${differs === key ? " in-first" : ""}`,
      dataset: { cell: key, value: String(value), ...(why ? { why } : {}) },
    },
    button,
  );
  fill(node, diverging(whole ? value / Math.abs(whole) : 0));
  return node;
}
