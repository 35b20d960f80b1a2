// @ts-check
// What the workbench says under its diagram: where a comparison's broken numbers first part from the
// correct ones, why nothing differs when a failure mode's needs are not met (its `needs`, from
// GET /api/v1/failure-modes), where a learner's own numbers (the exercise's `trace`) part from the
// engine's, and what each head reads under identity projections.

import { t } from "../i18n.js";
import { close } from "./stage.js";

const STAGES = ["x", "q", "k", "v", "scores", "weights", "head-output", "concat", "wo", "output", "residual"];
export const STAGE_NAMES = {
  x: "X",
  q: "Q",
  k: "K",
  v: "V",
  scores: t("the scores"),
  weights: t("the weights"),
  "head-output": t("the head outputs"),
  concat: t("the concatenation"),
  wo: "W_O",
  output: t("the output Y"),
  residual: "X + Y",
};

/** The needs this page meets, by its state: a mode needing only these is in its menu. */
export const MEETS = {
  head_slices: () => true,
  several_heads: (s) => s.heads > 1,
  grouped_heads: (s) => s.kv < s.heads,
  rope: (s) => s.rope,
  causal: (s) => s.causal,
  output_projection: (s) => s.wo === "learned",
};

// Why nothing differs, by the first need unmet.
const UNMET_SAYS = {
  causal: (name) =>
    t(
      "Nothing differs: “{name}” breaks the causal mask, and the mask is off. Turn on “Causal mask” to see what it does.",
      { name },
    ),
  output_projection: () =>
    t(
      "Nothing differs: W_O here is the identity, so skipping it changes no number. Choose a learned-looking output projection to see what stopping at the concatenation loses.",
    ),
  several_heads: (name) =>
    t(
      "Nothing differs: “{name}” computes the same numbers as the correct implementation for this configuration (with one head there is one slice and one head order).",
      { name },
    ),
  none: (name) =>
    t("Nothing differs: “{name}” computes the same numbers as the correct implementation for this configuration.", {
      name,
    }),
};

/**
 * The status line: a comparison's first divergence, a learner's own numbers against the engine's, or the
 * broken reuse toggle's effect. `modes`: the registry's entries by id, in the page's language.
 * @param {any} response @param {any} comparison @param {any} yours @param {any} state @param {Map<string, any>} modes
 */
export function statusLine(response, comparison, yours, state, modes) {
  if (comparison)
    return comparisonLine(comparison, state, modes.get(comparison.failure_mode.id) || comparison.failure_mode);
  if (yours) {
    return yours.first
      ? t("Your numbers first differ from the engine's at {stage} (marked “first difference”).", {
          stage: STAGE_NAMES[yours.first],
        })
      : t("Your numbers equal the engine's at every stage your function returns.");
  }
  if (state.reuse && response.shape.heads > 1) {
    return t("Broken: every head reads dimensions 1–2 (head 1's features); dimensions 3–4 are ignored.");
  }
  return "";
}

/** @param {any} comparison @param {any} state @param {any} mode */
function comparisonLine(comparison, state, mode) {
  const { first, first_head: firstHead } = comparison.divergence;
  if (first && firstHead != null) {
    const stageOfHead = t("{stage} of head {head}", { stage: STAGE_NAMES[first], head: firstHead + 1 });
    return t(
      "Compared with “{name}” ({description}): the first stage that differs is {stage}; the stages after it that differ show the broken numbers beside the correct ones (Δ marks the cells), and a head whose numbers are the same reads “identical”.",
      { name: mode.name, description: mode.description, stage: stageOfHead },
    );
  }
  if (first) {
    return t(
      "Compared with “{name}” ({description}): the first stage that differs is {stage}; the stages after it that differ show the broken numbers beside the correct ones (Δ marks the cells).",
      { name: mode.name, description: mode.description, stage: STAGE_NAMES[first] },
    );
  }
  const missing = (mode.needs || []).find((need) => need in UNMET_SAYS && !MEETS[need](state));
  return (UNMET_SAYS[missing] || UNMET_SAYS.none)(mode.name);
}

const PER_HEAD_STAGES = ["weights", "head-output"]; // what a learner's trace holds per head

/**
 * Where a learner's own numbers (the exercise's `trace`) part from the engine's: a stage differs in shape
 * or in a number (beyond float64 rounding).
 * @param {any} response @param {Record<string, any>} yours
 */
export function yoursDivergence(response, yours) {
  const engine = {
    weights: response.heads.map((h) => h.weights),
    "head-output": response.heads.map((h) => h.output),
    concat: response.concat,
    output: response.output,
  };
  const differs = (s) => !same(yours[s], engine[s]);
  const stages = STAGES.filter((s) => s in yours && s in engine && differs(s));
  const headDiffers = (s, h) => !same(yours[s]?.[h], engine[s][h]);
  const heads = response.heads.map((_, h) => ({
    head: h,
    stages: stages.filter((s) => PER_HEAD_STAGES.includes(s) && headDiffers(s, h)),
  }));
  const first = stages[0] || null;
  const firstHead = PER_HEAD_STAGES.includes(first)
    ? (heads.find((x) => x.stages.includes(first)) || { head: null }).head
    : null;
  return { first, first_head: firstHead, stages, heads };
}

// The same shape and, cell by cell, the same number (beyond float64 rounding).
function same(mine, theirs, flat = theirs.flat(2)) {
  return (
    Array.isArray(mine) &&
    String(shapeOf(mine)) === String(shapeOf(theirs)) &&
    mine.flat(2).every((v, k) => typeof v === "number" && close(v, flat[k]))
  );
}

function shapeOf(value) {
  return Array.isArray(value) ? [value.length, ...shapeOf(value[0])] : [];
}

/** "head 1 reads dimensions 1–2": what one head reads under identity projections. @param {any} h */
export function readsWhat(h) {
  const [first, last] = [h.feature_indices[0] + 1, h.feature_indices[h.feature_indices.length - 1] + 1];
  return first === last
    ? t("head {head} reads dimension {dim}", { head: h.index + 1, dim: first })
    : t("head {head} reads dimensions {first}–{last}", { head: h.index + 1, first, last });
}
