// @ts-check
// Events over time: one column per day on a real time axis (every day of the range, a day
// without events is 0), a y axis with round ticks, the still-open day outlined, and a day whose
// groups are hidden drawn as a hatched gap that says so, never as a number. The table beside it
// is the accessible truth, collapsed under it as for the bar charts.

import { el } from "./dom.js";
import { dataTable, hidden, numbers, svg } from "./bars.js";
import { t } from "../i18n.js";

// Round tick steps (1, 2, 5 x 10^n) giving at most `count` ticks up to `max`.
export function ticks(max, count = 4) {
  if (max <= 0) return [0];
  const raw = max / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  const out = [];
  for (let t = 0; t <= max + step / 2; t += step) out.push(t);
  if (out[out.length - 1] < max) out.push(out[out.length - 1] + step);
  return out;
}

const [WIDTH, HEIGHT, LEFT, BOTTOM, TOP] = [400, 200, 40, 24, 10];

/**
 * Events over time, one column per day.
 * @param {{ title: string, days: { day: string, value: number | null }[], valueLabel: string, id: string, k?: number,
 *   openDay?: string }} chart days oldest first; openDay the day still counting
 */
export function columnChart({ title, days, valueLabel, id, k = 5, openDay = "" }) {
  const legend = [
    t("{what} per UTC day", { what: valueLabel }),
    days.some((d) => d.day === openDay) ? t("outlined: today, still counting") : "",
    days.some((d) => d.value === null) ? t("hatched: {why}", { why: hidden(k) }) : "",
  ]
    .filter(Boolean)
    .join("; ");
  const cells = days.map((d) => [
    d.day,
    d.value === null ? hidden(k) : String(d.value),
    d.day === openDay ? t("today: still counting") : "",
  ]);
  const table = dataTable(title, [t("day"), valueLabel, t("note")], cells);
  const chart = columns({ title, days, id, k, openDay });
  return el(
    "section",
    { class: "chart-block", id, "aria-label": title },
    el("h2", { text: title }),
    el("figure", { class: "columns-figure" }, chart, el("figcaption", { class: "note", text: legend })),
    numbers(title, table),
  );
}

function columns({ title, days, id, k, openDay }) {
  const plotW = WIDTH - LEFT - 8;
  const plotH = HEIGHT - TOP - BOTTOM;
  const shown = days.filter((d) => d.value !== null).map((d) => d.value);
  const scale = ticks(Math.max(1, ...shown));
  const yMax = scale[scale.length - 1];
  const y = (v) => TOP + plotH - (v / yMax) * plotH;
  const slot = plotW / Math.max(1, days.length);
  const chart = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    class: "chart columns",
    role: "img",
    "aria-label": `${title}: ${days.map((d) => `${d.day} ${d.value ?? hidden(k)}`).join(", ")}`,
  });
  chart.append(hatching(id));
  for (const tick of scale) {
    chart.append(svg("line", { x1: LEFT, x2: WIDTH - 8, y1: y(tick), y2: y(tick), class: "grid" }));
    chart.append(svg("text", { x: LEFT - 6, y: y(tick) + 4, "text-anchor": "end", class: "tick" }, String(tick)));
  }
  const labelEvery = Math.max(1, Math.ceil(days.length / 7));
  days.forEach((d, i) => {
    const x = LEFT + i * slot + slot * 0.15;
    const w = Math.max(1, slot * 0.7);
    const bar =
      d.value === null
        ? { x, y: TOP, width: w, height: plotH, fill: `url(#${id}-hatch)`, class: "hidden-day" }
        : { x, y: y(d.value), width: w, height: y(0) - y(d.value), class: d.day === openDay ? "bar open" : "bar" };
    chart.append(svg("rect", bar));
    // the last day always, the others uncrowded
    const last = i === days.length - 1;
    if ((i % labelEvery === 0 && days.length - 1 - i >= labelEvery) || last) chart.append(dayLabel(d, i, x, w, last));
  });
  chart.append(svg("line", { x1: LEFT, x2: WIDTH - 8, y1: y(0), y2: y(0), class: "axis" }));
  return chart;
}

// The pattern a hidden day is drawn with: a hatched gap, never a number.
function hatching(id) {
  const hatch = svg("pattern", {
    id: `${id}-hatch`,
    width: 6,
    height: 6,
    patternUnits: "userSpaceOnUse",
    patternTransform: "rotate(45)",
  });
  hatch.append(svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, class: "hatch" }));
  const defs = svg("defs", {});
  defs.append(hatch);
  return defs;
}

// A day's label: the first starts at its bar, clear of the axis's "0"; the last ends at its bar.
function dayLabel(d, i, x, w, last) {
  const at = last ? { x: x + w, anchor: "end" } : i === 0 ? { x, anchor: "start" } : { x: x + w / 2, anchor: "middle" };
  const attrs = { x: at.x, y: HEIGHT - BOTTOM + 16, "text-anchor": at.anchor, class: "tick" };
  return svg("text", attrs, d.day.slice(5));
}
