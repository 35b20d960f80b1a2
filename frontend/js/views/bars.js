// A horizontal bar chart in SVG, with a data table beside it (the table is the accessible truth).

import { el } from "./dom.js";
import { scrollRegion } from "./matrix.js";

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

export function barChart({ title, rows, valueLabel, id }) {
  // rows: [{label, value (number|null), note?}]
  const shown = rows.filter((r) => r.value !== null);
  const max = Math.max(1, ...shown.map((r) => r.value));
  const width = 420, barHeight = 22, left = 170;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${rows.length * barHeight + 10}`, class: "chart", role: "img",
    "aria-label": `${title}: ${rows.map((r) => `${r.label} ${r.value ?? "suppressed"}`).join(", ")}` });
  rows.forEach((r, i) => {
    const y = i * barHeight + 4;
    const label = svg("text", { x: 0, y: y + 14 });
    label.textContent = r.label.length > 26 ? r.label.slice(0, 25) + "…" : r.label;
    chart.append(label);
    if (r.value !== null) {
      chart.append(svg("rect", { x: left, y, width: Math.max(1, (r.value / max) * (width - left - 50)), height: barHeight - 6, class: "bar" }));
    }
    const value = svg("text", { x: r.value !== null ? left + (r.value / max) * (width - left - 50) + 4 : left, y: y + 14 });
    value.textContent = r.value === null ? "suppressed" : String(r.value);
    chart.append(value);
  });
  const table = el("table", { class: "data" }, el("caption", { text: title }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "item" }), el("th", { scope: "col", text: valueLabel }),
      el("th", { scope: "col", text: "note" }))),
    el("tbody", {}, rows.map((r) => el("tr", {}, el("th", { scope: "row", text: r.label }),
      el("td", { text: r.value === null ? "suppressed" : String(r.value) }), el("td", { text: r.note || "" })))));
  return el("section", { class: "chart-block", id, "aria-label": title }, el("h2", { text: title }),
    el("div", { class: "chart-pair" }, chart, scrollRegion(`${title}: the numbers`, table)));
}
