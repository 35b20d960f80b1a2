// Answer an online-softmax challenge with your onlineAttention: the server checks the numbers (as submit.py).
//
//   pnpm exec tsx exercises/online-softmax/submit.ts my_online.ts --challenge URL          (the lesson page shows the whole command)
//   pnpm exec tsx exercises/online-softmax/submit.ts my_online.ts --challenge URL --print  (JSON for the lesson's paste box)
//
// Your code runs here, on your machine; only its numbers are sent. The same by hand, from any language:
// GET the challenge URL (its cases: tokens [n][d], causal, block_q, block_k; one head, Q = K = V = tokens),
// compute each case's output [n][d] and lse [n], POST {"answers": [{"output", "lse"}, ...]} to its answers_url.

import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Online } from "./tests/slips.ts";

class SubmitError extends Error {
  name = "SubmitError";
}

type Case = { tokens: number[][]; causal: boolean; block_q: number; block_k: number };
type Challenge = { id?: string; status?: string; cases: Case[]; answers_url: string };

/** The server's verdict in the learner's language: ONLINE_LANG, else the locale (es_ES.UTF-8: es). */
function language(): string {
  const chosen = process.env.ONLINE_LANG || process.env.LANG || Intl.DateTimeFormat().resolvedOptions().locale || "en";
  return chosen.split(".")[0].replace("_", "-") || "en";
}

async function load(path: string): Promise<Online> {
  let learner: { onlineAttention?: Online };
  try {
    learner = await import(pathToFileURL(path).href);
  } catch (error) {
    throw new SubmitError(`${path} does not load: ${error instanceof Error ? error.message : error}`);
  }
  if (typeof learner.onlineAttention !== "function") {
    throw new SubmitError(`${path} exports no function onlineAttention(q, k, v, blockQ, blockK, options)`);
  }
  return learner.onlineAttention;
}

/** GET (or POST `body` to) `url`; a refusal becomes its problem detail, never a stack. */
async function fetchJson(url: string, body?: unknown): Promise<Record<string, any>> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: body === undefined ? "GET" : "POST",
      headers: { Accept: "application/json", "Accept-Language": language(),
        ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new SubmitError(`could not reach ${url} (${cause?.code ?? cause?.message ?? (error as Error).message}): `
      + "add --print and paste the JSON it prints into the lesson page instead");
  }
  const text = await response.text();
  if (!response.ok) throw new SubmitError(`${url} answered ${response.status}: ${detail(text)}`);
  try {
    return JSON.parse(text);
  } catch {
    throw new SubmitError(`${url} did not answer JSON: is it the challenge link the lesson shows?`);
  }
}

function detail(text: string): string {
  try {
    const problem = JSON.parse(text);
    const said = problem.detail || problem.title || "";
    return problem.errors ? `${said} ${JSON.stringify(problem.errors)}` : said;
  } catch {
    return text.slice(0, 200);
  }
}

async function readChallenge(source: string): Promise<Challenge> {
  let challenge: Challenge;
  if (/^https?:\/\//.test(source)) {
    challenge = (await fetchJson(source)) as Challenge;
  } else {
    try {
      challenge = JSON.parse(readFileSync(resolve(source), "utf8"));
    } catch (error) {
      throw new SubmitError(`could not read the challenge from ${source}: ${(error as Error).message}`);
    }
  }
  if (!challenge || !Array.isArray(challenge.cases) || !challenge.answers_url) {
    throw new SubmitError(`${source} is not a challenge (it has no cases or answers_url)`);
  }
  if (challenge.status === "solved" || challenge.status === "expired") {
    throw new SubmitError(`this challenge is ${challenge.status}; ask the lesson page for a new one`);
  }
  return challenge;
}

function describe(c: Case): string {
  return `${c.tokens.length} tokens of width ${c.tokens[0].length}, tiles of ${c.block_q} x ${c.block_k}, ${c.causal ? "causal" : "no mask"}`;
}

/** Your function's output and L for each case (Q = K = V = its tokens), NaN as null. */
function answersFor(fn: Online, cases: Case[]) {
  return cases.map((c, i) => {
    let result: { output: number[][]; lse: number[] };
    try {
      result = fn(c.tokens, c.tokens, c.tokens, c.block_q, c.block_k, { causal: c.causal });
    } catch (error) {
      throw new SubmitError(`case ${i + 1} (${describe(c)}): ${error instanceof Error ? error.message : error}`);
    }
    const n = c.tokens.length, d = c.tokens[0].length;
    const { output, lse } = result ?? {};
    if (!Array.isArray(output) || output.length !== n || !output.every((row) => Array.isArray(row) && row.length === d)
      || !Array.isArray(lse) || lse.length !== n) {
      throw new SubmitError(`case ${i + 1} (${describe(c)}): onlineAttention must return { output: [${n}][${d}], lse: [${n}] }`);
    }
    return { output: nulls(output), lse: nulls(lse) };
  });
}

function nulls(values: unknown): unknown {
  return Array.isArray(values) ? values.map(nulls) : Number.isFinite(values) ? values : null;
}

function report(verdict: Record<string, any>): string {
  const lines = (verdict.cases ?? []).map((c: Record<string, any>) =>
    `${c.correct ? "✓" : "✗"} case ${c.case}:${c.mistakes.length ? ` [${c.mistakes.join(", ")}]` : ""} ${c.message}`);
  lines.push(verdict.message);
  if (verdict.correct) lines.push("The lesson's checkpoint is complete: reload the lesson page to see it.");
  return lines.join("\n");
}

async function main(argv: string[]): Promise<number> {
  const args = argv.filter((a) => a !== "--");
  const at = args.indexOf("--challenge");
  const source = at >= 0 ? args[at + 1] : undefined;
  const path = args.find((a, i) => !a.startsWith("--") && i !== at + 1);
  if (!path || !source) {
    console.error("usage: pnpm exec tsx exercises/online-softmax/submit.ts my_online.ts --challenge URL [--print]");
    return 2;
  }
  let verdict: Record<string, any>;
  try {
    const fn = await load(resolve(path));
    const challenge = await readChallenge(source);
    const answers = answersFor(fn, challenge.cases);
    if (args.includes("--print")) {
      console.log(JSON.stringify({ challenge: challenge.id, answers }));
      return 0;
    }
    verdict = await fetchJson(challenge.answers_url, { answers });
  } catch (error) {
    if (error instanceof SubmitError) {
      console.error(`✗ ${error.message}`);
      return 2;
    }
    throw error;
  }
  console.log(report(verdict));
  return verdict.correct ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) process.exitCode = await main(process.argv.slice(2));
