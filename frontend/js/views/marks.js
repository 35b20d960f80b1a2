// @ts-check
// One way to mark a cell that changed: an outline and a symbol with a spoken name.
// "up"/"down": changed by the learner's last edit; "differs": differs from the correct result.

import { el } from "./dom.js";

const SYMBOLS = { up: ["▲", "increased"], down: ["▼", "decreased"], differs: ["Δ", "differs"] };

export function markCell(cell, kind) {
  const [symbol, label] = SYMBOLS[kind];
  cell.classList.add("changed", `changed-${kind}`);
  cell.append(el("span", { class: "mark", "aria-label": label, text: symbol }));
}

// Per-cell marks between two equal-shape matrices: changes visible at two decimals.
export function changes(before, after, kind = null) {
  if (!before || before.length !== after.length || before[0].length !== after[0].length) return null;
  return after.map((row, i) =>
    row.map((v, j) => {
      const delta = v - before[i][j];
      if (Math.abs(delta) < 0.005) return null;
      return kind || (delta > 0 ? "up" : "down");
    }),
  );
}
