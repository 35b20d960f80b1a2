// A horizontal bar chart in SVG, with a data table beside it (the table is the accessible truth).

import { el } from "./dom.js";
import { scrollRegion } from "./matrix.js";

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

// A suppressed figure (null) is never drawn as a bar or a number: it says why it is hidden.
export const hidden = (k) => `hidden: fewer than ${k} learners`;

export function barChart({ title, rows, valueLabel, id, k = 5 }) {
  // rows: [{label, value (number|null), note?}]; each label in full on its own line, the bar below.
  const shown = rows.filter((r) => r.value !== null);
  const max = Math.max(1, ...shown.map((r) => r.value));
  const width = 420, rowHeight = 40, barTop = 18;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${rows.length * rowHeight + 6}`, class: "chart", role: "img",
    "aria-label": `${title}: ${rows.map((r) => `${r.label} ${r.value ?? hidden(k)}`).join(", ")}` });
  rows.forEach((r, i) => {
    const y = i * rowHeight;
    const label = svg("text", { x: 0, y: y + 13 });
    label.textContent = r.label;
    chart.append(label);
    const length = r.value === null ? 0 : Math.max(1, (r.value / max) * (width - 70));
    if (r.value !== null) chart.append(svg("rect", { x: 0, y: y + barTop, width: length, height: 14, class: "bar" }));
    const value = svg("text", { x: length + 4, y: y + barTop + 12, class: r.value === null ? "hidden-value" : "" });
    value.textContent = r.value === null ? hidden(k) : String(r.value);
    chart.append(value);
  });
  const table = el("table", { class: "data" }, el("caption", { text: title }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "item" }), el("th", { scope: "col", text: valueLabel }),
      el("th", { scope: "col", text: "note" }))),
    el("tbody", {}, rows.map((r) => el("tr", {}, el("th", { scope: "row", text: r.label }),
      el("td", { text: r.value === null ? hidden(k) : String(r.value) }), el("td", { text: r.note || "" })))));
  return el("section", { class: "chart-block", id, "aria-label": title }, el("h2", { text: title }),
    el("div", { class: "chart-pair" }, chart, scrollRegion(`${title}: the numbers`, table)));
}
