// The colour legend of the weights heatmaps: the scale, masked cells, and change marks.

import { viridis } from "./color.js";
import { el } from "./dom.js";

// compact: the canvas heatmaps of the trained-heads page (masked cells light grey, no change marks).
export function legend({ compact = false } = {}) {
  const stops = Array.from({ length: 11 }, (_, i) => `rgb(${viridis(i / 10).join(", ")}) ${i * 10}%`).join(", ");
  const bar = el("span", { class: "legend-bar", "aria-hidden": "true" });
  bar.style.background = `linear-gradient(to right, ${stops})`; // CSSOM: the CSP forbids style attributes
  return el("div", { class: "legend", role: "note", "aria-label": "How to read the heatmaps" },
    el("span", { class: "legend-scale" },
      el("span", { text: "0" }),
      bar,
      el("span", { text: "1" }),
      el("span", { class: "legend-label", text: "weight (colour-blind-safe scale)" })),
    compact
      ? el("span", {}, el("span", { class: "legend-masked-grey", "aria-hidden": "true" }), " masked: a future key")
      : el("span", {}, el("span", { class: "legend-masked", "aria-hidden": "true", text: "·" }), " masked: a future key"),
    compact ? el("span", {}, " rows: each byte as a query; outlined: the chosen byte")
      : el("span", {}, el("span", { class: "legend-changed", "aria-hidden": "true", text: "▲▼" }), " changed by your last edit"));
}
