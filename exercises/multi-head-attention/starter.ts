// Causal multi-head attention: the exercise starter.
//
// This file runs, but it has three bugs (the lesson names them). Find and fix them until
//   pnpm exec vitest run exercises/multi-head-attention/tests --config vitest.exercise.config.ts
// passes.
//
// Conventions (see README.md): Q = K = V = the tokens, as in the workbench; head h owns the
// contiguous features [h*dHead, (h+1)*dHead); scores are divided by sqrt(dHead); future scores
// are set to -Infinity BEFORE the softmax; head outputs are concatenated in head order.

export function multiHeadAttention(
  tokens: number[][],
  heads: number,
  options: { causal?: boolean; outputProjection?: number[][] } = {},
): { weights: number[][][]; headOutputs: number[][][]; concatenated: number[][]; output: number[][] } {
  const causal = options.causal ?? true;
  const n = tokens.length;
  const dModel = tokens[0].length;
  if (dModel % heads !== 0) throw new Error(`dModel ${dModel} is not divisible by heads ${heads}`);
  const dHead = dModel / heads;

  // Split into heads: [n][dModel] -> [H][n][dHead]
  const split = Array.from({ length: heads }, (_, h) =>
    tokens.map((row) => Array.from({ length: dHead }, (_, f) => row[f * heads + h])),
  );

  const weights: number[][][] = [];
  const headOutputs: number[][][] = [];
  for (let h = 0; h < heads; h++) {
    const x = split[h]; // Q = K = V
    const w = x.map((q) => {
      const scores = x.map((k) => q.reduce((sum, v, f) => sum + v * k[f], 0));
      const top = Math.max(...scores);
      const exp = scores.map((s) => Math.exp(s - top));
      const total = exp.reduce((a, b) => a + b, 0);
      return exp.map((e) => e / total);
    });
    if (causal) w.forEach((row, i) => row.forEach((_, j) => { if (j > i) row[j] = 0; }));
    weights.push(w);
    headOutputs.push(w.map((row) => Array.from({ length: dHead }, (_, f) => row.reduce((sum, wij, j) => sum + wij * x[j][f], 0))));
  }

  const concatenated = tokens.map((_, i) => headOutputs.flatMap((out) => out[i])); // [n][dModel]
  const wO = options.outputProjection;
  const output = wO ? concatenated.map((row) => wO[0].map((_, c) => row.reduce((sum, v, k) => sum + v * wO[k][c], 0))) : concatenated;
  return { weights, headOutputs, concatenated, output };
}
