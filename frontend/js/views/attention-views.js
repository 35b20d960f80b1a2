// What the workbench draws from one API response: both heads' weights, the secondary numbers,
// and the correct-beside-broken comparison. Each function returns elements; the page places them.

import { el, fmt } from "./dom.js";
import { heatmap } from "./heatmap.js";
import { changes } from "./marks.js";
import { matrix, scrollRegion } from "./matrix.js";

const masks = (head) => head.masked_scores.map((row) => row.map((v) => v === null));
const dims = (head) => head.feature_indices.map((f) => `dim ${f + 1}`);

function featuresLabel(head) {
  if (head.features) return `dimensions ${head.features[0] + 1}–${head.features[1]}`;
  return `dimensions ${head.feature_indices.map((f) => f + 1).join(", ")}`;
}

// Both heads' weights; cells that changed since `previous` (the last drawn response) are marked.
export function weightsViews(response, previous) {
  return response.heads.map((head) => {
    const before = previous && previous.heads[head.index];
    return heatmap({ head: head.index, weights: head.weights, masked: masks(head), id: `heatmap-${head.index}`,
      marks: before ? changes(before.weights, head.weights) : null,
      title: `Head ${head.index + 1} (${featuresLabel(head)})` });
  });
}

export function scoresViews(response) {
  return response.heads.map((head) => scrollRegion(`Head ${head.index + 1} scores`,
    heatmap({ head: head.index, weights: head.scores, masked: masks(head), id: `scores-${head.index}`,
      colour: false, summarise: false, title: `Head ${head.index + 1} scores (before the softmax)` })));
}

export function qkvViews(response) {
  return response.heads.map((head) => el("div", { class: "pair" },
    ...["query", "key", "value"].map((part) => scrollRegion(`Head ${head.index + 1} ${part} slice`,
      matrix({ rows: head[part], caption: `${part[0].toUpperCase()} slice, head ${head.index + 1}`, colLabels: dims(head) })))));
}

export function outputViews(response, previous) {
  return response.heads.map((head) => scrollRegion(`Head ${head.index + 1} output`,
    matrix({ rows: head.output, caption: `Head ${head.index + 1} output`, colLabels: dims(head),
      marks: previous ? changes(previous.heads[head.index].output, head.output) : null })));
}

export function concatView(response, previous) {
  return scrollRegion("Concatenated outputs", matrix({ rows: response.concat, caption: "Concatenated outputs [O_1 | O_2]",
    marks: previous ? changes(previous.concat, response.concat) : null }));
}

export function comparisonSummary(result) {
  return `${result.failure_mode.description}. Largest change in the output: ` +
    `${fmt(result.differences.max_abs.concat, 3)}; cells marked Δ differ.`;
}

export function comparisonViews(result) {
  const diff = result.differences;
  const differs = (m) => m.map((row) => row.map((v) => (Math.abs(v) > 1e-9 ? "differs" : null)));
  return [...result.correct.heads.map((head, h) => el("div", { class: "pair" },
    heatmap({ head: h, weights: head.weights, masked: masks(head), title: `Correct, head ${h + 1}`, id: `compare-correct-${h}` }),
    heatmap({ head: h, weights: result.broken.heads[h].weights, masked: masks(result.broken.heads[h]),
      title: `Broken, head ${h + 1}`, marks: differs(diff.weights[h]), id: `compare-broken-${h}` }))),
  el("div", { class: "pair" },
    scrollRegion("Correct concatenation", matrix({ rows: result.correct.concat, caption: "Correct concatenation" })),
    scrollRegion("Broken concatenation", matrix({ rows: result.broken.concat, caption: "Broken concatenation",
      marks: differs(diff.concat) })))];
}
