// @ts-check
// What the workbench's diagram shows of each stage besides the correct numbers: the broken computation's
// numbers (a comparison) and a learner's own (the exercise's `trace`), each only where it differs, and where
// the first difference is. Shared by the lanes (views/lane.js) and the rest of the diagram (views/diagram.js).

import { math, el } from "./dom.js";
import { differs } from "./stage.js";

// The rows a variant holds for a stage (per-head stages: head h's).
function rowsOf(source, stageName, h) {
  if (!source) return null;
  if (source.heads) {
    const head = source.heads[h];
    const part = { q: "query", k: "key", v: "value", scores: "scores", weights: "weights", "head-output": "output" }[
      stageName
    ];
    return PER_HEAD.has(stageName) ? head?.[part] : source[stageName];
  }
  const value = source[stageName];
  return PER_HEAD.has(stageName) ? value?.[h] : value;
}

function sameShape(a, b) {
  return (
    Array.isArray(a) &&
    Array.isArray(b) &&
    a.length === b.length &&
    a.every((row, i) => Array.isArray(row) && row.length === b[i].length)
  );
}

export function variantsOf(view, stageName, h, main) {
  const out = [{ name: "main", rows: main }];
  const { broken, divergence, yours } = view;
  if (broken && divergence && differsAt(divergence, stageName, h)) {
    const rows = stageName === "wo" ? view.brokenWo : rowsOf(broken, stageName, h);
    if (rows) out.push({ name: "broken", rows, marks: differs(main, rows) });
  }
  const mine = yours && rowsOf(yours, stageName, h);
  if (mine && sameShape(mine, main)) out.push({ name: "yours", rows: mine, marks: differs(main, mine) });
  return out;
}

// Whether a stage's numbers differ: a head's own stage only where that head's numbers do (an
// identical head is not marked because another head differs), a shared stage where it does.
function differsAt(found, stageName, h) {
  const own = h !== null && found.heads ? found.heads.find((x) => x.head === h) : null;
  if (own && PER_HEAD.has(stageName)) return own.stages.includes(stageName);
  return found.stages.includes(stageName);
}

// "first" (the first difference, in pipeline order over every head), "after", "identical" (a
// head's stage whose numbers equal the correct ones where another head's differ), or null.
export function divergenceOf(view, stageName, h = null) {
  const found = view.divergence ? view.divergence : view.yoursDivergence;
  if (!found) return null;
  if (!differsAt(found, stageName, h))
    return h !== null && PER_HEAD.has(stageName) && found.stages.includes(stageName) ? "identical" : null;
  const firstHere = found.first === stageName && (found.first_head == null || h === null || found.first_head === h);
  return firstHere ? "first" : "after";
}

export const PER_HEAD = new Set(["q", "k", "v", "scores", "weights", "head-output"]);

// wide: shown only where a lane runs in one row (on a phone the weights take a row of their own).
export function arrow(label, wide = false) {
  return el(
    "span",
    { class: `flow-arrow${wide ? " wide" : ""}`, "aria-hidden": "true" },
    el("span", { class: "flow-label" }, math(label || "")),
  );
}
