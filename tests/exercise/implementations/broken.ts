// A correct implementation (handwritten.ts) that returns one kind of unusable result, chosen by
// MHA_BROKEN (as broken.py): the slips that must get a message, never a stack.

import { multiHeadAttention as correct } from "./handwritten.ts";

const BROKEN = process.env.MHA_BROKEN ?? "";

export function multiHeadAttention(tokens: number[][], heads: number, options: { causal?: boolean; outputProjection?: number[][] } = {}) {
  const result: Record<string, unknown> = correct(tokens, heads, options);
  const r = result as ReturnType<typeof correct>;
  if (BROKEN === "raises") return (undefined as unknown as { weights: number[] }).weights; // a TypeError in the learner's code
  if (BROKEN === "returns_list") return [r.weights, r.concatenated];
  if (BROKEN === "missing_part") delete result.headOutputs;
  if (BROKEN === "missing_head_axis") result.weights = r.weights[0];
  if (BROKEN === "heads_last") result.headOutputs = tokens.map((_, i) => r.headOutputs.map((head) => head[i]));
  if (BROKEN === "transposed") result.concatenated = r.concatenated[0].map((_, j) => r.concatenated.map((row) => row[j]));
  if (BROKEN === "wrong_n") result.weights = r.weights.map((head) => head.slice(0, -1));
  if (BROKEN === "strings") result.weights = r.weights.map((head) => head.map((row) => row.map(() => "half")));
  if (BROKEN === "ragged") result.concatenated = r.concatenated.map((row, i) => row.slice(0, 1 + i));
  if (BROKEN === "nan") result.output = r.output.map((row) => row.map(() => NaN));
  return result;
}
