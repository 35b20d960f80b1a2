// Your onlineAttention against the softmax taken whole. When a test fails, its message names the slip (of the
// three this exercise knows) that gives your numbers: the same tests, in the same words, as the Python track's.
//
// Run from the folder that holds exercises/:
//   pnpm exec vitest run exercises/online-softmax/tests --config vitest.exercise.config.ts
// ONLINE_EXERCISE=path/to/yours.ts tests another file.

import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "vitest";
import { named, type Online, plain, SLIPS, which } from "./slips.ts";

const path = process.env.ONLINE_EXERCISE ? resolve(process.env.ONLINE_EXERCISE) : new URL("../starter.ts", import.meta.url).pathname;
const learner = (await import(pathToFileURL(path).href)) as { onlineAttention?: Online };
if (typeof learner.onlineAttention !== "function") {
  throw new Error(`${path} exports no function onlineAttention(q, k, v, blockQ, blockK, options)`);
}
const onlineAttention = learner.onlineAttention;

// A seeded normal generator (mulberry32 and Box-Muller): the same numbers on every run.
function normals(seed: number) {
  let state = seed >>> 0;
  const uniform = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
  };
  return (rows: number, cols: number, times = 1) => Array.from({ length: rows }, () => Array.from({ length: cols },
    () => Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform()) * times));
}
const random = normals(2023);

function fail(message: string): never {
  const error = new Error(message);
  error.stack = message; // the message is the whole story
  throw error;
}

function sameAsTheSoftmax(q: number[][], k: number[][], v: number[][], blockQ: number, blockK: number, causal: boolean, what: string) {
  const got = onlineAttention(q, k, v, blockQ, blockK, { causal });
  const where = `${what} (n = ${q.length}, block_q = ${blockQ}, block_k = ${blockK}, causal = ${causal ? "True" : "False"})`;
  if (!got || !Array.isArray(got.output) || !Array.isArray(got.lse)) fail("onlineAttention must return { output, lse }");
  const want = plain(q, k, v, causal);
  if (got.output.length !== q.length || got.output.some((row) => row.length !== v[0].length)) {
    fail(`output has the wrong shape; it must be [n][dV] = [${q.length}, ${v[0].length}]`);
  }
  const diffs = got.output.flatMap((row, i) => row.map((x, f) => Math.abs(x - want.output[i][f])));
  const nanRow = got.output.findIndex((row) => row.some(Number.isNaN));
  if (nanRow >= 0 || diffs.some((d) => d > 1e-9)) {
    const finite = diffs.filter((d) => !Number.isNaN(d));
    const by = finite.length ? `by up to ${Math.max(...finite).toPrecision(3)}` : "in every row";
    const nan = nanRow >= 0 ? ` Row ${nanRow + 1} is NaN: it saw no key.` : "";
    fail(`${where}: the output differs from the softmax ${by}.${nan} What went wrong: ${named(which(got.output, q, k, v, blockQ, blockK, causal))}.`);
  }
  const off = got.lse.map((x, i) => Math.abs(x - want.lse[i]));
  if (got.lse.length !== q.length || off.some((d) => !(d <= 1e-9))) {
    const why = got.lse.some((x) => x === -Infinity) ? ` What went wrong: ${SLIPS.online_max_not_carried}.` : "";
    fail(`${where}: the output is right but lse is not each row's log-sum-exp L = m + log l.${why}`);
  }
}

test("one tile holding every score is the plain softmax", () => {
  const [q, k, v] = [random(5, 4), random(5, 4), random(5, 4)];
  sameAsTheSoftmax(q, k, v, 5, 5, false, "One tile without a mask");
});

test("the running maximum is carried from tile to tile", () => {
  // Every row's largest score is in the first key block: nothing needs rescaling, but what the first
  // tiles added must survive the later ones.
  const q = random(6, 4);
  const k = random(6, 4, 0.1);
  k[0] = q[0].map((_, f) => 3 * q.reduce((sum, row) => sum + row[f], 0)); // key 1 scores highest for every query
  sameAsTheSoftmax(q, k, random(6, 3), 6, 2, false, "The maximum is in the first tile");
});

test("the sums are rescaled when the maximum rises", () => {
  // Each key block scores higher than the one before, for every row: each tile raises the maximum.
  const q = random(4, 4).map((row) => row.map((x) => Math.abs(x) + 0.5));
  const k = Array.from({ length: 8 }, (_, j) => Array(4).fill((Math.floor(j / 2) + 1) * 0.8));
  sameAsTheSoftmax([...q, ...q], k, random(8, 3), 8, 2, false, "The maximum rises in every tile");
});

test("the diagonal tile is computed under the causal mask", () => {
  // One tile holds the whole causal score matrix: it is the diagonal, masked inside, never skipped.
  sameAsTheSoftmax(random(4, 4), random(4, 4), random(4, 4), 4, 4, true, "One causal tile on the diagonal");
});

for (const causal of [true, false]) {
  test(`every block size gives the softmax (${causal ? "causal" : "unmasked"})`, () => {
    const [q, k, v] = [random(7, 4), random(7, 4), random(7, 4)];
    for (let blockQ = 1; blockQ <= 7; blockQ++) {
      for (let blockK = 1; blockK <= 7; blockK++) sameAsTheSoftmax(q, k, v, blockQ, blockK, causal, "Random scores");
    }
  });
}

test("large scores do not overflow", () => {
  // Scores near 1,000: exp(1000) overflows a double; exp(s - m) never does.
  sameAsTheSoftmax(random(6, 4, 40), random(6, 4, 40), random(6, 4), 2, 3, true, "Scores in the hundreds");
});

test("tiles in the future are never computed", () => {
  // Under the causal mask with n = T x B and square blocks, T(T+1)/2 tiles are computed.
  const computed = new Set<string>();
  onlineAttention(random(8, 4), random(8, 4), random(8, 4), 2, 2, { causal: true, record: (i, j) => { computed.add(`${i},${j}`); } });
  const future = [...computed].map((t) => t.split(",").map(Number)).filter(([i, j]) => j > i);
  if (future.length) fail(`tiles above the diagonal were computed (query block, key block): ${JSON.stringify(future.map(([i, j]) => [i + 1, j + 1]))}`);
  const missing: number[][] = [];
  for (let i = 0; i < 4; i++) for (let j = 0; j <= i; j++) if (!computed.has(`${i},${j}`)) missing.push([i, j]);
  if (missing.length && missing.every(([i, j]) => i === j)) {
    fail(`the tiles on the diagonal were not computed. What went wrong: ${SLIPS.online_diagonal_skipped}.`);
  }
  if (missing.length) {
    fail(`tiles that hold keys a query sees were not recorded (query block, key block): ${JSON.stringify(missing.map(([i, j]) => [i + 1, j + 1]))} `
      + "(call record(queryBlock, keyBlock, m, alpha, l, o) after each tile)");
  }
});
