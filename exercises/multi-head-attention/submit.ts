// Answer a challenge with your multiHeadAttention: the server checks the numbers.
//
//   pnpm run submit -- my_attention.ts --challenge URL          (the lesson page shows the whole command)
//   pnpm run submit -- my_attention.ts --challenge URL --print  (JSON for the lesson's paste box)
//
// Your code runs here, on your machine; only its numbers are sent (as submit.py does). The same by
// hand, from any language: GET the challenge URL, compute each of its cases, POST
// {"answers": [{"weights", "head_outputs", "concatenated", "output"}, ...]} to its answers_url.

import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { call, type Case, describe, type Implementation, language, LearnerError, load, say } from "./learner.ts";

export class SubmitError extends Error {
  name = "SubmitError";
  constructor(message: string, readonly unreachable = false) {
    super(message);
  }
}

interface Challenge {
  id?: string;
  status?: string;
  cases: Case[];
  answers_url: string;
}

/** GET (or POST `body` to) `url`; a refusal becomes its problem detail, never a stack. */
export async function fetchJson(url: string, body?: unknown): Promise<Record<string, any>> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: body === undefined ? "GET" : "POST",
      // the server's verdict in the messages' language (MHA_LANG, else the locale), as the tests speak
      headers: { Accept: "application/json", "Accept-Language": language(),
        ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new SubmitError(say("submit_unreachable", { url, reason: cause?.code ?? cause?.message ?? (error as Error).message }), true);
  }
  const text = await response.text();
  if (!response.ok) throw new SubmitError(say("submit_answered", { url, status: response.status, detail: detail(text) }));
  try {
    return JSON.parse(text);
  } catch {
    throw new SubmitError(say("submit_not_json", { url }));
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
      challenge = JSON.parse(readFileSync(fromCaller(source), "utf8"));
    } catch (error) {
      throw new SubmitError(`could not read the challenge from ${source}: ${(error as Error).message}`);
    }
  }
  if (!challenge || !Array.isArray(challenge.cases) || !challenge.answers_url) {
    throw new SubmitError(`${source} is not a challenge (it has no cases or answers_url)`);
  }
  if (challenge.status === "solved") throw new SubmitError("this challenge is already solved; ask the lesson page for a new one");
  if (challenge.status === "expired") throw new SubmitError("this challenge has expired; ask the lesson page for a new one");
  return challenge;
}

/** Your function's answer to each case, in the API's names (NaN as null: the server names it). */
function answersFor(fn: Implementation, cases: Case[]) {
  return cases.map((c, i) => {
    try {
      const r = call(fn, c);
      return { weights: nulls(r.weights), head_outputs: nulls(r.headOutputs), concatenated: nulls(r.concatenated), output: nulls(r.output) };
    } catch (error) {
      if (error instanceof LearnerError) throw new SubmitError(`case ${i + 1} (${describe(c)}): ${error.message}`);
      throw error;
    }
  });
}

function nulls(values: unknown): unknown {
  return Array.isArray(values) ? values.map(nulls) : Number.isFinite(values) ? values : null;
}

function report(verdict: Record<string, any>): string {
  const lines = (verdict.cases ?? []).map((c: Record<string, any>) =>
    `${c.correct ? "✓" : "✗"} ${say("submit_case", { case: c.case })}:${c.mistakes.length ? ` [${c.mistakes.join(", ")}]` : ""} ${c.message}`);
  lines.push(verdict.message);
  if (verdict.correct) lines.push(say("submit_complete"));
  return lines.join("\n");
}

/** A path as the learner typed it: `pnpm run` starts scripts at the repository root, and says
 * where it was called from in INIT_CWD. */
export function fromCaller(path: string): string {
  return resolve(process.env.INIT_CWD ?? process.cwd(), path);
}

async function main(argv: string[]): Promise<number> {
  const args = argv.filter((a) => a !== "--");
  const at = args.indexOf("--challenge");
  const source = at >= 0 ? args[at + 1] : undefined;
  const path = args.find((a, i) => !a.startsWith("--") && i !== at + 1);
  if (!path || !source) {
    console.error("usage: pnpm run submit -- my_attention.ts --challenge URL [--print]");
    return 2;
  }
  let verdict: Record<string, any>;
  try {
    const fn = await load(fromCaller(path));
    const challenge = await readChallenge(source);
    const answers = answersFor(fn, challenge.cases);
    if (args.includes("--print")) {
      console.log(JSON.stringify({ challenge: challenge.id, answers }));
      return 0;
    }
    try {
      verdict = await fetchJson(challenge.answers_url, { answers });
    } catch (error) {
      if (error instanceof SubmitError && error.unreachable) {
        throw new SubmitError(say("submit_offline", { reason: error.message }));
      }
      throw error;
    }
  } catch (error) {
    if (error instanceof LearnerError || error instanceof SubmitError) {
      console.error(`✗ ${error.message}`);
      return 2;
    }
    throw error;
  }
  console.log(report(verdict));
  return verdict.correct ? 0 : 1;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = await main(process.argv.slice(2));
