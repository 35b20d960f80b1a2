// The four-heads figure: the preset computed by the API, each head captioned from its data.

import { getJSON, postJSON } from "../api.js";
import { el, fmt } from "../views/dom.js";
import { heatmap } from "../views/heatmap.js";
import { scrollRegion } from "../views/matrix.js";

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
  if (uniformity) return `diffuse: each query spreads its weight evenly over the positions it can see`;
  if (b[0] > 0.3 && Math.abs(a[1] - b[1]) > 1) {
    return `bimodal: the last query splits ${fmt(a[0])} and ${fmt(b[0])} between positions ${Math.min(a[1], b[1]) + 1} and ${Math.max(a[1], b[1]) + 1}`;
  }
  if (mass[0] > 0.75) return `first-token bias: ${fmt(mass[0] * 100, 0)}% of all attention lands on position 1`;
  if (diagonal > 0.6) return `recency: each query puts most weight on the latest position it can see (on average ${fmt(diagonal * 100, 0)}%)`;
  return `mixed: the last query's largest weights are ${fmt(a[0])} on position ${a[1] + 1} and ${fmt(b[0])} on position ${b[1] + 1}`;
}

async function init() {
  const preset = await getJSON("/api/v1/presets/four-heads");
  const result = await postJSON("/api/v1/attention", { ...preset.request, include: ["weights", "masked_scores"] });
  document.getElementById("figures").replaceChildren(...result.heads.map((head) => {
    const number = head.index + 1; // people count heads from 1
    const masked = head.masked_scores.map((row) => row.map((v) => v === null));
    const figure = el("figure", { class: "head-figure", "aria-labelledby": `four-caption-${head.index}` },
      scrollRegion(`Head ${number} weights`, heatmap({ head: head.index, weights: head.weights, masked,
        id: `four-${head.index}`, title: `Head ${number} weights over six positions` })),
      el("figcaption", { class: "caption", id: `four-caption-${head.index}`, dataset: { head: String(head.index) },
        text: `Head ${number}: ${describe(head.weights)}.` }));
    return figure;
  }));
  document.body.dataset.ready = "true";
}

init().catch((error) => {
  document.getElementById("figures").replaceChildren(el("p", { class: "error", text: `Could not compute: ${error.message}` }));
});
