// @ts-check
// The RoPE scaling explorable: the learner's tokens (the rope-scaling preset's six, or a link's) as a model
// trained on L positions reads them at any first position, unscaled or scaled as released models scale
// RoPE (POST /api/v1/attention with rope.scaling and rope.offset): each pair's angle back to the text's
// first token against the angles it met in training, the scores with and without the scaling, a slip's
// first divergence (POST /api/v1/attention/compare); beside them a released model's every pair and YaRN's
// two ramps (POST /api/v1/rope/frequencies). The view lives in the URL hash; the lesson's four
// manipulations tick as they are done and are reported as parameter-changed events.

import { getJSON, postJSON } from "../api.js";
import { parameterEvents } from "../events.js";
import { HashState } from "../hash-state.js";
import { N_, sentences, t } from "../i18n.js";
import { $, backLink, FROM_LESSON, startPage } from "../shell.js";
import { drawn, el, fmt } from "../views/dom.js";
import { heatmap } from "../views/heatmap.js";
import { dials, rampChart, wavelengthChart } from "../views/rope-views.js";

const LESSON = "rope-scaling";
const INSTANCE = "rope-scaling-explorable";
const MANIPULATIONS = [
  {
    id: "past-training",
    text: N_("Move your tokens past the training length: the slow pairs reach angles never seen."),
  },
  { id: "choose-scaling", text: N_("Choose a scaling: see which pairs it keeps, blends and divides.") },
  { id: "compare-ramps", text: N_("Switch YaRN between the code's ramp and the paper's.") },
  { id: "scaling-slip", text: N_("Break the scaling with a failure mode: see where it first parts.") },
];
const TYPES = {
  linear: N_("Position interpolation (linear)"),
  ntk: N_("NTK-aware"),
  dynamic: N_("Dynamic NTK"),
  yarn: N_("YaRN"),
  llama3: N_("Llama 3"),
  longrope: N_("LongRoPE"),
};
const FOLLOWS_THE_LENGTH = new Set(["dynamic", "longrope"]);
// How the page meets a slip's needs (GET /api/v1/failure-modes): the scaling each asks for.
const MEETS = {
  rope_scaling: (s) => s.scaling || "yarn",
  attention_factor: (s) => (["yarn", "longrope"].includes(s.scaling) ? s.scaling : "yarn"),
  yarn: () => "yarn",
  llama3: () => "llama3",
};
// YaRN as its paper and the code disagree (d 128, base 10,000, L 4,096, s 16), and the pair that shows it.
const RAMP_CASE = {
  head_dim: 128,
  base: 10000,
  scaling: { rope_type: "yarn", factor: 16, original_max_position_embeddings: 4096 },
};
const RAMP_PAIR = 30; // pairs counted from 0, as theta_i = base^(-2i/d) counts them

const page = {
  state: /** @type {any} */ (null),
  preset: /** @type {any} */ (null), // the rope-scaling preset's request
  modes: new Map(), // RoPE scaling's slips, from the registry
  models: new Map(), // released models' RoPE, GET /api/v1/rope/presets
  ramps: /** @type {any} */ (null), // YaRN's two ramps, computed once
  generation: 0,
};
const shell = startPage({ lesson: LESSON, instance: INSTANCE, manipulations: MANIPULATIONS });
const events = parameterEvents({ lesson: LESSON, instance: INSTANCE });

const VIEW = new HashState(
  [
    {
      name: "tokens",
      key: "t",
      type: "matrix",
      default: () => page.preset.tokens,
      check: (rows) =>
        rows.length >= 2 &&
        rows.length <= 12 &&
        rows[0].length % 2 === 0 &&
        rows[0].length >= 4 &&
        rows[0].length <= 16,
    },
    { name: "offset", type: "integer", default: 0, check: (v) => v >= 0 && v <= 100000 },
    { name: "scaling", type: "string", default: "", check: (v) => v === "" || v in TYPES },
    { name: "ramp", type: "string", default: "code", check: (v) => v === "code" || v === "paper" },
    { name: "compare", type: "string", default: "", check: (v) => v === "" || page.modes.has(v) },
    { name: "model", type: "string", default: "llama-3.1-8b", check: (v) => page.models.has(v) },
    FROM_LESSON,
  ],
  { keep: "rope-scaling" },
);

/** The trained length L, the factor s and the base, from the preset (a model trained on L positions). */
const trainedOn = () => page.preset.rope.scaling.original_max_position_embeddings;

/** The page's scaling of `type`, as a released model's config would say it for a model trained on L. */
function scalingOf(type, ramp) {
  const { factor } = page.preset.rope.scaling;
  const L = trainedOn();
  const pairs = page.state.tokens[0].length / 2;
  const rising = (top) =>
    Array.from({ length: pairs }, (_, i) => Number((1 + (top - 1) * (i / (pairs - 1)) ** 2).toFixed(2)));
  const given = {
    linear: {},
    ntk: {},
    dynamic: { original_max_position_embeddings: L },
    yarn: { original_max_position_embeddings: L, ...(ramp === "paper" ? { ramp: "paper" } : {}) },
    llama3: { original_max_position_embeddings: L, low_freq_factor: 1, high_freq_factor: 4 },
    longrope: { original_max_position_embeddings: L, short_factor: rising(1.5), long_factor: rising(factor) },
  };
  return { rope_type: type, factor, ...given[type] };
}

function request(scaling) {
  const s = page.state;
  const rope = { style: "half", base: page.preset.rope.base, offset: s.offset, ...(scaling ? { scaling } : {}) };
  return { tokens: s.tokens, heads: 1, causal: true, rope, include: ["heads.scores"] };
}

// A slip whose needs the state does not meet is dropped (a change of scaling), or met (choosing the slip).
function settle(s, meet = false) {
  VIEW.settle(s);
  const mode = page.modes.get(s.compare);
  if (!mode) return "";
  const wanted = mode.needs.filter((need) => MEETS[need]).map((need) => MEETS[need](s));
  const needed = wanted.find((type) => type !== s.scaling);
  if (!needed) return "";
  if (!meet) {
    s.compare = "";
    return t("“{mode}” needs another scaling: the comparison is cleared.", { mode: mode.name });
  }
  s.scaling = needed;
  return t("“{mode}” needs {scaling}: switched on.", { mode: mode.name, scaling: t(TYPES[needed]) });
}

function update(change, parameter, value, manipulation, meet = false) {
  change(page.state);
  const note = settle(page.state, meet);
  VIEW.save(page.state);
  const past = page.state.offset + page.state.tokens.length - 1 >= trainedOn() ? "past-training" : null;
  const ticked = manipulation === "past-training" ? past : manipulation;
  shell.experiment.tick(ticked);
  events({ parameter, value, ...(ticked ? { manipulation: ticked } : {}) });
  $("rs-note").hidden = !note;
  $("rs-note").textContent = note;
  drawControls();
  return render();
}

async function render() {
  const mine = ++page.generation;
  const s = page.state;
  const scaling = s.scaling ? scalingOf(s.scaling, s.ramp) : null;
  const model = page.models.get(s.model);
  const [plain, scaled, released] = await Promise.all([
    postJSON("/api/v1/attention", request(null)),
    !scaling
      ? null
      : s.compare
        ? postJSON("/api/v1/attention/compare", { ...request(scaling), failure_mode: s.compare })
        : postJSON("/api/v1/attention", request(scaling)),
    postJSON("/api/v1/rope/frequencies", { preset: model.id }),
  ]);
  if (mine !== page.generation) return;
  const right = scaled && s.compare ? scaled.correct : scaled;
  const broken = scaled && s.compare ? scaled.broken : null;
  drawPosition(plain);
  $("dials").replaceChildren(
    dials({
      pairs: plain.conventions.rope.frequencies.pairs,
      scaled: right ? right.conventions.rope.frequencies.pairs : null,
      broken: broken ? broken.conventions.rope.frequencies.pairs : null,
      distance: s.offset + s.tokens.length - 1,
      trained: trainedOn(),
    }),
  );
  drawScores(plain, right, broken);
  drawStatus(plain, right, scaled && s.compare ? scaled.divergence : null);
  const trained = model.scaling.original_max_position_embeddings;
  $("wavelengths").replaceChildren(
    wavelengthChart({ table: released, name: model.name, trained, context: model.context }),
  );
  document.querySelector("main")?.classList.remove("awaits-data");
  drawn();
}

function drawPosition(plain) {
  const s = page.state;
  const last = s.offset + s.tokens.length - 1;
  const L = trainedOn();
  $("offset-value").textContent = String(s.offset);
  $("position").textContent = t(
    "Your {n} tokens stand at positions {first} to {last}; the model was trained on positions 0 to {trained} and is read to {read}.",
    { n: s.tokens.length, first: s.offset, last, trained: L - 1, read: L * page.preset.rope.scaling.factor - 1 },
  );
  $("shape").textContent = `d_head = ${s.tokens[0].length}, base = ${plain.conventions.rope.base}, L = ${L}`;
}

function drawScores(plain, right, broken) {
  const masked = plain.heads[0].scores.map((row, i) => row.map((_, j) => j > i));
  const panel = (trace, title, stage) => {
    const map = heatmap({ head: 0, weights: trace.heads[0].scores, masked, title, colour: false, summarise: false });
    return el("div", { class: "rs-panel", dataset: { stage } }, map);
  };
  const type = page.state.scaling ? t(TYPES[page.state.scaling]) : "";
  const panels = [
    panel(plain, t("Scores without scaling"), "scores-plain"),
    right ? panel(right, t("Scores with {scaling}", { scaling: type }), "scores-scaled") : null,
    broken
      ? panel(
          broken,
          t("Scores as “{mode}” computes them", { mode: page.modes.get(page.state.compare).name }),
          "scores-broken",
        )
      : null,
  ];
  $("scores").replaceChildren(...panels.filter(Boolean));
}

function drawStatus(plain, right, divergence) {
  const node = $("status");
  const s = page.state;
  if (!right) {
    node.textContent = t(
      "Choose a scaling to see what it changes. Without one, moving your tokens changes no score: RoPE's scores depend only on the distance between two tokens.",
    );
    return;
  }
  const factor = right.conventions.rope.frequencies.attention_factor;
  const changed = Math.max(
    ...right.heads[0].scores.flat().map((v, k) => Math.abs(v - plain.heads[0].scores.flat()[k])),
  );
  const follows = FOLLOWS_THE_LENGTH.has(s.scaling)
    ? t("{scaling} follows the length: moving your tokens changes its frequencies.", { scaling: t(TYPES[s.scaling]) })
    : t("{scaling} does not follow the length: moving your tokens changes no score.", { scaling: t(TYPES[s.scaling]) });
  const sharpened =
    factor !== 1
      ? t("Its attention factor {factor} multiplies every score by {square}.", {
          factor: fmt(factor, 4),
          square: fmt(factor * factor, 4),
        })
      : "";
  node.dataset.value = String(changed);
  node.textContent = sentences(
    t("The largest change in a score: {change}.", { change: fmt(changed, 4) }),
    sharpened,
    follows,
  );
  if (divergence?.first) {
    const mode = page.modes.get(s.compare).name;
    const first = t("“{mode}” parts from the right scaling first at {stage}, the rotated queries.", {
      mode,
      stage: divergence.first.toUpperCase(),
    });
    node.textContent = sentences(first, node.textContent);
    node.dataset.first = divergence.first;
  } else delete node.dataset.first;
}

function drawControls() {
  const s = page.state;
  $("offset").value = String(Math.min(s.offset, 250));
  $("scaling").value = s.scaling;
  $("ramp").value = s.ramp;
  $("ramp-pair").hidden = s.scaling !== "yarn";
  $("compare").value = s.compare;
  $("model").value = s.model;
  backLink(s.lesson);
}

function wire() {
  $("offset").addEventListener("input", (e) =>
    update(
      (s) => {
        s.offset = Number(e.target.value);
      },
      "rope_offset",
      Number(e.target.value),
      "past-training",
    ),
  );
  $("scaling").addEventListener("change", (e) =>
    update(
      (s) => {
        s.scaling = e.target.value;
      },
      "rope_scaling",
      e.target.value || null,
      e.target.value ? "choose-scaling" : null,
    ),
  );
  $("ramp").addEventListener("change", (e) =>
    update(
      (s) => {
        s.ramp = e.target.value;
      },
      "yarn_ramp",
      e.target.value,
      "compare-ramps",
    ),
  );
  $("compare").addEventListener("change", (e) =>
    update(
      (s) => {
        s.compare = e.target.value;
      },
      "failure_mode",
      e.target.value || null,
      e.target.value ? "scaling-slip" : null,
      true,
    ),
  );
  $("model").addEventListener("change", (e) =>
    update(
      (s) => {
        s.model = e.target.value;
      },
      "rope_model",
      e.target.value,
    ),
  );
  VIEW.onChange((changed) => {
    page.state = changed;
    settle(page.state, true);
    VIEW.save(page.state);
    drawControls();
    render();
  });
}

async function init() {
  const [preset, registry, models] = await Promise.all([
    getJSON("/api/v1/presets/rope-scaling"),
    getJSON("/api/v1/failure-modes"),
    getJSON("/api/v1/rope/presets"),
  ]);
  page.preset = preset.request;
  // the slips of a scaling: each needs something only a scaling has (MEETS says how this page gives it)
  const slips = registry.failure_modes.filter((m) => m.needs.some((need) => need in MEETS));
  page.modes = new Map(slips.map((m) => [m.id, m]));
  page.models = new Map(models.presets.map((m) => [m.id, m]));
  for (const [type, words] of Object.entries(TYPES)) $("scaling").append(el("option", { value: type, text: t(words) }));
  for (const mode of page.modes.values())
    $("compare").append(el("option", { value: mode.id, text: mode.name, title: mode.description }));
  for (const model of page.models.values()) $("model").append(el("option", { value: model.id, text: model.name }));
  page.state = VIEW.load();
  settle(page.state, true);
  VIEW.save(page.state);
  const [code, paper] = await Promise.all(
    ["code", "paper"].map((ramp) =>
      postJSON("/api/v1/rope/frequencies", { ...RAMP_CASE, scaling: { ...RAMP_CASE.scaling, ramp } }),
    ),
  );
  $("ramps").replaceChildren(rampChart({ code, paper, pair: RAMP_PAIR }));
  wire();
  drawControls();
  await render();
  shell.drawn();
}

init().catch((error) => {
  $("status").textContent = t("Could not compute: {reason}", { reason: error.message });
});
