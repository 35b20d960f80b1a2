// A learner's implementation written by hand, with one classic slip chosen by MHA_MISTAKE (as
// handwritten.py): plain loops, independent of the exercise's reference, so the TypeScript tests
// are tried against code that really makes each mistake. MHA_MISTAKE unset or empty: correct.

const MISTAKE = process.env.MHA_MISTAKE ?? "";

function softmax(row: number[]): number[] {
  const top = Math.max(...row);
  const e = row.map((v) => Math.exp(v - top));
  const total = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / total);
}

export function multiHeadAttention(tokens: number[][], heads: number, options: { causal?: boolean; outputProjection?: number[][] } = {}) {
  const causal = options.causal ?? true;
  const n = tokens.length, dModel = tokens[0].length;
  if (dModel % heads) throw new RangeError(`d_model ${dModel} does not divide into ${heads} heads`);
  const dHead = dModel / heads;
  const weights: number[][][] = [], headOutputs: number[][][] = [];
  for (let h = 0; h < heads; h++) {
    const part = tokens.map((row) => {
      if (MISTAKE === "interleaved_split") return row.filter((_, f) => f % heads === h);
      if (MISTAKE === "reuse_first_slice") return row.slice(0, dHead);
      return row.slice(h * dHead, (h + 1) * dHead);
    });
    const divisor = MISTAKE === "no_scaling" ? 1 : MISTAKE === "scale_by_d_model" ? Math.sqrt(dModel) : Math.sqrt(dHead);
    const scores = part.map((q, i) => part.map((k, j) => {
      const s = q.reduce((sum, v, f) => sum + v * k[f], 0) / divisor;
      if (!causal) return s;
      if (MISTAKE === "diagonal_masked") return j >= i ? -Infinity : s; // query 1 sees nothing: 0/0
      if (MISTAKE === "zero_mask") return j > i ? 0 : s;
      if (MISTAKE === "no_mask" || MISTAKE === "mask_after_softmax") return s;
      return j > i ? -Infinity : s;
    }));
    let w: number[][];
    if (MISTAKE === "softmax_wrong_axis") {
      const columns = scores[0].map((_, j) => softmax(scores.map((row) => row[j])));
      w = scores.map((row, i) => row.map((_, j) => columns[j][i]));
    } else {
      w = scores.map(softmax);
    }
    if (causal && MISTAKE === "mask_after_softmax") w = w.map((row, i) => row.map((v, j) => (j > i ? 0 : v)));
    if (MISTAKE === "weights_transposed") w = w.map((row, i) => row.map((_, j) => w[j][i]));
    weights.push(w);
    headOutputs.push(w.map((row) => part[0].map((_, f) => row.reduce((sum, wij, j) => sum + wij * part[j][f], 0))));
  }
  const ordered = MISTAKE === "swapped_head_order" ? [...headOutputs].reverse() : headOutputs;
  const concatenated = tokens.map((_, i) => ordered.flatMap((out) => out[i]));
  const wO = options.outputProjection;
  const output = !wO || MISTAKE === "no_output_projection"
    ? concatenated
    : concatenated.map((row) => wO[0].map((_, c) => row.reduce((sum, v, k) => sum + v * wO[k][c], 0)));
  return { weights, headOutputs, concatenated, output };
}
