// An attention matrix as an HTML table: a number in every cell, colour for the eye, a caption
// and a one-line summary for everyone. Cells carry data-head/row/col/value (unrounded).

import { paint } from "./color.js";
import { el, fmt } from "./dom.js";

export function summary(weights) {
  const last = weights.length - 1;
  const row = weights[last];
  const top = row.indexOf(Math.max(...row));
  return `query ${last + 1} puts ${fmt(row[top])} on token ${top + 1}`;
}

export function heatmap({ head, weights, masked = null, title, marks = null, id }) {
  const n = weights.length;
  const table = el("table", { class: "heatmap", id },
    el("caption", { text: title }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, el("span", { class: "visually-hidden", text: "query \\ key" })),
      ...Array.from({ length: n }, (_, j) => el("th", { scope: "col", text: `key ${j + 1}` })))),
  );
  const body = el("tbody");
  weights.forEach((row, i) => {
    const tr = el("tr", {}, el("th", { scope: "row", text: `query ${i + 1}` }));
    row.forEach((value, j) => {
      const isMasked = masked && masked[i][j];
      const cell = el("td", {
        dataset: { head: String(head), row: String(i), col: String(j), value: String(value) },
        class: ["cell", isMasked ? "masked" : "", marks && marks[i][j] ? "changed" : ""].join(" ").trim(),
      }, isMasked ? el("span", { "aria-label": "masked", text: "·" }) : fmt(value));
      if (!isMasked) paint(cell, value);
      if (marks && marks[i][j]) cell.append(el("span", { class: "mark", "aria-label": "differs", text: "Δ" }));
      tr.append(cell);
    });
    body.append(tr);
  });
  table.append(body);
  return el("figure", { class: "heatmap-figure" }, table, el("p", { class: "summary", text: summary(weights) }));
}
