// @ts-check
// The colour legend: the weights' scale, masked cells, change marks; with `signed`, the scale of
// every other matrix (the workbench's glyphs); `compact`: the trained-heads page's canvases.

import { diverging, viridis } from "./color.js";
import { el } from "./dom.js";
import { t } from "../i18n.js";

function scaleBar(colour, stops) {
  const bar = el("span", { class: "legend-bar", "aria-hidden": "true" });
  const css = Array.from({ length: 11 }, (_, i) => `rgb(${colour(stops(i / 10)).join(", ")}) ${i * 10}%`).join(", ");
  bar.style.background = `linear-gradient(to right, ${css})`; // CSSOM: the CSP forbids style attributes
  return bar;
}

export function legend({ compact = false, signed = false } = {}) {
  return el(
    "div",
    { class: "legend", role: "note", "aria-label": t("How to read the colours") },
    el(
      "span",
      { class: "legend-scale" },
      el("span", { text: "0" }),
      scaleBar(viridis, (t) => t),
      el("span", { text: "1" }),
      el("span", { class: "legend-label", text: t("weight (colour-blind-safe scale)") }),
    ),
    signed
      ? el(
          "span",
          { class: "legend-scale" },
          el("span", { text: "−" }),
          scaleBar(diverging, (t) => 2 * t - 1),
          el("span", { text: "+" }),
          el("span", { class: "legend-label", text: t("other numbers, to each matrix's largest") }),
        )
      : null,
    compact
      ? el(
          "span",
          { class: "for-bytes" },
          el("span", { class: "legend-masked-grey", "aria-hidden": "true" }),
          " ",
          t("masked: a future key"),
        )
      : el(
          "span",
          {},
          el("span", { class: "legend-masked", "aria-hidden": "true", text: "·" }),
          " ",
          t("masked: a future key"),
        ),
    compact
      ? el("span", {}, " ", t("rows: each token as a query; outlined: the chosen one"))
      : el(
          "span",
          {},
          el("span", { class: "legend-changed", "aria-hidden": "true", text: "▲▼" }),
          " ",
          t("changed by your last edit"),
        ),
  );
}
