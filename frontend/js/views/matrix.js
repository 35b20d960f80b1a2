// A matrix of numbers as a labelled table (1-based labels); every cell carries data-row,
// data-col (0-based) and data-value (unrounded), the contract browser tests and hosts read.

import { el, fmt, math } from "./dom.js";
import { markCell } from "./marks.js";
import { t } from "../i18n.js";

// owners: per column (or per row with byRow) the head(s) a number belongs to, for highlighting.
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
  return el(
    "table",
    { class: `matrix ${className}`.trim() },
    el("caption", {}, math(caption)),
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        el("th", { scope: "col" }, el("span", { class: "visually-hidden", text: t("row") })),
        ...cols.map((c, j) =>
          el(
            "th",
            { scope: "col", dataset: byRow || owner(0, j) === undefined ? {} : { owner: owner(0, j) } },
            math(c),
          ),
        ),
      ),
    ),
    el(
      "tbody",
      {},
      rows.map((row, i) =>
        el(
          "tr",
          {},
          el("th", {
            scope: "row",
            text: rowLabel(i),
            dataset: byRow && owner(i, 0) !== undefined ? { owner: owner(i, 0) } : {},
          }),
          ...row.map((v, j) => {
            const hidden = Boolean(masked?.[i][j]);
            const dataset = { row: String(i), col: String(j), value: String(v) };
            if (owner(i, j) !== undefined) dataset.owner = owner(i, j);
            const cell = el(
              "td",
              { dataset, class: hidden ? "masked" : "" },
              hidden ? el("span", { text: fmt(v), title: t("masked: becomes −∞ before the softmax") }) : fmt(v),
            );
            if (marks?.[i][j]) markCell(cell, marks[i][j]);
            return cell;
          }),
        ),
      ),
    ),
  );
}

// A table that may be wider than a phone scrolls inside its own labelled, focusable region.
export function scrollRegion(label, ...children) {
  return el("div", { class: "scroll-region", role: "region", "aria-label": label, tabindex: "0" }, ...children);
}
