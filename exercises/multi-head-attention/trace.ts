// Your multiHeadAttention beside the engine's, on the numbers the workbench shows (as trace.py).
//
//   pnpm run trace -- my_attention.ts 'WORKBENCH_LINK'          (copy the link from the workbench)
//   pnpm run trace -- my_attention.ts 'WORKBENCH_LINK' --open   (and open the answer in a browser)
//   pnpm run trace -- my_attention.ts 'WORKBENCH_LINK' --json
//
// Runs your function on the link's tokens, heads and mask, compares each stage it returns with
// the correct result, names the first that differs and the known mistake that reproduces your
// numbers, and prints a workbench link drawing "yours" beside "correct" at every stage.

import { spawn } from "node:child_process";
import { type Case, describe, flat, g3, type Implementation, LearnerError, load, nanProblem, type Result, shapeOf, shapeProblems } from "./learner.ts";
import { fetchJson, fromCaller, SubmitError } from "./submit.ts";
import { ALL, attention, SYMPTOMS, which } from "./tests/mistakes.ts";

// The parts as the workbench names its stages (data-stage), in pipeline order.
const STAGES: [string, keyof Result, string][] = [
  ["weights", "weights", "the weights"],
  ["head-output", "headOutputs", "the head outputs"],
  ["concat", "concatenated", "the concatenation"],
  ["output", "output", "the output"],
];
const LEARNED = "/api/v1/presets/workbench-learned";

class TraceError extends Error {
  name = "TraceError";
}

async function readLink(link: string): Promise<{ c: Case; params: URLSearchParams; page: string }> {
  let url: URL;
  try {
    url = new URL(link);
  } catch {
    throw new TraceError(`${JSON.stringify(link)} is not a workbench link: copy the whole address, with its #t=... part, from the workbench`);
  }
  if (!/^https?:$/.test(url.protocol) || !url.hash) {
    throw new TraceError(`${JSON.stringify(link)} is not a workbench link: copy the whole address, with its #t=... part, from the workbench`);
  }
  const params = new URLSearchParams(url.hash.slice(1));
  const tokens = (params.get("t") ?? "").split(";").map((row) => row.split(",").map(Number));
  const heads = Number(params.get("heads") ?? "2");
  if (!params.get("t") || tokens.some((row) => row.some((v) => !Number.isFinite(v)))) {
    throw new TraceError("the link holds no tokens (its #t=... part): copy it again from the workbench");
  }
  if (new Set(tokens.map((row) => row.length)).size !== 1 || !(heads >= 1) || tokens[0].length % heads) {
    throw new TraceError(`the link's tokens (${tokens.length} rows) and heads (${heads}) do not fit together`);
  }
  const unsupported = ([
    ["kv", "fewer key/value heads than heads (grouped-query attention)", String(heads)],
    ["rope", "RoPE", ""],
    ["qkv", "learned W_Q, W_K, W_V", "identity"],
  ] as const).filter(([key, , fallback]) => (params.get(key) ?? fallback) !== fallback).map(([, label]) => label);
  if (unsupported.length) {
    throw new TraceError(`the link uses ${unsupported.join(" and ")}; the exercise's function computes Q = K = V = the tokens, ` +
      "one key/value head per head, no RoPE: switch those off in the workbench and copy the link again");
  }
  const c: Case = { tokens, heads, causal: params.get("causal") !== "0" };
  if (params.get("wo") === "learned") {
    try {
      c.output_projection = (await fetchJson(url.origin + LEARNED)).request.projections.output;
    } catch (error) {
      throw new TraceError(`the link uses the learned W_O, which comes from ${url.origin}${LEARNED}: ${(error as Error).message}`);
    }
  }
  return { c, params, page: url.origin + url.pathname + url.search };
}

function isClose(a: unknown, b: unknown): boolean {
  return typeof a === "number" && typeof b === "number" && Math.abs(a - b) <= 1e-12 + 1e-9 * Math.abs(b);
}

/** The learner's parts as returned, numbers or not (the shapes are compared, not required). */
function outputs(fn: Implementation, c: Case): Result {
  try {
    return fn(c.tokens.map((row) => [...row]), c.heads, { causal: c.causal, ...(c.output_projection ? { outputProjection: c.output_projection } : {}) });
  } catch (error) {
    throw new LearnerError(`your multiHeadAttention threw ${(error as Error).name}: ${(error as Error).message} for ${describe(c)}`);
  }
}

export async function trace(path: string, link: string) {
  const { c, params, page } = await readLink(link);
  const yours = outputs(await load(fromCaller(path)), c);
  const missing = STAGES.filter(([, part]) => !(yours && part in yours)).map(([, part]) => part);
  if (missing.length) throw new LearnerError(`the result is missing ${missing.join(", ")}`);
  const correct = attention(c.tokens, c.heads, c.causal, null, c.output_projection ?? undefined);
  const stages: Record<string, string> = {};
  let maxError = 0;
  for (const [stage, part] of STAGES) {
    if (JSON.stringify(shapeOf(yours[part])) !== JSON.stringify(shapeOf(correct[part]))) {
      stages[stage] = "wrong shape";
      continue;
    }
    const mine = flat(yours[part]), theirs = flat(correct[part]);
    stages[stage] = mine.every((v, k) => isClose(v, theirs[k])) ? "identical" : "differs";
    for (const [k, v] of mine.entries()) if (Number.isFinite(v - theirs[k])) maxError = Math.max(maxError, Math.abs(v - theirs[k]));
  }
  const first = STAGES.map(([s]) => s).find((s) => stages[s] !== "identical") ?? "identical";
  const zeroed = Object.fromEntries(STAGES.map(([, part]) => [part, denan(yours[part])])) as unknown as Result;
  const comparable = (["weights", "concatenated", "output"] as const).filter((p) => stages[STAGES.find(([, q]) => q === p)![0]] !== "wrong shape");
  const mistake = first === "identical" || !comparable.length ? null
    : which(zeroed, c.tokens, c.heads, c.causal ?? true, ALL, [...comparable], c.output_projection ?? undefined);
  const problems = [...shapeProblems(yours, c), ...[nanProblem(yours, c)].filter((p): p is string => Boolean(p))];
  return { first_divergence: first, mistake, max_error: maxError, stages, problems, case: describe(c), link: yoursLink(page, params, yours), left_out: leftOut(params) };
}

function denan(values: unknown): unknown {
  return Array.isArray(values) ? values.map(denan) : Number.isNaN(values) ? 0 : values;
}

// What a link with your numbers cannot carry: yours is compared with the correct computation, so the
// broken reuse and a comparison with a failure mode are left out (and said); a replayed cell goes too.
const LEFT_OUT: Record<string, string> = {
  reuse: "the broken reuse (your numbers are compared with the correct computation)",
  compare: "the failure-mode comparison (yours takes its place)",
  cell: "the replayed weight",
};
const LESSON = "multi-head-attention"; // the workbench's way back

function leftOut(params: URLSearchParams): string[] {
  return Object.entries(LEFT_OUT).filter(([key]) => !["", "0", null].includes(params.get(key)))
    .map(([key, why]) => `${key}=${params.get(key)}: ${why}`);
}

function yoursLink(page: string, params: URLSearchParams, yours: Result): string {
  const kept = new URLSearchParams([...params].filter(([key]) => !(key in LEFT_OUT) && !["yours", "lesson"].includes(key)));
  const rounded = (v: unknown): unknown => (Array.isArray(v) ? v.map(rounded) : Number.isFinite(v) ? Number((v as number).toPrecision(12)) : null);
  kept.set("yours", JSON.stringify(Object.fromEntries(STAGES.map(([stage, part]) => [stage, rounded(yours[part])]))));
  kept.set("lesson", LESSON);
  // Percent-encoded as URLSearchParams reads it, with the JSON's brackets and commas left readable.
  const readable = (v: string) => encodeURIComponent(v).replace(/%(2C|3B|5B|5D|7B|7D|3A)/g, (code) => decodeURIComponent(code));
  return `${page}#${[...kept].map(([key, value]) => `${key}=${readable(value)}`).join("&")}`;
}

function report(result: Awaited<ReturnType<typeof trace>>): string {
  const names = Object.fromEntries(STAGES.map(([stage, , name]) => [stage, name]));
  const lines = [`Your multiHeadAttention on the workbench's case (${result.case}):`];
  for (const [stage, verdict] of Object.entries(result.stages)) lines.push(`  ${verdict === "identical" ? "✓" : "✗"} ${names[stage]}: ${verdict}`);
  for (const problem of result.problems) lines.push(`  ${problem}`);
  if (result.first_divergence === "identical") {
    lines.push("Identical to the engine at every stage your function returns.");
  } else {
    lines.push(`The first difference is ${names[result.first_divergence]} (largest difference ${g3(result.max_error)}).`);
    lines.push(result.mistake
      ? `Your numbers are what the known mistake ${result.mistake} computes${result.mistake in SYMPTOMS ? `: ${SYMPTOMS[result.mistake]}` : ""}.`
      : "No single known mistake computes these numbers (several at once, or a new one).");
  }
  if (result.left_out.length) lines.push(`The link below leaves out ${result.left_out.join("; ")}.`);
  lines.push("Yours beside the engine's, at every stage, in the workbench:", `  ${result.link}`);
  return lines.join("\n");
}

async function main(argv: string[]): Promise<number> {
  const args = argv.filter((a) => a !== "--");
  const [path, link] = args.filter((a) => !a.startsWith("--"));
  if (!path || !link) {
    console.error("usage: pnpm run trace -- my_attention.ts 'WORKBENCH_LINK' [--json] [--open]");
    return 2;
  }
  let result: Awaited<ReturnType<typeof trace>>;
  try {
    result = await trace(path, link);
  } catch (error) {
    if (error instanceof LearnerError || error instanceof TraceError || error instanceof SubmitError) {
      console.error(`✗ ${error.message}`);
      return 2;
    }
    throw error;
  }
  if (args.includes("--json")) {
    const { first_divergence, mistake, max_error, stages, problems, link: answer, left_out } = result;
    console.log(JSON.stringify({ first_divergence, mistake, max_error, stages, problems, link: answer, left_out }));
  } else {
    console.log(report(result));
  }
  if (args.includes("--open")) {
    const opener = process.platform === "darwin" ? "open" : process.platform === "win32" ? "explorer" : "xdg-open";
    spawn(opener, [result.link], { detached: true, stdio: "ignore" }).on("error", () => {}).unref();
  }
  return result.first_divergence === "identical" ? 0 : 1;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = await main(process.argv.slice(2));
