// Events over time: one column per day on a real time axis (every day of the range, a day
// without events is 0), a y axis with round ticks, the still-open day outlined, and a day whose
// groups are hidden drawn as a hatched gap that says so, never as a number. The table beside it
// is the accessible truth, collapsed under it as for the bar charts.

import { el } from "./dom.js";
import { hidden, numbers, svg } from "./bars.js";
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

// days: [{day: "YYYY-MM-DD", value: number|null}], oldest first; openDay: the day still counting.
export function columnChart({ title, days, valueLabel, id, k = 5, openDay = "" }) {
  const width = 400,
    height = 200,
    left = 40,
    bottom = 24,
    top = 10;
  const plotW = width - left - 8,
    plotH = height - top - bottom;
  const shown = days.filter((d) => d.value !== null).map((d) => d.value);
  const scale = ticks(Math.max(1, ...shown));
  const yMax = scale[scale.length - 1];
  const y = (v) => top + plotH - (v / yMax) * plotH;
  const slot = plotW / Math.max(1, days.length);
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    class: "chart columns",
    role: "img",
    "aria-label": `${title}: ${days.map((d) => `${d.day} ${d.value ?? hidden(k)}`).join(", ")}`,
  });
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
  chart.append(defs);
  for (const t of scale) {
    chart.append(svg("line", { x1: left, x2: width - 8, y1: y(t), y2: y(t), class: "grid" }));
    chart.append(svg("text", { x: left - 6, y: y(t) + 4, "text-anchor": "end", class: "tick" }, String(t)));
  }
  const labelEvery = Math.max(1, Math.ceil(days.length / 7));
  days.forEach((d, i) => {
    const x = left + i * slot + slot * 0.15,
      w = Math.max(1, slot * 0.7);
    if (d.value === null) {
      chart.append(svg("rect", { x, y: top, width: w, height: plotH, fill: `url(#${id}-hatch)`, class: "hidden-day" }));
    } else {
      chart.append(
        svg("rect", {
          x,
          y: y(d.value),
          width: w,
          height: y(0) - y(d.value),
          class: d.day === openDay ? "bar open" : "bar",
        }),
      );
    }
    const last = i === days.length - 1;
    if ((i % labelEvery === 0 && days.length - 1 - i >= labelEvery) || last) {
      // the last day always, uncrowded
      // the first day starts at its bar, clear of the axis's "0"; the last ends at its bar
      chart.append(
        svg(
          "text",
          {
            x: last ? x + w : i === 0 ? x : x + w / 2,
            y: height - bottom + 16,
            "text-anchor": last ? "end" : i === 0 ? "start" : "middle",
            class: "tick",
          },
          d.day.slice(5),
        ),
      );
    }
  });
  chart.append(svg("line", { x1: left, x2: width - 8, y1: y(0), y2: y(0), class: "axis" }));
  const legend = [
    t("{what} per UTC day", { what: valueLabel }),
    days.some((d) => d.day === openDay) ? t("outlined: today, still counting") : "",
    days.some((d) => d.value === null) ? t("hatched: {why}", { why: hidden(k) }) : "",
  ]
    .filter(Boolean)
    .join("; ");
  const table = el(
    "table",
    { class: "data" },
    el("caption", { text: title }),
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        el("th", { scope: "col", text: t("day") }),
        el("th", { scope: "col", text: valueLabel }),
        el("th", { scope: "col", text: t("note") }),
      ),
    ),
    el(
      "tbody",
      {},
      days.map((d) =>
        el(
          "tr",
          {},
          el("th", { scope: "row", text: d.day }),
          el("td", { text: d.value === null ? hidden(k) : String(d.value) }),
          el("td", { text: d.day === openDay ? t("today: still counting") : "" }),
        ),
      ),
    ),
  );
  return el(
    "section",
    { class: "chart-block", id, "aria-label": title },
    el("h2", { text: title }),
    el("figure", { class: "columns-figure" }, chart, el("figcaption", { class: "note", text: legend })),
    numbers(title, table),
  );
}
