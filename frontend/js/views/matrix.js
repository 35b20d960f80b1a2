// A small matrix of numbers (Q/K/V slices, concatenated outputs) as a labelled table.

import { el, fmt } from "./dom.js";

export function matrix({ rows, caption, colLabels, rowLabel = (i) => `token ${i + 1}`, marks = null, className = "" }) {
  const cols = colLabels || rows[0].map((_, j) => `dim ${j + 1}`);
  return el("table", { class: `matrix ${className}`.trim() },
    el("caption", { text: caption }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, el("span", { class: "visually-hidden", text: "row" })),
      ...cols.map((c) => el("th", { scope: "col", text: c })))),
    el("tbody", {}, rows.map((row, i) => el("tr", {}, el("th", { scope: "row", text: rowLabel(i) }),
      ...row.map((v, j) => el("td", { class: marks && marks[i][j] ? "changed" : "", dataset: { value: String(v) } },
        fmt(v), marks && marks[i][j] ? el("span", { class: "mark", "aria-label": "differs", text: "Δ" }) : null))))),
  );
}
