// @ts-check
// One stage of the attention block: its glyph and name (a button that opens its numbers), its
// shape, and its numbers as tables, one per variant ("main": what the controls compute;
// "broken": the compared failure mode; "yours": a learner's own code). The tables are in the DOM
// at all times, shown when the stage is open (data-stage, data-head, [data-variant] cells).

import { el, math } from "./dom.js";
import { glyph } from "./glyph.js";
import { matrix } from "./matrix.js";
import { t } from "../i18n.js";

export const VARIANT_NAMES = { main: t("correct"), broken: t("broken"), yours: t("yours") };

/**
 * variants: [{name, rows, marks}]; table: matrix() options shared by every variant's table.
 * @param {{ key: string, stage: string, head?: number | null, title: any, shape: string, variants: any[],
 *   open: boolean, onToggle: (key: string) => void, glyphOf?: object, table?: any, divergence?: string | null,
 *   extra?: any }} options
 */
export function stage({
  key,
  stage,
  head = null,
  title,
  shape,
  variants,
  open,
  onToggle,
  glyphOf = {},
  table = {},
  divergence = null,
  extra = null,
}) {
  const id = `numbers-${key.replace(":", "-")}`;
  const several = variants.length > 1;
  const tables = variants.map((v) =>
    el(
      "div",
      { class: "variant", dataset: { variant: v.name } },
      matrix({
        ...table,
        rows: v.rows,
        marks: v.marks || null,
        caption: `${table.caption}${several ? ` (${VARIANT_NAMES[v.name]})` : ""}`,
      }),
    ),
  );
  const dataset = { stage };
  if (head !== null) Object.assign(dataset, { head: String(head), owner: String(head) });
  if (divergence) dataset.divergence = divergence;
  return el(
    "figure",
    { class: `stage${open ? " open" : ""}`, dataset },
    divergence === "first" ? el("p", { class: "divergence-badge", text: t("first difference") }) : null,
    opener({ key, id, title, shape, variants, open, onToggle, glyphOf }),
    el("div", { class: "stage-numbers", id, hidden: !open }, extra, ...tables),
  );
}

// The stage's glyphs and name: a button that opens its numbers.
function opener({ key, id, title, shape, variants, open, onToggle, glyphOf }) {
  const several = variants.length > 1;
  const glyphs = variants.map((v) =>
    el(
      "span",
      { class: `glyph-box variant-${v.name}` },
      glyph({ rows: v.rows, ...glyphOf }),
      several ? el("span", { class: "glyph-caption", text: VARIANT_NAMES[v.name] }) : null,
    ),
  );
  return el(
    "button",
    {
      type: "button",
      class: "stage-open",
      "aria-expanded": open ? "true" : "false",
      "aria-controls": id,
      onclick: () => onToggle(key),
    },
    el("span", { class: "glyphs" }, ...glyphs),
    el(
      "span",
      { class: "stage-label" },
      el("span", { class: "stage-title" }, typeof title === "string" ? math(title) : title),
      shape ? shapeLabel(shape) : null,
      el("span", { class: "visually-hidden", text: open ? t(": hide its numbers") : t(": show its numbers") }),
    ),
  );
}

// "[n][d_head] = [3][2]": the lesson's symbolic shape, then the numbers (hidden on a phone).
export function shapeLabel(text) {
  const [symbolic, numeric] = text.split(" = ");
  return el(
    "span",
    { class: "shape" },
    symbolic,
    numeric ? el("span", { class: "shape-n", text: ` = ${numeric}` }) : null,
  );
}

// Cells of `other` that differ from `expected` (beyond float64 rounding): "differs" marks.
export function differs(expected, other) {
  return other.map((row, i) => row.map((v, j) => (close(v, expected[i][j]) ? null : "differs")));
}

export function close(a, b) {
  return Math.abs(a - b) <= 1e-12 + 1e-9 * Math.abs(b);
}
