// @ts-check
// A head's weights as a compact heatmap on a canvas (a 128-byte text is 16,384 cells a head,
// too many for a table), in the workbench's colour scale; the chosen query row is outlined.
// The canvas is an image with a text alternative; the numbers are in the page's table.
// `causal`: the keys after each query are masked (drawn grey); a bidirectional model has none.

import { viridis } from "./color.js";

export function headCanvas({ weights, label, selected, onPick, causal = true }) {
  const n = weights.length;
  const cell = Math.max(2, Math.floor(192 / n));
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = n * cell;
  canvas.className = "th-canvas";
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", label);
  const context = canvas.getContext("2d");
  weights.forEach((row, i) => {
    row.forEach((value, j) => {
      context.fillStyle = causal && j > i ? "#f2f2f2" : `rgb(${viridis(value).join(",")})`;
      context.fillRect(j * cell, i * cell, cell, cell);
    });
  });
  if (selected !== null && selected < n) {
    context.strokeStyle = "#d7301f";
    context.lineWidth = Math.max(1, cell / 3);
    context.strokeRect(0, selected * cell, n * cell, cell);
  }
  const pick = (event) => {
    const rect = canvas.getBoundingClientRect();
    const row = Math.floor(((event.clientY - rect.top) / rect.height) * n);
    if (row >= 0 && row < n) onPick(row);
  };
  canvas.addEventListener("mousemove", pick);
  canvas.addEventListener("click", pick);
  return canvas;
}

// Where query row `i` sends its weight: the key with the largest weight, and that weight.
export function strongest(weights, i, causal = true) {
  const row = causal ? weights[i].slice(0, i + 1) : weights[i];
  const j = row.indexOf(Math.max(...row));
  return { key: j, weight: row[j] };
}
