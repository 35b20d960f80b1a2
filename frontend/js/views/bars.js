// @ts-check
// A horizontal bar chart in SVG, with its data table one keystroke away (a closed <details>: the
// table is the accessible truth, the chart what an instructor reads first).

import { el } from "./dom.js";
import { scrollRegion } from "./matrix.js";
import { svg } from "./svg.js";
import { t } from "../i18n.js";

export { svg };

// A suppressed figure (null) is never drawn as a bar or a number: it says why it is hidden.
export const hidden = (k) => t("hidden: fewer than {k} learners", { k });

// Words of `text` in lines of at most `width` characters (a longer word gets a line of its own).
export function wrap(text, width) {
  const lines = [];
  for (const word of String(text).split(/\s+/).filter(Boolean)) {
    const last = lines.length ? lines[lines.length - 1] : null;
    if (last !== null && `${last} ${word}`.length <= width) lines[lines.length - 1] = `${last} ${word}`;
    else lines.push(word);
  }
  return lines.length ? lines : [""];
}

/**
 * A horizontal bar chart of `rows` ([{label, value (number|null), note?}]): each label in full (wrapped) above
 * its bar, and the numbers as a table under it.
 * @param {{ title: string, rows: { label: string, value: number | null, note?: string }[], valueLabel: string, id: string, k?: number }} chart
 */
export function barChart({ title, rows, valueLabel, id, k = 5 }) {
  const cells = rows.map((r) => [r.label, r.value === null ? hidden(k) : String(r.value), r.note || ""]);
  return el(
    "section",
    { class: "chart-block", id, "aria-label": title },
    el("h2", { text: title }),
    bars(title, rows, k),
    numbers(title, dataTable(title, [t("item"), valueLabel, t("note")], cells)),
  );
}

function bars(title, rows, k) {
  const shown = rows.filter((r) => r.value !== null);
  const max = Math.max(1, ...shown.map((r) => r.value));
  const [width, lineHeight, barHeight, gap, perLine] = [360, 15, 14, 10, 52];
  const labels = rows.map((r) => wrap(r.label, perLine));
  const height = labels.reduce((sum, lines) => sum + lines.length * lineHeight + barHeight + gap, 6);
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    class: "chart",
    role: "img",
    "aria-label": `${title}: ${rows.map((r) => `${r.label} ${r.value ?? hidden(k)}`).join(", ")}`,
  });
  let y = 0;
  rows.forEach((r, i) => {
    const label = svg("text", { x: 0, y: y + 12 });
    labels[i].forEach((line, j) => {
      const span = svg("tspan", { x: 0, dy: j ? lineHeight : 0 });
      span.textContent = line;
      label.append(span);
    });
    chart.append(label);
    const barTop = y + labels[i].length * lineHeight + 2;
    const length = r.value === null ? 0 : Math.max(1, (r.value / max) * (width - 110));
    if (r.value !== null)
      chart.append(svg("rect", { x: 0, y: barTop, width: length, height: barHeight, class: "bar" }));
    const value = svg("text", { x: length + 4, y: barTop + 12, class: r.value === null ? "hidden-value" : "" });
    value.textContent = r.value === null ? hidden(k) : String(r.value);
    chart.append(value);
    y = barTop + barHeight + gap;
  });
  return chart;
}

/**
 * A chart's data as a table: its column headers, then a row each, the row's first cell its header.
 * @param {string} title @param {string[]} columns @param {string[][]} rows
 */
export function dataTable(title, columns, rows) {
  const body = rows.map(([head, ...cells]) =>
    el("tr", {}, el("th", { scope: "row", text: head }), ...cells.map((text) => el("td", { text }))),
  );
  return el(
    "table",
    { class: "data" },
    el("caption", { text: title }),
    el("thead", {}, el("tr", {}, ...columns.map((text) => el("th", { scope: "col", text })))),
    el("tbody", {}, ...body),
  );
}

// A chart's own table, collapsed under the chart: Enter or Space on its summary opens it.
export function numbers(title, table) {
  return el(
    "details",
    { class: "numbers" },
    el("summary", { text: t("The numbers, as a table") }),
    scrollRegion(t("{chart}: the numbers", { chart: title }), table),
  );
}
