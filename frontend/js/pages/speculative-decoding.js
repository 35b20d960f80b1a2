// @ts-check
// Speculative decoding: the acceptance rule on a target p and a draft q the learner moves over five tokens
// (POST /api/v1/speculative/acceptance: each token's min(1, p/q), the residual, the emitted distribution
// beside p, the tokens per target pass against γ, a slip's emitted distribution), then the trained byte
// model's rounds over its KV cache (POST /api/v1/models/{id}/speculate: drafts kept, rejected or never
// verified, the byte that ends each round, the verification block's mask, the rollback). The view lives in
// the URL hash; the lesson's four manipulations tick as they are done and are reported as events.

import { getJSON, postJSON } from "../api.js";
import { parameterEvents } from "../events.js";
import { HashState } from "../hash-state.js";
import { N_, sentences, significant, t } from "../i18n.js";
import { $, backLink, FROM_LESSON, startPage } from "../shell.js";
import { drawn, el, fmt } from "../views/dom.js";
import { blockMask, curveChart, roundsList, ruleTable } from "../views/speculative-views.js";

const LESSON = "speculative-decoding";
const INSTANCE = "speculative-decoding-explorable";
const MODEL = "/api/v1/models/bytes-2l-attn/speculate";
const TOKENS = ["a", "b", "c", "d", "e"];
const NEW_BYTES = 24;
const MANIPULATIONS = [
  { id: "move-q", text: N_("Move p or q: see what each draft keeps and what a rejection draws from.") },
  { id: "gamma", text: N_("Change γ: see how many tokens a target pass buys.") },
  { id: "run-model", text: N_("Decode with the trained model: see drafts kept, rejected and rolled back.") },
  { id: "slip", text: N_("Break the rule with a failure mode: see what it emits instead of p.") },
];
const positive = (v) => v.length === TOKENS.length && v.every((x) => x >= 0) && v.some((x) => x > 0);

const page = {
  state: /** @type {any} */ (null),
  modes: new Map(), // the registry's slips of step `speculate`
  decoded: /** @type {any} */ (null), // the model's last answer
  generation: 0,
};
const shell = startPage({ lesson: LESSON, instance: INSTANCE, manipulations: MANIPULATIONS });
const events = parameterEvents({ lesson: LESSON, instance: INSTANCE });

const VIEW = new HashState(
  [
    { name: "p", type: "numbers", default: [0.45, 0.25, 0.15, 0.1, 0.05], check: positive },
    { name: "q", type: "numbers", default: [0.2, 0.4, 0.1, 0.2, 0.1], check: positive },
    { name: "temperature", key: "t", type: "number", default: 1, check: (v) => v >= 0 && v <= 3 },
    { name: "gamma", type: "integer", default: 4, check: (v) => v >= 1 && v <= 16 },
    { name: "compare", type: "string", default: "", check: (v) => v === "" || page.modes.has(v) },
    { name: "prompt", type: "string", default: "The ", check: (v) => v.length >= 1 && v.length <= 40 },
    { name: "draft", type: "string", default: "lens", values: ["lens", "bigram"] },
    { name: "seed", type: "integer", default: 1, check: (v) => v >= 0 && v <= 999999 },
    { name: "round", type: "integer", default: 0, check: (v) => v >= 0 && v < 64 },
    FROM_LESSON,
  ],
  { keep: "speculative-decoding" },
);

/** Weights normalised to a distribution (what the sliders hold is relative). */
const normalised = (v) => v.map((x) => x / v.reduce((a, b) => a + b, 0));

function update(change, parameter, value, manipulation, decode = false) {
  change(page.state);
  VIEW.settle(page.state);
  VIEW.save(page.state);
  shell.experiment.tick(manipulation);
  events({ parameter, value, ...(manipulation ? { manipulation } : {}) });
  drawControls();
  return Promise.all([drawRule(), decode || page.decoded ? drawModel() : null]);
}

async function drawRule() {
  const mine = ++page.generation;
  const s = page.state;
  const slip = page.modes.get(s.compare);
  const body = {
    p: normalised(s.p),
    q: normalised(s.q),
    temperature: s.temperature,
    gamma: s.gamma,
    // a slip that needs a decode's cache (the registry's `needs`) is the model's alone, not the rule's
    ...(slip && !slip.needs.includes("decode") ? { failure_mode: s.compare } : {}),
  };
  const rule = await postJSON("/api/v1/speculative/acceptance", body);
  if (mine !== page.generation) return;
  $("bars").replaceChildren(ruleTable({ tokens: TOKENS, rule }));
  $("curve").replaceChildren(curveChart({ curve: rule.curve, gamma: s.gamma, alpha: rule.alpha }));
  const status = $("rule-status");
  status.dataset.alpha = String(rule.alpha);
  const said = t(
    "α = Σ min(p, q) = {alpha}: a draft is kept {percent} of the time, and the emitted distribution equals p to {error}. γ = {gamma} drafts give {tokens} tokens per target pass.",
    {
      alpha: fmt(rule.alpha, 3),
      percent: `${fmt(100 * rule.alpha, 1)}%`,
      error: significant(rule.emitted_error, 1),
      gamma: s.gamma,
      tokens: fmt(rule.expected_tokens.formula, 3),
    },
  );
  status.textContent = rule.broken
    ? sentences(
        t("“{mode}” emits a distribution {tv} from p in total variation.", {
          mode: slip.name,
          tv: fmt(rule.broken.total_variation, 4),
        }),
        said,
      )
    : slip
      ? sentences(t("“{mode}” needs the model's cache: see it below.", { mode: slip.name }), said)
      : said;
  if (rule.broken) status.dataset.tv = String(rule.broken.total_variation);
  else delete status.dataset.tv;
}

async function drawModel() {
  const s = page.state;
  const body = {
    prompt: s.prompt,
    gamma: Math.min(s.gamma, 8),
    max_new_tokens: NEW_BYTES,
    temperature: s.temperature,
    seed: s.seed,
    draft: s.draft,
    ...(s.compare ? { failure_mode: s.compare } : {}),
  };
  const done = await postJSON(MODEL, body).catch((error) => {
    $("model-status").textContent = t("Could not compute: {reason}", { reason: error.message });
    return null;
  });
  if (!done) return;
  page.decoded = done;
  drawRounds();
}

function drawRounds() {
  const done = page.decoded;
  const s = page.state;
  const index = Math.min(s.round, done.rounds.length - 1);
  $("rounds").replaceChildren(roundsList({ rounds: done.rounds, picked: index, pick }));
  $("block").replaceChildren(blockMask({ round: done.rounds[index], index }));
  const status = $("model-status");
  const said = t(
    "“{text}”: {bytes} bytes in {passes} target passes ({per} bytes a pass); {accepted} of {drafted} drafts kept.",
    {
      text: done.text,
      bytes: done.tokens.length,
      passes: done.target_passes,
      per: fmt(done.tokens_per_pass, 2),
      accepted: done.accepted,
      drafted: done.drafted,
    },
  );
  const first = done.first_difference;
  const what = first?.what === "cache" ? t("the cache keeps rejected rows") : t("the emitted distribution is not p");
  status.dataset.first = first ? String(first.round) : "";
  status.textContent = first
    ? sentences(
        t("“{mode}” first shows in round {round} ({what}).", {
          mode: page.modes.get(done.failure_mode).name,
          round: first.round + 1,
          what,
        }),
        said,
      )
    : said;
}

function pick(index) {
  update((s) => Object.assign(s, { round: index }), "speculative_round", index, null);
}

function drawSliders() {
  const s = page.state;
  const rows = TOKENS.map((token, i) =>
    el(
      "div",
      { class: "sd-slider-row" },
      el("span", { class: "sd-token", text: token }),
      ...["p", "q"].map((name) =>
        el(
          "span",
          { class: "control-pair" },
          el("label", { for: `${name}-${i}`, text: t("{name} of {token}", { name, token }) }),
          el("input", {
            id: `${name}-${i}`,
            type: "range",
            min: "0",
            max: "1",
            step: "0.01",
            value: String(s[name][i]),
            oninput: (/** @type {any} */ e) => move(name, i, Number(e.target.value)),
          }),
        ),
      ),
    ),
  );
  $("sliders").replaceChildren(...rows);
}

function move(name, i, value) {
  const next = [...page.state[name]];
  next[i] = value;
  if (!positive(next)) return;
  update((s) => Object.assign(s, { [name]: next }), `speculative_${name}`, next, "move-q");
}

function drawControls() {
  const s = page.state;
  $("temperature").value = String(s.temperature);
  $("gamma").value = String(s.gamma);
  $("compare").value = s.compare;
  $("prompt").value = s.prompt;
  $("draft").value = s.draft;
  $("seed").value = String(s.seed);
  backLink(s.lesson);
}

function wire() {
  $("temperature").addEventListener("change", (/** @type {any} */ e) => {
    const value = Number(e.target.value);
    if (Number.isFinite(value) && value >= 0 && value <= 3)
      update((s) => Object.assign(s, { temperature: value }), "temperature", value, null);
  });
  $("gamma").addEventListener("change", (/** @type {any} */ e) =>
    update((s) => Object.assign(s, { gamma: Number(e.target.value) }), "gamma", Number(e.target.value), "gamma"),
  );
  $("compare").addEventListener("change", (/** @type {any} */ e) =>
    update(
      (s) => Object.assign(s, { compare: e.target.value }),
      "failure_mode",
      e.target.value || null,
      e.target.value ? "slip" : null,
    ),
  );
  $("run").addEventListener("submit", (/** @type {any} */ e) => {
    e.preventDefault();
    const [prompt, draft, seed] = [$("prompt").value, $("draft").value, Number($("seed").value)];
    const change = (s) => Object.assign(s, { prompt: prompt || s.prompt, draft, seed: seed || 0, round: 0 });
    update(change, "speculative_run", draft, "run-model", true);
  });
  VIEW.onChange((changed) => {
    page.state = changed;
    drawControls();
    drawSliders();
    drawRule();
    if (page.decoded) drawModel();
  });
}

async function init() {
  const registry = await getJSON("/api/v1/failure-modes");
  page.modes = new Map(registry.failure_modes.filter((m) => m.step === "speculate").map((m) => [m.id, m]));
  for (const mode of page.modes.values())
    $("compare").append(el("option", { value: mode.id, text: mode.name, title: mode.description }));
  for (let g = 1; g <= 16; g += 1) $("gamma").append(el("option", { value: String(g), text: String(g) }));
  page.state = VIEW.load();
  VIEW.save(page.state);
  wire();
  drawControls();
  drawSliders();
  await Promise.all([drawRule(), drawModel()]);
  document.querySelector("main")?.classList.remove("awaits-data");
  drawn();
  shell.drawn();
}

init().catch((error) => {
  $("status").textContent = t("Could not compute: {reason}", { reason: error.message });
});
