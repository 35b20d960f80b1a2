// Run your multiHeadAttention on a case and check what it returns: a message for every slip.
//
// Node alone (no packages). The tests, submit.ts and trace.ts all call your code through this
// file, so a missing head axis, a string among the numbers, a NaN or an exception in your code
// reads the same everywhere; the words are tests/messages.json, shared with the Python track.

import { existsSync, readFileSync } from "node:fs";
import { extname, resolve } from "node:path";
import { pathToFileURL } from "node:url";

export type Matrix = number[][];
export type Tensor3 = number[][][];
export interface Options {
  causal?: boolean;
  outputProjection?: Matrix;
}
export interface Result {
  weights: Tensor3;
  headOutputs: Tensor3;
  concatenated: Matrix;
  output: Matrix;
}
export type Implementation = (tokens: Matrix, heads: number, options?: Options) => Result;
export interface Case {
  tokens: Matrix;
  heads: number;
  causal?: boolean;
  output_projection?: Matrix | null;
}

export const MESSAGES: Record<string, string> = JSON.parse(
  readFileSync(new URL("./tests/messages.json", import.meta.url), "utf8"),
); // English: every key

/** The messages' language: MHA_LANG, else the locale (LC_ALL, LC_MESSAGES, LANG): es, zh-CN or en. */
export function language(): string {
  for (const name of ["MHA_LANG", "LC_ALL", "LC_MESSAGES", "LANG"]) {
    const tag = (process.env[name] ?? "").split(".")[0].replace(/_/g, "-").toLowerCase();
    if (!tag) continue;
    if (tag.startsWith("zh") && !tag.split("-").some((part) => ["tw", "hk", "mo", "hant"].includes(part))) return "zh-CN";
    return tag.split("-")[0] === "es" ? "es" : "en";
  }
  return "en";
}

/** The messages in `lang`: its translation over the English, so a key it lacks reads in English. */
export function messages(lang: string): Record<string, string> {
  const path = new URL(`./tests/messages.${lang}.json`, import.meta.url);
  return existsSync(path) ? { ...MESSAGES, ...JSON.parse(readFileSync(path, "utf8")) } : MESSAGES;
}
export const FUNCTION = "multiHeadAttention";
const SIGNATURE = "multiHeadAttention(tokens, heads, { causal, outputProjection })";
const RETURNS = "an object of weights, headOutputs, concatenated and output";
// part -> its axes, as the README writes them
export const AXES: Record<keyof Result, string> = {
  weights: "[H][n][n]",
  headOutputs: "[H][n][d_head]",
  concatenated: "[n][d_model]",
  output: "[n][d_model]",
};
export const PARTS = Object.keys(AXES) as (keyof Result)[];

/** Your file could not be loaded, or your function threw or returned something unusable. */
export class LearnerError extends Error {
  name = "LearnerError";
}

/** The shared message `key` with its blanks filled in, in the learner's language. */
export function say(key: string, values: Record<string, unknown> = {}): string {
  return messages(language())[key].replace(/\{(\w+)\}/g, (blank, name: string) => (name in values ? show(values[name]) : blank));
}

/** Lists as Python prints them ([1, 2]); anything else as it is. */
export function show(value: unknown): string {
  return Array.isArray(value) ? `[${value.map(show).join(", ")}]` : String(value);
}

/** A number as Python's "%.3g" writes it. */
export function g3(v: number): string {
  if (!Number.isFinite(v)) return Number.isNaN(v) ? "nan" : v > 0 ? "inf" : "-inf";
  if (v === 0) return Object.is(v, -0) ? "-0" : "0";
  const [mantissa, exponent] = v.toExponential(2).split("e");
  const e = Number(exponent);
  const strip = (text: string) => (text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text);
  if (e < -4 || e >= 3) return `${strip(mantissa)}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  return strip(v.toFixed(2 - e));
}

export function fmt(values: unknown): string {
  return "[" + flat(values).map(g3).join(", ") + "]";
}

export function flat(values: unknown): number[] {
  return Array.isArray(values) ? values.flatMap(flat) : [values as number];
}

export function describe(c: Case): string {
  const mask = c.causal ?? true ? "causal" : "no mask";
  const projection = c.output_projection ? ", with W_O" : "";
  return `${c.tokens.length} token${c.tokens.length === 1 ? "" : "s"} of width ${c.tokens[0].length}, ${c.heads} heads, ${mask}${projection}`;
}

const SOURCES = new WeakMap<Implementation, string>(); // which file each loaded function came from

/** The multiHeadAttention your file exports. */
export async function load(path: string): Promise<Implementation> {
  const file = resolve(path);
  if (!existsSync(file)) throw new LearnerError(say("no_file", { path: file }));
  if (![".ts", ".mts", ".js", ".mjs"].includes(extname(file))) {
    throw new LearnerError(say("not_source", { path: file, language: "TypeScript or JavaScript (.ts, .js)" }));
  }
  let module: Record<string, unknown>;
  try {
    module = await import(pathToFileURL(file).href);
  } catch (error) {
    throw new LearnerError(say("import_raised", { path: file, error: errorText(error), where: where(error, file) }));
  }
  const fn = module[FUNCTION] ?? (module.default as Record<string, unknown> | undefined)?.[FUNCTION];
  if (typeof fn !== "function") {
    const names = Object.keys(module).filter((name) => typeof module[name] === "function");
    const found = names.length ? say("found_functions", { names: names.join(", ") }) : "";
    throw new LearnerError(say("no_function", { path: file, function: `exported ${FUNCTION}`, signature: SIGNATURE, found }));
  }
  SOURCES.set(fn as Implementation, file);
  return fn as Implementation;
}

export function expectedShapes(c: Case): Record<keyof Result, number[]> {
  const n = c.tokens.length, dModel = c.tokens[0].length, heads = c.heads;
  const dHead = Math.floor(dModel / heads);
  return { weights: [heads, n, n], headOutputs: [heads, n, dHead], concatenated: [n, dModel], output: [n, dModel] };
}

/** Your function's four parts for `c`, checked for type and shape; NaN is kept (see nanProblem). */
export function call(fn: Implementation, c: Case): Result {
  const options: Options = { causal: c.causal ?? true };
  if (c.output_projection) options.outputProjection = c.output_projection;
  let result: unknown;
  try {
    result = fn(c.tokens.map((row) => [...row]), c.heads, options);
  } catch (error) {
    throw new LearnerError(say("raised", { function: FUNCTION, error: errorText(error), where: where(error, SOURCES.get(fn)), case: describe(c), hint: "" }));
  }
  if (result === null || typeof result !== "object" || Array.isArray(result)) {
    const type = result === null ? "null" : Array.isArray(result) ? "an array" : typeof result;
    throw new LearnerError(say("not_a_dict", { function: FUNCTION, returns: RETURNS, type }));
  }
  const parts = result as Record<string, unknown>;
  const missing = PARTS.filter((p) => !(p in parts));
  if (missing.length) throw new LearnerError(say("missing_parts", { parts: missing.join(", "), all: PARTS.join(", ") }));
  for (const part of PARTS) {
    const problem = notNumbers(parts[part]);
    if (problem) throw new LearnerError(say("not_numbers", { part, error: problem }));
  }
  const checked = parts as unknown as Result;
  const problems = shapeProblems(checked, c);
  if (problems.length) throw new LearnerError(problems.join("; "));
  return checked;
}

/** Why `value` is not a rectangular nested array of numbers, or "" when it is one. */
function notNumbers(value: unknown): string {
  if (typeof value === "number") return "";
  if (!Array.isArray(value) && !ArrayBuffer.isView(value)) return `${typeof value} ${show(value)} is not a number`;
  const items = Array.from(value as ArrayLike<unknown>);
  for (const item of items) {
    const problem = notNumbers(item);
    if (problem) return problem;
  }
  const shapes = new Set(items.map((item) => JSON.stringify(shapeOf(item))));
  return shapes.size > 1 ? "its rows have different lengths" : "";
}

export function shapeOf(value: unknown): number[] {
  return Array.isArray(value) ? [value.length, ...(value.length ? shapeOf(value[0]) : [])] : [];
}

export function shapeProblems(result: Result, c: Case): string[] {
  const want = expectedShapes(c);
  return PARTS.flatMap((part) => {
    const got = shapeOf(result[part]);
    if (show(got) === show(want[part])) return [];
    return [say("wrong_shape", { part, got, axes: AXES[part], want: want[part], case: describe(c), hint: shapeHint(got, want[part]) })];
  });
}

function shapeHint(got: number[], want: number[]): string {
  const same = (a: number[], b: number[]) => show(a) === show(b);
  if (want.length === 3 && same(got, want.slice(1))) return say("hint_missing_head_axis");
  if (got.length === want.length && same(got, [...want].reverse())) return say("hint_transposed");
  if (want.length === 3 && same(got, [want[1], want[0], want[2]])) return say("hint_heads_last");
  if (got.length === want.length && got.length >= 2 && got[got.length - 2] !== want[want.length - 2]) {
    return say("hint_wrong_n", { n: want[want.length - 2] });
  }
  return "";
}

/** Where the first NaN is, named; a masked diagonal is named as the mistake it is. */
export function nanProblem(result: Result, c: Case): string | null {
  for (const part of PARTS) {
    const values = flat(result[part]);
    const k = values.findIndex(Number.isNaN);
    if (k < 0) continue;
    const shape = shapeOf(result[part]);
    const index = shape.map((_, axis) => Math.floor(k / shape.slice(axis + 1).reduce((a, b) => a * b, 1)) % shape[axis]);
    const names = shape.length === 3 ? ["head", "query", "key"] : ["query", "feature"];
    const at = index.map((i, axis) => `${names[axis]} ${i + 1}`).join(", ");
    const diagonal = part === "weights" && (c.causal ?? true) && result.weights.every((head) => head[0].every(Number.isNaN));
    return say(diagonal ? "nan_diagonal" : "nan", { part, where: at, case: describe(c) });
  }
  return null;
}

function errorText(error: unknown): string {
  if (error instanceof Error) return error.message ? `${error.name}: ${error.message.split(/\s+/).join(" ")}` : error.name;
  return `the value ${show(error)}`;
}

/** " (line 12 of my_attention.ts)": the learner's own frame, so they know where to look. */
function where(error: unknown, file?: string): string {
  if (!(error instanceof Error) || !error.stack || !file) return "";
  const name = file.split(/[\\/]/).pop() as string;
  const line = error.stack.split("\n").find((l) => l.includes(name));
  const match = line && /:(\d+):\d+\)?$/.exec(line.trim());
  return match ? ` (line ${match[1]} of ${name})` : "";
}
