// The online softmax: attention computed a tile at a time, never holding the n x n weights.
//
// Fill in onlineAttention so that it returns exactly softmax(q k^T / sqrt(d)) v and each row's
// log-sum-exp, walking the scores in tiles of blockQ query rows by blockK keys (FlashAttention-2,
// Dao 2023, Algorithm 1). This starter runs, and gets three things wrong: the tests name each one.
//   pnpm exec vitest run exercises/online-softmax/tests --config vitest.exercise.config.ts
//
// Shapes: q [n][d], k [n][d], v [n][dV]; a tile is [blockQ][blockK] scores.

type Recorder = (queryBlock: number, keyBlock: number, m: number[], alpha: number[], l: number[], o: number[][]) => void;

// Under `causal`, query i sees keys 0..i. For each block of query rows, walk the key blocks in order,
// carrying per row the running maximum m, the running sum l and the unnormalised output o. After every
// tile you compute, call record(queryBlock, keyBlock, m, alpha, l, o) with the rows' values (the trace
// uses it to show your numbers beside the correct ones; one test counts the tiles you computed).
export function onlineAttention(q: number[][], k: number[][], v: number[][], blockQ: number, blockK: number,
  options: { causal?: boolean; record?: Recorder } = {}): { output: number[][]; lse: number[] } {
  const causal = options.causal ?? true;
  const n = q.length, dV = v[0].length, scale = 1 / Math.sqrt(q[0].length);
  const output: number[][] = [], lse: number[] = [];
  for (let i = 0, r0 = 0; r0 < n; i++, r0 += blockQ) {
    const r1 = Math.min(r0 + blockQ, n), rows = r1 - r0;
    let m: number[] = Array(rows).fill(-Infinity); // the running maximum of each row
    let l: number[] = Array(rows).fill(0); // the running sum of exp(s - m)
    let o: number[][] = Array.from({ length: rows }, () => Array(dV).fill(0)); // the unnormalised output
    for (let j = 0, c0 = 0; c0 < n; j++, c0 += blockK) {
      const c1 = Math.min(c0 + blockK, n);
      if (causal && c1 - 1 > r0) continue; // a tile whose keys come after its queries: not computed
      const s = Array.from({ length: rows }, (_, a) => Array.from({ length: c1 - c0 }, (_, b) => {
        if (causal && c0 + b > r0 + a) return -Infinity; // the causal mask inside the tile
        return q[r0 + a].reduce((sum, x, f) => sum + x * k[c0 + b][f], 0) * scale;
      }));
      const mNew = m.map((x, a) => Math.max(x, ...s[a]));
      const alpha = m.map((x, a) => Math.exp(x - mNew[a])); // what the rows' sums so far are worth now
      const p = s.map((row, a) => row.map((x) => Math.exp(x - mNew[a])));
      l = l.map((x, a) => x + p[a].reduce((sum, y) => sum + y, 0));
      o = o.map((row, a) => row.map((x, f) => x + p[a].reduce((sum, y, b) => sum + y * v[c0 + b][f], 0)));
      options.record?.(i, j, mNew, alpha, l, o);
    }
    for (let a = 0; a < rows; a++) {
      output.push(o[a].map((x) => x / l[a]));
      lse.push(m[a] + Math.log(l[a]));
    }
  }
  return { output, lse };
}
