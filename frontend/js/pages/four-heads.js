// @ts-check
// The four-heads figure: the preset computed by the API, each head captioned from its data.

import { getJSON, postJSON } from "../api.js";
import { t } from "../i18n.js";
import { $, startPage } from "../shell.js";
import { drawn, el, fmt } from "../views/dom.js";
import { heatmap } from "../views/heatmap.js";
import { scrollRegion } from "../views/matrix.js";

startPage();

// Describe where a head's mass goes, from its weights alone.
export function describe(weights) {
  const n = weights.length;
  const mass = weights[0].map((_, j) => weights.reduce((sum, row) => sum + row[j], 0) / n);
  const diagonal = weights.reduce((sum, row, i) => sum + row[i], 0) / n;
  const uniformity = weights.slice(1).every((row, k) => {
    const visible = row.slice(0, k + 2);
    return Math.max(...visible) - Math.min(...visible) < 0.05;
  });
  const last = weights[n - 1];
  const peaks = last.map((v, j) => [v, j]).sort((a, b) => b[0] - a[0]);
  const [a, b] = peaks;
  if (uniformity) return t("diffuse: each query spreads its weight evenly over the positions it can see");
  if (b[0] > 0.3 && Math.abs(a[1] - b[1]) > 1) {
    return t("bimodal: the last query splits {a} and {b} between positions {first} and {second}", {
      a: fmt(a[0]),
      b: fmt(b[0]),
      first: Math.min(a[1], b[1]) + 1,
      second: Math.max(a[1], b[1]) + 1,
    });
  }
  if (mass[0] > 0.75)
    return t("first-token bias: {percent} % of all attention lands on position 1", { percent: fmt(mass[0] * 100, 0) });
  if (diagonal > 0.6) {
    return t("recency: each query puts most weight on the latest position it can see (on average {percent} %)", {
      percent: fmt(diagonal * 100, 0),
    });
  }
  return t("mixed: the last query's largest weights are {a} on position {first} and {b} on position {second}", {
    a: fmt(a[0]),
    first: a[1] + 1,
    b: fmt(b[0]),
    second: b[1] + 1,
  });
}

async function init() {
  const preset = await getJSON("/api/v1/presets/four-heads");
  const result = await postJSON("/api/v1/attention", { ...preset.request, include: ["weights", "masked_scores"] });
  $("figures").replaceChildren(
    ...result.heads.map((head) => {
      const number = head.index + 1; // people count heads from 1
      const masked = head.masked_scores.map((row) => row.map((v) => v === null));
      const figure = el(
        "figure",
        { class: "head-figure", "aria-labelledby": `four-caption-${head.index}` },
        scrollRegion(
          t("Head {head} weights", { head: number }),
          heatmap({
            head: head.index,
            weights: head.weights,
            masked,
            id: `four-${head.index}`,
            title: t("Head {head} weights over six positions", { head: number }),
          }),
        ),
        el("figcaption", {
          class: "caption",
          id: `four-caption-${head.index}`,
          dataset: { head: String(head.index) },
          text: t("Head {head}: {pattern}.", { head: number, pattern: describe(head.weights) }),
        }),
      );
      return figure;
    }),
  );
  drawn();
}

init().catch((error) => {
  $("figures").replaceChildren(
    el("p", { class: "error", text: t("Could not compute: {reason}", { reason: error.message }) }),
  );
});
