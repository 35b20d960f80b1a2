// The exercise's own answers, for its tests and trace.ts: the softmax taken whole (what the online loop
// must equal), and the online loop written out with each of the three slips a learner can make, so a
// wrong answer can be named by the slips that reproduce it. The Python tests (slips.py) say the same.
//
// Shapes: q [n][d], k [n][d], v [n][dV].

export type Recorder = (queryBlock: number, keyBlock: number, m: number[], alpha: number[], l: number[], o: number[][]) => void;
export type Online = (q: number[][], k: number[][], v: number[][], blockQ: number, blockK: number,
  options?: { causal?: boolean; record?: Recorder }) => { output: number[][]; lse: number[] };

export const SLIPS: Record<string, string> = {
  online_no_rescale: "the running sum l and output o were not rescaled when the maximum rose: multiply both by "
    + "alpha = exp(m_old - m_new) before adding the tile's terms",
  online_max_not_carried: "the running maximum m is not carried from tile to tile: after a tile, m must become "
    + "m_new, or every later tile throws away what the earlier ones added",
  online_diagonal_skipped: "a tile on the diagonal was skipped as if every key in it were in the future: skip a "
    + "tile only when its first key comes after its last query, and mask the diagonal tile inside",
};

const dot = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i], 0);

// (softmax(q k^T / sqrt(d)) v, each row's log-sum-exp), the whole score matrix at once.
export function plain(q: number[][], k: number[][], v: number[][], causal = true): { output: number[][]; lse: number[] } {
  const scale = 1 / Math.sqrt(q[0].length);
  const output: number[][] = [];
  const lse: number[] = [];
  q.forEach((qi, i) => {
    const s = k.map((kj, j) => (causal && j > i ? -Infinity : dot(qi, kj) * scale));
    const top = Math.max(...s);
    const e = s.map((x) => Math.exp(x - top));
    const total = e.reduce((a, b) => a + b, 0);
    output.push(v[0].map((_, f) => e.reduce((sum, ej, j) => sum + ej * v[j][f], 0) / total));
    lse.push(top + Math.log(total));
  });
  return { output, lse };
}

// The online loop as code making `slips` computes it (none: right). A row that has seen no key yet holds
// m = -Infinity, l = 0, o = 0; one that sees none at all ends with output 0 and lse -Infinity.
export function tiled(q: number[][], k: number[][], v: number[][], blockQ: number, blockK: number, causal = true,
  slips: string[] = [], record?: Recorder): { output: number[][]; lse: number[] } {
  const n = q.length, dV = v[0].length, scale = 1 / Math.sqrt(q[0].length);
  const output: number[][] = [], lse: number[] = [];
  for (let i = 0, r0 = 0; r0 < n; i++, r0 += blockQ) {
    const r1 = Math.min(r0 + blockQ, n), rows = r1 - r0;
    let m = Array(rows).fill(-Infinity), mNew = m.slice();
    let total = Array(rows).fill(0), o = Array.from({ length: rows }, () => Array(dV).fill(0));
    for (let j = 0, c0 = 0; c0 < n; j++, c0 += blockK) {
      const c1 = Math.min(c0 + blockK, n);
      if (causal && (c0 > r1 - 1 || (slips.includes("online_diagonal_skipped") && c1 - 1 > r0))) continue;
      const s = Array.from({ length: rows }, (_, a) => Array.from({ length: c1 - c0 },
        (_, b) => (causal && c0 + b > r0 + a ? -Infinity : dot(q[r0 + a], k[c0 + b]) * scale)));
      mNew = m.map((x, a) => Math.max(x, ...s[a]));
      const shift = mNew.map((x) => (Number.isFinite(x) ? x : 0));
      const alpha = slips.includes("online_no_rescale") ? Array(rows).fill(1) : m.map((x, a) => Math.exp(x - shift[a]));
      const p = s.map((row, a) => row.map((x) => Math.exp(x - shift[a])));
      total = total.map((x, a) => alpha[a] * x + p[a].reduce((sum, y) => sum + y, 0));
      o = o.map((row, a) => row.map((x, f) => alpha[a] * x + p[a].reduce((sum, y, b) => sum + y * v[c0 + b][f], 0)));
      if (!slips.includes("online_max_not_carried")) m = mNew;
      if (record) record(i, j, mNew, alpha, total, o);
    }
    for (let a = 0; a < rows; a++) {
      const seen = total[a] > 0;
      output.push(o[a].map((x) => (seen ? x / total[a] : 0)));
      lse.push(seen ? mNew[a] + Math.log(total[a]) : -Infinity);
    }
  }
  return { output, lse };
}

// Every combination of the slips, fewest first.
export function combinations(): string[][] {
  const names = Object.keys(SLIPS);
  const all: string[][] = [[]];
  for (const name of names) for (const c of all.slice()) all.push([...c, name]);
  return all.sort((a, b) => a.length - b.length);
}

// The fewest slips whose loop reproduces `output` (NaN standing for a row that saw nothing); [] when it
// is right, null when no combination of the three does.
export function which(output: number[][], q: number[][], k: number[][], v: number[][], blockQ: number, blockK: number,
  causal = true, tolerance = 1e-6): string[] | null {
  for (const slips of combinations()) {
    const want = tiled(q, k, v, blockQ, blockK, causal, slips).output;
    const same = want.length === output.length && want.every((row, i) => row.length === output[i]?.length
      && row.every((x, f) => Math.abs((Number.isFinite(output[i][f]) ? output[i][f] : 0) - x) <= tolerance));
    if (same) return slips;
  }
  return null;
}

// What a learner reads about the slips `which` found.
export function named(slips: string[] | null): string {
  if (slips === null) return "the numbers are not what any of the three known slips gives: compare your loop with a 2 x 2 case by hand";
  if (!slips.length) return "the output is right";
  return slips.map((s) => SLIPS[s]).join("; and ");
}
