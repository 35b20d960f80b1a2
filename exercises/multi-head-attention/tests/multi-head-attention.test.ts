// Tests for your multiHeadAttention. Each failure names the mistake and shows the evidence.
//
// Run from the repository root:
//   pnpm exec vitest run exercises/multi-head-attention/tests --config vitest.exercise.config.ts
// MHA_EXERCISE=path/to/file.ts tests another file. The Python tests (test_multi_head_attention.py)
// check the same things in the same words.

import { resolve } from "node:path";
import { test } from "vitest";
import { fmt, load, say } from "../learner.ts";
import { allClose, attention, fail, looksLike, run, which } from "./mistakes.ts";

const mha = await load(process.env.MHA_EXERCISE ? resolve(process.env.MHA_EXERCISE) : new URL("../starter.ts", import.meta.url).pathname);

// Three 4-d tokens, two heads of width 2: the workbench's case.
const TOKENS = [[1.0, 0.5, -0.5, 1.0], [0.2, 1.0, 1.5, -0.3], [-1.0, 0.3, 0.8, 0.6]];
// Every feature of a token equal: any way of splitting gives the same slices, so only the
// attention itself (scaling, mask, softmax) decides the numbers: the known weights below.
const UNIFORM = [[1, 1, 1, 1], [2, 2, 2, 2], [-1, -1, -1, -1], [0.5, 0.5, 0.5, 0.5]];

const failed: string[] = [];
// A test that notes its failure, so the end-to-end check can wait for the others.
function check(name: string, body: () => void) {
  test(name, () => {
    try {
      body();
    } catch (error) {
      failed.push(name);
      throw error;
    }
  });
}

const sum = (row: number[]) => row.reduce((a, b) => a + b, 0);
const columnSums = (w: number[][]) => w[0].map((_, j) => sum(w.map((row) => row[j])));

check("output shapes", () => {
  run(mha, TOKENS, 2); // a wrong shape fails here, with what it looks like went wrong
});

check("incompatible head count explains itself", () => {
  try {
    mha([[1, 1, 1, 1, 1, 1], [2, 2, 2, 2, 2, 2]], 4);
  } catch (error) {
    const text = error instanceof Error ? error.message : String(error);
    if (!(text.includes("6") && text.includes("4"))) {
      fail(say("head_count", { error: `${error instanceof Error ? error.name : typeof error}(${JSON.stringify(text)})` }));
    }
    return;
  }
  fail(say("head_count_returned"));
});

check("each head reads its own contiguous slice", () => {
  // One token whose feature f (numbered from 1) holds 10 + f: each head returns exactly the slice it received.
  const result = run(mha, [[11, 12, 13, 14]], 2);
  const got = [0, 1].map((h) => result.headOutputs[h][0].map((v) => Math.round(v) - 10));
  const want = [[1, 2], [3, 4]];
  const text = JSON.stringify(got);
  if (text === JSON.stringify(want)) return;
  if (text === "[[1,3],[2,4]]") fail(say("interleaved_split", { got: got[1], want: want[1] }));
  if (text === "[[1,2],[1,2]]") fail(say("reuse_first_slice", { got: got[1], want: want[1] }));
  fail(say("split_other", { got, want }));
});

check("concatenation keeps head order", () => {
  const result = run(mha, TOKENS, 2);
  const side = (outs: number[][][]) => TOKENS.map((_, i) => outs.flatMap((out) => out[i]));
  if (allClose(result.concatenated, side(result.headOutputs))) return;
  if (allClose(result.concatenated, side([...result.headOutputs].reverse()))) {
    fail(say("swapped_head_order", { got: fmt(result.concatenated[0].slice(0, 2)) }));
  }
  fail(say("concat_other"));
});

check("scores are scaled by sqrt(d_head)", () => {
  const result = run(mha, UNIFORM, 2, false);
  const expected = attention(UNIFORM, 2, false);
  if (allClose(result.weights, expected.weights)) return;
  const mistake = which(result, UNIFORM, 2, false, ["no_scaling", "scale_by_d_model"], ["weights"]);
  const got = fmt(result.weights[0][1]), want = fmt(expected.weights[0][1]);
  if (mistake) fail(say(mistake, { root: Math.sqrt(2).toFixed(3), got, want }));
  fail(say("scale_other", { got, want, looks_like: looksLike(result, UNIFORM, 2, false) }));
});

check("mask hides the future before the softmax", () => {
  // Judged by structure, not exact values, so a scaling bug does not hide a masking bug.
  const w = run(mha, UNIFORM, 2, true).weights[0];
  const cells = (keep: (i: number, j: number) => boolean) => w.flatMap((row, i) => row.filter((_, j) => keep(i, j)));
  const future = cells((i, j) => j > i), past = cells((i, j) => j < i);
  if (future.some((v) => v > 1e-12)) {
    if (past.every((v) => Math.abs(v) < 1e-12)) fail(say("weights_transposed", { row: fmt(w[0]) }));
    if (allClose(w[0].slice(1), w[0].slice(1).map(() => w[0][1]))) fail(say("zero_mask", { weight: w[0][1].toFixed(3) }));
    fail(say("no_mask", { weight: w[0][1].toFixed(3) }));
  }
  const diagonal = w.map((row, i) => row[i]);
  if (diagonal.some((v) => Math.abs(v) < 1e-12)) fail(say("diagonal_masked", { diagonal: fmt(diagonal) }));
  const sums = w.map(sum);
  if (!allClose(sums, sums.map(() => 1))) {
    if (allClose(columnSums(w), sums.map(() => 1))) fail(say("softmax_wrong_axis", { sums: fmt(sums) }));
    fail(say("mask_after_softmax", { sum: sums[0].toFixed(3) }));
  }
});

check("rows are distributions over keys", () => {
  const result = run(mha, TOKENS, 2, false);
  const sums = result.weights.map((head) => head.map(sum));
  if (allClose(sums, sums.map((row) => row.map(() => 1)))) return;
  const columns = result.weights.map(columnSums);
  const axis = allClose(columns, columns.map((row) => row.map(() => 1))) ? say("rows_sum_axis") : "";
  fail(say("rows_sum", { sums: fmt(sums[0]), axis }));
});

check("output projection is applied", () => {
  const wO = Array.from({ length: 4 }, (_, i) => Array.from({ length: 4 }, (_, j) => (4 * i + j) / 10));
  const result = run(mha, TOKENS, 2, true, wO);
  if (allClose(result.output, result.concatenated)) fail(say("no_output_projection"));
  const expected = result.concatenated.map((row) => wO[0].map((_, c) => row.reduce((s, v, k) => s + v * wO[k][c], 0)));
  if (!allClose(result.output, expected)) fail(say("projection_wrong"));
});

test("the workbench case end to end", (ctx) => {
  if (failed.length) {
    ctx.skip(say("end_to_end_wait"));
    return;
  }
  const result = run(mha, TOKENS, 2);
  const expected = attention(TOKENS, 2);
  for (const part of ["weights", "headOutputs", "concatenated"] as const) {
    if (!allClose(result[part], expected[part])) {
      const diff = Math.max(...result[part].flat(2).map((v, k) => Math.abs(v - (expected[part].flat(2) as number[])[k])));
      fail(say("end_to_end", { part, error: diff.toPrecision(3) }));
    }
  }
});
