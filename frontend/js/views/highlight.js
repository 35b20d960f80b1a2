// @ts-check
// Linked highlighting in the workbench's diagram: hovering or focusing one head lights it everywhere
// (its coordinates, lane, concat columns, W_O rows), and a weight lights what it came from and goes to.

/** Lights the head `target` belongs to, and the rows of a weight cell. @param {any} target */
export function light(target) {
  const owner = target.closest?.("[data-owner]");
  const main = document.querySelector("main");
  if (owner && /^\d$/.test(owner.dataset.owner)) main.dataset.lit = owner.dataset.owner;
  link(target);
}

/** Nothing lit: the pointer or the focus left the diagram. */
export function unlight() {
  delete document.querySelector("main").dataset.lit;
  unlink();
}

// A weight (head h, query i, key j) and what it came from and goes to: query row i of that head's
// Q, key row j of its K, the V row j it mixes, the head-output row i it feeds; each marked
// data-linked (their stages too, so a folded stage shows it). Leaving the cell clears them.
function link(target) {
  unlink();
  const cell = target.closest?.('[data-stage="weights"] [data-variant="main"] td[data-head][data-row][data-col]');
  if (!cell) return;
  const { head, row, col } = cell.dataset;
  const rows = [
    ["q", row],
    ["k", col],
    ["v", col],
    ["head-output", row],
  ];
  for (const [stageName, r] of rows) {
    const stage = /** @type {HTMLElement | null} */ (
      document.querySelector(`[data-stage="${stageName}"][data-head="${head}"]`)
    );
    if (!stage) continue;
    stage.dataset.linked = "true";
    for (const c of stage.querySelectorAll(`[data-variant="main"] [data-row="${r}"]`)) {
      /** @type {HTMLElement} */ (c).dataset.linked = "true";
    }
  }
  cell.dataset.linked = "true";
}

function unlink() {
  for (const node of document.querySelectorAll("[data-linked]"))
    delete (/** @type {HTMLElement} */ (node).dataset.linked);
}
