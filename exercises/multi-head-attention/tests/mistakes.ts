// A plain correct implementation and the classic mistakes, so a failing test can say which one you made
// (the same as mistakes.py). Reading this file gives the answer away; try the exercise first.

import { call, type Case, type Implementation, LearnerError, type Matrix, nanProblem, type Result, say } from "../learner.ts";

/** A failure that shows its message only: no stack, no diff. */
export class Failure extends Error {
  name = "AssertionError";
}

export function fail(message: string): never {
  throw new Failure(message);
}

const matmul = (a: Matrix, b: Matrix): Matrix => a.map((row) => b[0].map((_, c) => row.reduce((s, v, k) => s + v * b[k][c], 0)));
const transpose = (a: Matrix): Matrix => a[0].map((_, j) => a.map((row) => row[j]));

function softmaxRows(s: Matrix): Matrix {
  return s.map((row) => {
    const top = Math.max(...row);
    const e = row.map((v) => Math.exp(v - top));
    const total = e.reduce((a, b) => a + b, 0);
    return e.map((v) => v / total);
  });
}

function split(x: Matrix, heads: number, layout: string): Matrix[] {
  const dHead = x[0].length / heads;
  return Array.from({ length: heads }, (_, h) =>
    x.map((row) =>
      layout === "interleaved"
        ? row.filter((_, f) => f % heads === h)
        : row.slice((layout === "first" ? 0 : h) * dHead, ((layout === "first" ? 0 : h) + 1) * dHead),
    ),
  );
}

/** The correct result, or what an implementation with `mistake` returns. */
export function attention(tokens: Matrix, heads: number, causal = true, mistake: string | null = null, outputProjection?: Matrix): Result {
  const n = tokens.length, dModel = tokens[0].length, dHead = dModel / heads;
  const layout = { interleaved_split: "interleaved", reuse_first_slice: "first" }[mistake ?? ""] ?? "contiguous";
  const divisor = { no_scaling: 1, scale_by_d_model: Math.sqrt(dModel) }[mistake ?? ""] ?? Math.sqrt(dHead);
  const future = (i: number, j: number) => j > i;
  const weights: Matrix[] = [], headOutputs: Matrix[] = [];
  for (const part of split(tokens, heads, layout)) {
    let s = matmul(part, transpose(part)).map((row) => row.map((v) => v / divisor));
    let w: Matrix;
    if (mistake === "softmax_wrong_axis") {
      w = transpose(softmaxRows(transpose(causal ? s.map((row, i) => row.map((v, j) => (future(i, j) ? -Infinity : v))) : s)));
    } else if (!causal || mistake === "no_mask") {
      w = softmaxRows(s);
    } else if (mistake === "mask_after_softmax") {
      w = softmaxRows(s).map((row, i) => row.map((v, j) => (future(i, j) ? 0 : v)));
    } else if (mistake === "diagonal_masked") {
      // every key j >= i hidden: query 1 sees nothing (its row is all zeros here, NaN in real code)
      s = s.map((row, i) => row.map((v, j) => (j >= i ? -Infinity : v)));
      w = s.map((row, i) => (i === 0 ? row.map(() => 0) : softmaxRows([row])[0]));
    } else if (mistake === "zero_mask") {
      w = softmaxRows(s.map((row, i) => row.map((v, j) => (future(i, j) ? 0 : v))));
    } else {
      w = softmaxRows(s.map((row, i) => row.map((v, j) => (future(i, j) ? -Infinity : v))));
      if (mistake === "weights_transposed") w = transpose(w);
    }
    weights.push(w);
    headOutputs.push(matmul(w, part));
  }
  const order = mistake === "swapped_head_order" ? [...headOutputs].reverse() : headOutputs;
  const concatenated = Array.from({ length: n }, (_, i) => order.flatMap((out) => out[i]));
  const output = outputProjection && mistake !== "no_output_projection" ? matmul(concatenated, outputProjection) : concatenated;
  return { weights, headOutputs, concatenated, output };
}

/** Call the learner's function through learner.ts: what it throws, a wrong shape or type, and
 * NaN in what it returns become failures that say what went wrong. */
export function run(mha: Implementation, tokens: Matrix, heads: number, causal = true, outputProjection?: Matrix): Result {
  const c: Case = { tokens, heads, causal, output_projection: outputProjection ?? null };
  let result: Result;
  try {
    result = call(mha, c);
  } catch (error) {
    if (error instanceof LearnerError) fail(error.message);
    throw error;
  }
  const problem = nanProblem(result, c);
  if (problem) fail(problem);
  return result;
}

const allClose = (a: unknown, b: unknown, atol = 1e-9): boolean =>
  Array.isArray(a) && Array.isArray(b)
    ? a.length === b.length && a.every((v, i) => allClose(v, b[i], atol))
    : typeof a === "number" && typeof b === "number" && Math.abs(a - b) <= atol + 1e-5 * Math.abs(b);

export { allClose };

// Every mistake the correct implementation can be turned into, in the order the pipeline meets them (as mistakes.py).
export const ALL = [
  "interleaved_split", "reuse_first_slice", "no_scaling", "scale_by_d_model", "no_mask", "mask_after_softmax",
  "diagonal_masked", "zero_mask", "softmax_wrong_axis", "weights_transposed", "swapped_head_order", "no_output_projection",
];

/** The first candidate mistake that reproduces `result` (on the given parts), else null. */
export function which(result: Result, tokens: Matrix, heads: number, causal: boolean, candidates: string[],
  parts: (keyof Result)[] = ["weights", "concatenated"], outputProjection?: Matrix): string | null {
  for (const mistake of candidates) {
    const expected = attention(tokens, heads, causal, mistake, outputProjection);
    if (parts.every((p) => allClose(result[p], expected[p]))) return mistake;
  }
  return null;
}

// The mistakes a weights check can recognise by their numbers, in the words the failures use.
export const SYMPTOMS: Record<string, string> = Object.fromEntries(
  ["interleaved_split", "reuse_first_slice", "no_scaling", "scale_by_d_model", "softmax_wrong_axis", "swapped_head_order"]
    .map((m) => [m, say(`symptom_${m}`)]),
);

/** " (this is what happens when ...)" for the known mistake that reproduces `result`, else "". */
export function looksLike(result: Result, tokens: Matrix, heads: number, causal: boolean): string {
  const mistake = which(result, tokens, heads, causal, Object.keys(SYMPTOMS), ["weights"]);
  return mistake ? say("looks_like", { symptom: SYMPTOMS[mistake], id: mistake }) : "";
}
