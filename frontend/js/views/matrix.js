// A small matrix of numbers (Q/K/V slices, outputs, concatenation) as a labelled table.

import { el, fmt } from "./dom.js";
import { markCell } from "./marks.js";

export function matrix({ rows, caption, colLabels, rowLabel = (i) => `token ${i + 1}`, marks = null, className = "" }) {
  const cols = colLabels || rows[0].map((_, j) => `dim ${j + 1}`);
  return el("table", { class: `matrix ${className}`.trim() },
    el("caption", { text: caption }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, el("span", { class: "visually-hidden", text: "row" })),
      ...cols.map((c) => el("th", { scope: "col", text: c })))),
    el("tbody", {}, rows.map((row, i) => el("tr", {}, el("th", { scope: "row", text: rowLabel(i) }),
      ...row.map((v, j) => {
        const cell = el("td", { dataset: { value: String(v) } }, fmt(v));
        if (marks && marks[i][j]) markCell(cell, marks[i][j]);
        return cell;
      })))),
  );
}

// A table that may be wider than a phone scrolls inside its own labelled, focusable region.
export function scrollRegion(label, ...children) {
  return el("div", { class: "scroll-region", role: "region", "aria-label": label, tabindex: "0" }, ...children);
}
