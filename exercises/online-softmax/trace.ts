// Your onlineAttention beside the correct loop, tile by tile, on the explorable's numbers (as trace.py).
//
//   pnpm exec tsx exercises/online-softmax/trace.ts my_online.ts                      (the explorable's eight tokens)
//   pnpm exec tsx exercises/online-softmax/trace.ts my_online.ts 'EXPLORABLE_LINK'    (copied from /explorables/online-softmax)
//   pnpm exec tsx exercises/online-softmax/trace.ts my_online.ts 'EXPLORABLE_LINK' --json
//
// Runs your function on the link's tokens (the head it shows: Q = K = V = that head's features, causal,
// square blocks of the link's size), records m, alpha, l and o after every tile you compute, finds the
// first tile where your loop parts from the correct one, prints that tile's rows (yours, then the correct
// ones), names the slip your output shows, and prints an explorable link that draws your values at that
// tile beside the correct loop's (and the slip's).

import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { named, type Online, tiled, which } from "./tests/slips.ts";

const PAGE = "/explorables/online-softmax";
const VALUES = ["m", "l", "o"] as const; // compared; alpha is shown (a row that held nothing rescales nothing)
type Values = { m: number[]; alpha: number[]; l: number[]; o: number[][] };
type Found = { query_block: number; key_block: number; what: string; yours: Values | null; correct: Values | null };

class TraceError extends Error {
  name = "TraceError";
}

async function readLink(link: string | undefined): Promise<{ tokens: number[][]; block: number; head: number; site: string }> {
  let url: URL;
  try {
    url = new URL(link ?? `http://127.0.0.1:8000${PAGE}`);
  } catch {
    throw new TraceError(`${JSON.stringify(link)} is not an explorable link: copy the whole address from ${PAGE}`);
  }
  if (!/^https?:$/.test(url.protocol)) throw new TraceError(`${JSON.stringify(link)} is not an explorable link: copy the whole address from ${PAGE}`);
  const params = new URLSearchParams(url.hash.slice(1));
  const site = url.origin;
  let tokens: number[][];
  if (params.has("t")) {
    tokens = params.get("t")!.split(";").map((row) => row.split(",").map(Number));
  } else {
    try {
      tokens = ((await (await fetch(`${site}/api/v1/presets/online-softmax`)).json()) as { request: { tokens: number[][] } }).request.tokens;
    } catch (error) {
      throw new TraceError(`the link has no tokens (t=...) and ${site} did not answer (${error}): copy a link that has them`);
    }
  }
  const block = Number(params.get("block") ?? 2), head = Number(params.get("head") ?? 0);
  const width = tokens[0]?.length ?? 0;
  if (!tokens.every((row) => row.length === width && row.every(Number.isFinite)) || width % 2 || !Number.isInteger(block)
    || block < 1 || block > tokens.length || (head !== 0 && head !== 1)) {
    throw new TraceError("the link's tokens, block or head are not the explorable's: copy the link again");
  }
  return { tokens, block, head, site };
}

async function load(path: string): Promise<Online> {
  let learner: { onlineAttention?: Online };
  try {
    learner = await import(pathToFileURL(resolve(path)).href);
  } catch (error) {
    throw new TraceError(`${path} does not load: ${error instanceof Error ? error.message : error}`);
  }
  if (typeof learner.onlineAttention !== "function") {
    throw new TraceError(`${path} exports no function onlineAttention(q, k, v, blockQ, blockK, options)`);
  }
  return learner.onlineAttention;
}

function recorded(run: (record: (i: number, j: number, m: number[], alpha: number[], l: number[], o: number[][]) => void) => { output: number[][] }) {
  const tiles = new Map<string, Values>();
  const result = run((i, j, m, alpha, l, o) => tiles.set(`${i},${j}`, structuredClone({ m, alpha, l, o })));
  return { tiles, output: result.output };
}

const close = (a: number, b: number) => (Number.isNaN(a) ? false : a === b || Math.abs(a - b) <= 1e-9);

function firstDifference(yours: Map<string, Values>, correct: Map<string, Values>, n: number, block: number): Found | null {
  const count = Math.ceil(n / block);
  for (let i = 0; i < count; i++) {
    for (let j = 0; j < count; j++) {
      const mine = yours.get(`${i},${j}`) ?? null, right = correct.get(`${i},${j}`) ?? null;
      const at = { query_block: i + 1, key_block: j + 1, yours: mine, correct: right };
      if ((mine === null) !== (right === null)) return { ...at, what: mine ? "computed" : "skipped" };
      if (!mine || !right) continue;
      for (const name of VALUES) {
        const a = [mine[name]].flat(2) as number[], b = [right[name]].flat(2) as number[];
        if (a.length !== b.length || a.some((x, k) => !close(x, b[k]))) return { ...at, what: name };
      }
    }
  }
  return null;
}

export async function trace(path: string, link?: string) {
  const { tokens, block, head, site } = await readLink(link);
  const width = tokens[0].length / 2;
  const x = tokens.map((row) => row.slice(head * width, (head + 1) * width)); // Q = K = V under identity projections
  const learner = await load(path);
  const yours = recorded((record) => learner(x, x, x, block, block, { causal: true, record }));
  const correct = recorded((record) => tiled(x, x, x, block, block, true, [], record));
  const found = firstDifference(yours.tiles, correct.tiles, x.length, block);
  const slips = which(yours.output, x, x, x, block, block, true);
  const state = new URLSearchParams({ t: tokens.map((row) => row.join(",")).join(";"), block: String(block), head: String(head) });
  if (slips?.length) {
    const skipped = found?.what === "skipped" && slips.includes("online_diagonal_skipped");
    state.set("compare", skipped ? "online_diagonal_skipped" : slips[0]);
  }
  if (found) {
    const tile = (found.query_block - 1) * Math.ceil(x.length / block) + found.key_block; // stepped up to it
    state.set("tile", String(tile));
    state.set("yours", `${tile}:${drawn(found.yours)}`); // drawn beside the right loop's values
  }
  const link_ = `${site}${PAGE}#${state.toString().replaceAll("%2C", ",").replaceAll("%3B", ";")}`;
  return { first_difference: found, slips, link: link_ };
}

// Your values at a tile as the explorable reads them: a row per query, "m,alpha,l,o..." (as trace.py writes them).
function drawn(values: Values | null): string {
  if (!values) return "skipped";
  return values.m.map((_, r) => [values.m[r], values.alpha[r], values.l[r], ...values.o[r]].map((v) => v.toExponential(5)).join(",")).join(";");
}

function rows(values: Values | null): string[] {
  if (!values) return ["  (not computed)"];
  const g = (v: number) => Number(v.toPrecision(6));
  return values.m.map((_, r) => `  row ${r + 1}: m = ${g(values.m[r])}, alpha = ${g(values.alpha[r])}, l = ${g(values.l[r])}, `
    + `o = [${values.o[r].map(g).join(", ")}]`);
}

async function main(argv: string[]): Promise<number> {
  const json = argv.includes("--json");
  const [file, link] = argv.filter((a) => a !== "--json");
  if (!file) {
    console.error("usage: trace.ts your_file.ts ['EXPLORABLE_LINK'] [--json]");
    return 2;
  }
  let result;
  try {
    result = await trace(file, link);
  } catch (error) {
    if (error instanceof TraceError) {
      console.error(`trace: ${error.message}`);
      return 2;
    }
    throw error;
  }
  const found = result.first_difference;
  if (json) {
    console.log(JSON.stringify(result, (_, v) => (typeof v === "number" && !Number.isFinite(v) ? null : v)));
    return 0;
  }
  if (!found) {
    console.log("Every tile matches the correct loop: your online softmax is the softmax.");
  } else {
    const what: Record<string, string> = {
      computed: "you computed it; the correct loop skips it (every key is in the future)",
      skipped: "you skipped it; the correct loop computes it",
      m: "the running maximum m differs", l: "the running sum l differs", o: "the unnormalised output o differs",
    };
    console.log(`First difference: the tile at query block ${found.query_block}, key block ${found.key_block}: ${what[found.what]}.`);
    console.log(["Yours:", ...rows(found.yours), "Correct:", ...rows(found.correct)].join("\n"));
    console.log(`What went wrong: ${named(result.slips)}.`);
  }
  console.log(`See it drawn: ${result.link}`);
  return found ? 1 : 0;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) process.exitCode = await main(process.argv.slice(2));
