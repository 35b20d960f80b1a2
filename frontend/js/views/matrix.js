// @ts-check
// A matrix of numbers as a labelled table (1-based labels); every cell carries data-row,
// data-col (0-based) and data-value (unrounded), the contract browser tests and hosts read.

import { el, fmt, math } from "./dom.js";
import { markCell } from "./marks.js";
import { t } from "../i18n.js";

/**
 * owners: per column (or per row with byRow) the head(s) a number belongs to, for highlighting.
 * @param {{ rows: number[][], caption: string, colLabels?: string[], rowLabel?: (i: number) => string,
 *   marks?: any, masked?: boolean[][] | null, owners?: string[] | null, byRow?: boolean, className?: string }} options
 */
export function matrix({
  rows,
  caption,
  colLabels,
  rowLabel = (i) => t("token {token}", { token: i + 1 }),
  marks = null,
  masked = null,
  owners = null,
  byRow = false,
  className = "",
}) {
  const cols = colLabels || rows[0].map((_, j) => t("dim {dim}", { dim: j + 1 }));
  const owner = (i, j) => (owners ? owners[byRow ? i : j] : undefined);
  const header = cols.map((c, j) =>
    el("th", { scope: "col", dataset: byRow || owner(0, j) === undefined ? {} : { owner: owner(0, j) } }, math(c)),
  );
  const body = rows.map((row, i) => {
    const label = el("th", {
      scope: "row",
      text: rowLabel(i),
      dataset: byRow && owner(i, 0) !== undefined ? { owner: owner(i, 0) } : {},
    });
    const cells = row.map((v, j) =>
      numberCell(v, i, j, { hidden: Boolean(masked?.[i][j]), owner: owner(i, j), marks }),
    );
    return el("tr", {}, label, ...cells);
  });
  const corner = el("th", { scope: "col" }, el("span", { class: "visually-hidden", text: t("row") }));
  return el(
    "table",
    { class: `matrix ${className}`.trim() },
    el("caption", {}, math(caption)),
    el("thead", {}, el("tr", {}, corner, ...header)),
    el("tbody", {}, ...body),
  );
}

// A number's cell: data-row, data-col (0-based), data-value (unrounded), its owner, a mark if it changed.
function numberCell(v, i, j, { hidden, owner, marks }) {
  const dataset = { row: String(i), col: String(j), value: String(v) };
  if (owner !== undefined) dataset.owner = owner;
  const shown = hidden ? el("span", { text: fmt(v), title: t("masked: becomes −∞ before the softmax") }) : fmt(v);
  const cell = el("td", { dataset, class: hidden ? "masked" : "" }, shown);
  if (marks?.[i][j]) markCell(cell, marks[i][j]);
  return cell;
}

// A table that may be wider than a phone scrolls inside its own labelled, focusable region.
export function scrollRegion(label, ...children) {
  return el("div", { class: "scroll-region", role: "region", "aria-label": label, tabindex: "0" }, ...children);
}
