// @ts-check
// The KV cache explorable: six tokens generated position by position (POST /api/v1/attention/decode on
// the kv-cache preset), with keys and values per head (MHA), shared (GQA, MQA) or compressed into a
// latent (MLA), optionally broken the way decoding code goes wrong; and a released model's cache in
// bytes (POST /api/v1/kv-cache). The view lives in the URL hash; the lesson's four manipulations tick
// as they are done and are reported as parameter-changed events (the server completes `experiment`).
// A sliding window makes the cache roll (drawn slot by slot), sinks keep the first positions, a learned
// sink logit per head takes a share of each row, and StreamingLLM's renumbering turns the cached keys by
// their places in the cache; each long-context slip switches on what it needs, and says so.

import { getJSON, postJSON } from "../api.js";
import { embedded } from "../embed.js";
import { parameterEvents } from "../events.js";
import { HashState } from "../hash-state.js";
import { N_, t } from "../i18n.js";
import { $, startPage } from "../shell.js";
import { drawn, el } from "../views/dom.js";
import { cacheView, mappingView, memoryView, queryView } from "../views/kv-cache.js";
import { drawAbsorbed, drawEquality, renumbers } from "../views/kv-equality.js";
import { dropUnmet, long, OFFERED, settle } from "../views/kv-needs.js";

const KV_HEADS = { mha: 4, gqa: 2, mqa: 1, mla: 4 }; // of the preset's four query heads
const SINK_LOGITS = [1, 0, -1, 2]; // one learned logit per query head (gpt-oss learns one per head)
// The page serves two lessons (`?lesson=`), each with its own experiment: the manipulations it counts.
const LESSONS = {
  "kv-cache-and-latent-attention": {
    instance: "kv-cache-explorable",
    manipulations: [
      {
        id: "step-decode",
        text: N_(
          "Step the decode: the new position's key and value join the cache, and its query weighs every cached position.",
        ),
      },
      { id: "switch-kind", text: N_("Switch to GQA, MQA or MLA: fewer keys and values, or a latent, in the cache.") },
      { id: "choose-preset", text: N_("Choose a released model: its cache in bytes for the context.") },
      { id: "failure-mode", text: N_("Break the decode with a failure mode: the numbers part from recomputing.") },
    ],
  },
  "long-context": {
    instance: "long-context-explorable",
    manipulations: [
      {
        id: "slide-window",
        text: N_("Set a sliding window: the cache holds only that many positions, written round its slots."),
      },
      { id: "keep-sinks", text: N_("Keep sinks: the first positions stay in slots of their own beside the window.") },
      { id: "sink-logit", text: N_("Turn on a sink logit per head: each row's weights now sum to less than one.") },
      {
        id: "long-slip",
        text: N_("Break it with a long-context failure mode: see where it first parts from the decode done right."),
      },
    ],
  },
};
const asked = new URLSearchParams(location.search).get("lesson");
const LESSON = asked in LESSONS ? asked : "kv-cache-and-latent-attention";
const { instance: INSTANCE, manipulations: MANIPULATIONS } = LESSONS[LESSON];

// The page's runtime, beside its configuration (`state`, kept in the hash by VIEW).
const page = {
  state: /** @type {any} */ (null),
  preset: null, // the kv-cache preset's request
  models: [], // GET /api/v1/kv-cache/presets
  modes: new Map(), // the failure modes of decoding, shared key/value heads and long contexts, from the registry
  generation: 0, // the latest render asked: an older answer is not drawn
  switched: "", // what meeting the chosen mode's needs switched, said beside the controls
};
const shell = startPage({ lesson: LESSON, instance: INSTANCE, manipulations: MANIPULATIONS });
const events = parameterEvents({ lesson: LESSON, instance: INSTANCE });

const VIEW = new HashState(
  [
    { name: "kind", type: "string", default: "mha", values: Object.keys(KV_HEADS) },
    {
      name: "position",
      type: "integer",
      default: 1,
      check: (v) => v >= 1 && v <= (page.preset ? page.preset.tokens.length : 1),
    }, // 1-based
    { name: "rope", type: "boolean", default: true },
    { name: "absorbed", type: "boolean", default: false },
    { name: "compare", type: "string", default: "", check: (v) => v === "" || page.modes.has(v) },
    {
      name: "model",
      type: "string",
      default: LESSON === "long-context" ? "gemma-3-27b" : "deepseek-v2",
      check: (v) => page.models.some((m) => m.id === v),
    },
    { name: "context", type: "integer", default: 0, check: (v) => v >= 0 && v <= 100000000 }, // 0: the model's own
    { name: "window", type: "integer", default: 0, values: [0, 2, 3, 4] }, // 0: none
    { name: "sinks", type: "integer", default: 0, values: [0, 1, 2] },
    { name: "logit", type: "boolean", default: false },
    { name: "renumber", type: "boolean", default: false },
  ],
  { keep: "kv-cache" },
);

function body(failureMode, positions = true) {
  const { state, preset } = page;
  const request = { tokens: preset.tokens, heads: preset.heads, causal: true };
  if (state.rope) request.rope = preset.rope;
  if (state.kind === "mla") {
    const { rope_key: key, rope_query: query, ...latent } = preset.latent;
    request.latent = {
      ...latent,
      absorbed: state.absorbed,
      ...(state.rope ? { rope_key: key, rope_query: query } : {}),
    };
  } else if (KV_HEADS[state.kind] !== preset.heads) {
    request.kv_heads = KV_HEADS[state.kind];
  }
  if (state.window) {
    request.window = state.window;
    if (state.sinks) request.sinks = state.sinks;
  }
  if (state.logit) request.sink_logit = SINK_LOGITS;
  if (renumbers(state) && positions) request.positions = "cache";
  if (failureMode) request.failure_mode = failureMode;
  return request;
}

// `counts`: the manipulation (or the first of several) this lesson's experiment counts, if any.
function update(change, parameter, value, counts) {
  change(page.state);
  if (parameter !== "failure_mode") dropUnmet(page.state, page.modes);
  page.switched = settle(page.state, page.modes);
  VIEW.save(page.state);
  const manipulation = shell.experiment.tick(counts);
  events({ parameter, value, ...(manipulation ? { manipulation } : {}) });
  drawControls();
  return render();
}

async function render() {
  const mine = ++page.generation;
  const state = page.state;
  const broken = state.compare || null;
  // beside a broken decode, the right one; beside absorbed MLA, the naive form (the numbers it equals)
  const other =
    state.kind === "mla" ? { ...body(null), latent: { ...body(null).latent, absorbed: !state.absorbed } } : null;
  const renumbered = !broken && renumbers(state); // beside the renumbered decode, the one at the text's positions
  const [answer, correct, naive] = await Promise.all([
    postJSON("/api/v1/attention/decode", body(broken)),
    broken || renumbered ? postJSON("/api/v1/attention/decode", body(null, !renumbered)) : null,
    other ? postJSON("/api/v1/attention/decode", other) : null,
  ]);
  if (mine !== page.generation) return;
  const t0 = state.position - 1;
  const step = answer.steps[t0];
  const { n, d_model: dm, heads, d_head: dh } = answer.shape;
  $("decode-shape").textContent = `n = ${n}, d_model = ${dm}, H = ${heads}, d_head = ${dh}`;
  $("position").textContent = t("Position {position} of {n}", { position: state.position, n });
  $("back-step").disabled = state.position <= 1;
  $("step").disabled = state.position >= n;
  $("cache").replaceChildren(cacheView(step, state.kind));
  $("mapping").replaceChildren(mappingView(step.heads, state.kind));
  $("query").replaceChildren(queryView(step, broken ? correct.steps[t0] : null, state.logit));
  drawEquality($("equality"), answer, correct, broken, renumbered, page);
  drawAbsorbed($("absorbed-note"), answer, naive, state.absorbed);
  $("kv-note").textContent = page.switched;
  $("kv-note").hidden = !page.switched;
  await drawMemory();
  document.querySelector("main").classList.remove("awaits-data");
  drawn();
}

async function drawMemory() {
  const { state, models } = page;
  const model = models.find((m) => m.id === state.model);
  const tokens = state.context || model.context;
  $("model").value = model.id;
  // never under the learner's fingers: a redraw that lands while they type would splice its digits into theirs
  if (document.activeElement !== $("context")) $("context").value = String(tokens);
  const answer = await postJSON("/api/v1/kv-cache", { ...model.request, tokens });
  $("memory").replaceChildren(memoryView(answer, model, tokens));
}

function drawControls() {
  const state = page.state;
  $("kind").value = state.kind;
  $("rope").checked = state.rope;
  $("absorbed").checked = state.absorbed;
  $("absorbed-label").hidden = state.kind !== "mla";
  $("compare").value = state.compare;
  $("window").value = String(state.window);
  $("sinks").value = String(state.sinks);
  $("sinks").disabled = !state.window; // sinks are kept beside a window
  $("sink-logit").checked = state.logit;
  $("renumber").checked = state.renumber;
  $("renumber").disabled = !state.window || !state.rope || state.kind === "mla"; // RoPE turns whole keys of a rolling cache
}

// Each control by its id: how its value changes the state, what its event reports (as `parameter`, else
// its id), and the manipulation it may count.
const CONTROLS = {
  kind: {
    apply: (s, c) => Object.assign(s, { kind: c.value }),
    counts: (c) => (c.value === "mha" ? null : "switch-kind"),
  },
  rope: { apply: (s, c) => Object.assign(s, { rope: c.checked }), report: (c) => c.checked },
  absorbed: { apply: (s, c) => Object.assign(s, { absorbed: c.checked }), report: (c) => c.checked },
  compare: {
    parameter: "failure_mode",
    apply: (s, c) => Object.assign(s, { compare: c.value }),
    report: (c) => c.value || null,
    counts: (c) => (c.value ? [long(page.modes.get(c.value)) ? "long-slip" : null, "failure-mode"] : null),
  },
  window: {
    apply: (s, c) => Object.assign(s, { window: Number(c.value) }),
    report: (c) => Number(c.value) || null,
    counts: (c) => (Number(c.value) ? "slide-window" : null),
  },
  sinks: {
    apply: (s, c) => Object.assign(s, { sinks: Number(c.value) }),
    report: (c) => Number(c.value),
    counts: (c) => (Number(c.value) ? "keep-sinks" : null),
  },
  "sink-logit": {
    parameter: "sink_logit",
    apply: (s, c) => Object.assign(s, { logit: c.checked }),
    report: (c) => (c.checked ? SINK_LOGITS : null),
    counts: (c) => (c.checked ? "sink-logit" : null),
  },
  renumber: {
    parameter: "positions",
    apply: (s, c) => Object.assign(s, { renumber: c.checked }),
    report: (c) => (c.checked ? "cache" : "original"),
  },
  model: { apply: (s, c) => Object.assign(s, { model: c.value, context: 0 }), counts: () => "choose-preset" },
};

function wire() {
  for (const [id, control] of Object.entries(CONTROLS)) {
    $(id).addEventListener("change", () => {
      const c = $(id);
      update(
        (s) => control.apply(s, c),
        control.parameter ?? id,
        (control.report ?? ((x) => x.value))(c),
        control.counts?.(c) ?? null,
      );
    });
  }
  /** @type {[string, number][]} */
  const steps = [
    ["step", 1],
    ["back-step", -1],
  ];
  for (const [id, by] of steps) {
    $(id).addEventListener("click", () => {
      const position = page.state.position + by;
      update((s) => Object.assign(s, { position }), "position", position, "step-decode");
    });
  }
  $("context").addEventListener("change", readContext);
  // A link followed or a host's change: its state, settled, and only this page's keys kept.
  VIEW.onChange((changed) => {
    page.state = changed;
    page.switched = settle(page.state, page.modes);
    VIEW.save(page.state);
    drawControls();
    render();
  });
}

// A context typed: a whole number of tokens, or said why not (the cache stays for the last one).
function readContext() {
  const input = $("context");
  const text = input.value.trim();
  const tokens = Number(text);
  const valid = text !== "" && Number.isInteger(tokens) && tokens >= 1 && tokens <= 100000000;
  $("context-error").hidden = valid;
  $("context-error").textContent = valid
    ? ""
    : t(
        "A context is a whole number of tokens from 1 to 100,000,000; “{text}” is not one. The cache below is still for {tokens} tokens.",
        { text, tokens: page.state.context || page.models.find((m) => m.id === page.state.model).context },
      );
  input.setAttribute("aria-invalid", valid ? "false" : "true");
  if (valid) update((s) => Object.assign(s, { context: tokens }), "context", tokens);
}

async function init() {
  const [kv, registry, presets] = await Promise.all([
    getJSON("/api/v1/presets/kv-cache"),
    getJSON("/api/v1/failure-modes"),
    getJSON("/api/v1/kv-cache/presets"),
  ]);
  page.preset = kv.request;
  page.models = presets.presets;
  page.modes = new Map(
    registry.failure_modes.filter((m) => m.engine && m.needs.some((n) => OFFERED.has(n))).map((m) => [m.id, m]),
  );
  for (const mode of page.modes.values())
    $("compare").append(el("option", { value: mode.id, text: mode.name, title: mode.description }));
  $("model").replaceChildren(...page.models.map((m) => el("option", { value: m.id, text: m.name })));
  page.state = VIEW.load();
  page.switched = settle(page.state, page.modes);
  VIEW.save(page.state);
  $("back").hidden = embedded;
  $("back").querySelector("a").href = `/lessons/${LESSON}`;
  wire();
  drawControls();
  await render();
  shell.drawn();
}

init().catch((error) => {
  $("equality").textContent = t("Could not compute the decode: {reason}", { reason: error.message });
});
