// The KV cache explorable: six tokens generated position by position (POST /api/v1/attention/decode on
// the kv-cache preset), with keys and values per head (MHA), shared (GQA, MQA) or compressed into a
// latent (MLA), optionally broken the way decoding code goes wrong; and a released model's cache in
// bytes (POST /api/v1/kv-cache). The view lives in the URL hash; the lesson's four manipulations tick
// as they are done and are reported as parameter-changed events (the server completes `experiment`).

import { getJSON, postJSON, startOutbox } from "../api.js";
import { embedded, reportHeight } from "../embed.js";
import { parameterEvents } from "../events.js";
import { HashState } from "../hash-state.js";
import { checklist, restoreDone } from "../views/checklist.js";
import { drawn, el } from "../views/dom.js";
import { cacheView, mappingView, memoryView, queryView } from "../views/kv-cache.js";
import { N_, t } from "../i18n.js";

const LESSON = "kv-cache-and-latent-attention";
const INSTANCE = "kv-cache-explorable";
const KV_HEADS = { mha: 4, gqa: 2, mqa: 1, mla: 4 }; // of the preset's four query heads
const MANIPULATIONS = [
  { id: "step-decode", text: N_("Step the decode: the new position's key and value join the cache, and its query weighs every cached position.") },
  { id: "switch-kind", text: N_("Switch to GQA, MQA or MLA: fewer keys and values, or a latent, in the cache.") },
  { id: "choose-preset", text: N_("Choose a released model: its cache in bytes for the context.") },
  { id: "failure-mode", text: N_("Break the decode with a failure mode: the numbers part from recomputing.") },
];

const $ = (id) => document.getElementById(id);
const events = parameterEvents({ lesson: LESSON, instance: INSTANCE });
const done = new Set();
let preset = null; // the kv-cache preset's request
let models = []; // GET /api/v1/kv-cache/presets
let modes = new Map(); // the decoding failure modes (and gqa_tiled), from the registry
let generation = 0;

const VIEW = new HashState([
  { name: "kind", type: "string", default: "mha", values: Object.keys(KV_HEADS) },
  { name: "position", type: "integer", default: 1, check: (v) => v >= 1 && v <= (preset ? preset.tokens.length : 1) }, // 1-based
  { name: "rope", type: "boolean", default: true },
  { name: "absorbed", type: "boolean", default: false },
  { name: "compare", type: "string", default: "", check: (v) => v === "" || modes.has(v) },
  { name: "model", type: "string", default: "deepseek-v2", check: (v) => models.some((m) => m.id === v) },
  { name: "context", type: "integer", default: 0, check: (v) => v >= 0 && v <= 100000000 }, // 0: the model's own
]);
let state = null;

// A failure mode needs its step: tiling needs shared kv heads (GQA), a wrong RoPE position needs RoPE.
function settle(s) {
  if (s.compare === "gqa_tiled" && s.kind !== "gqa") s.kind = "gqa";
  if (s.compare === "decode_position_reset") s.rope = true;
  return s;
}

function body(failureMode) {
  const request = { tokens: preset.tokens, heads: preset.heads, causal: true };
  if (state.rope) request.rope = preset.rope;
  if (state.kind === "mla") {
    const { rope_key: key, rope_query: query, ...latent } = preset.latent;
    request.latent = { ...latent, absorbed: state.absorbed, ...(state.rope ? { rope_key: key, rope_query: query } : {}) };
  } else if (KV_HEADS[state.kind] !== preset.heads) {
    request.kv_heads = KV_HEADS[state.kind];
  }
  if (failureMode) request.failure_mode = failureMode;
  return request;
}

function update(change, parameter, value, manipulation) {
  change(state);
  settle(state);
  VIEW.save(state);
  if (manipulation && !done.has(manipulation)) {
    done.add(manipulation);
    drawChecklist();
  }
  events({ parameter, value, ...(manipulation ? { manipulation } : {}) });
  drawControls();
  return render();
}

async function render() {
  const mine = ++generation;
  const broken = state.compare || null;
  const [answer, correct] = await Promise.all([postJSON("/api/v1/attention/decode", body(broken)),
    broken ? postJSON("/api/v1/attention/decode", body(null)) : null]);
  if (mine !== generation) return;
  const t0 = state.position - 1;
  const step = answer.steps[t0];
  const { n, d_model: dm, heads, d_head: dh } = answer.shape;
  $("decode-shape").textContent = `n = ${n}, d_model = ${dm}, H = ${heads}, d_head = ${dh}`;
  $("position").textContent = t("Position {position} of {n}", { position: state.position, n });
  $("back-step").disabled = state.position <= 1;
  $("step").disabled = state.position >= n;
  $("cache").replaceChildren(cacheView(step, state.kind));
  $("mapping").replaceChildren(mappingView(step.heads, state.kind));
  $("query").replaceChildren(queryView(step, correct ? correct.steps[t0] : null));
  drawEquality(answer.max_difference_from_full_pass, broken);
  await drawMemory();
  document.querySelector("main").classList.remove("awaits-data");
  drawn();
}

function drawEquality(difference, broken) {
  const node = $("equality");
  node.dataset.stage = "equality";
  node.dataset.value = String(difference);
  node.classList.toggle("differs", difference > 1e-12);
  if (difference === 0) node.textContent = t("Same numbers as recomputing the full causal pass: max difference 0.");
  else if (difference <= 1e-12) node.textContent = t("Same numbers as recomputing the full causal pass, to float64 rounding: max difference {difference}.", { difference: difference.toExponential(1) });
  else node.textContent = t("{mode}: the decode differs from recomputing the full pass by up to {difference}.", { mode: modes.get(broken)?.name ?? broken, difference: difference.toPrecision(3) });
}

async function drawMemory() {
  const model = models.find((m) => m.id === state.model);
  const tokens = state.context || model.context;
  $("model").value = model.id;
  $("context").value = String(tokens);
  const answer = await postJSON("/api/v1/kv-cache", { ...model.request, tokens });
  $("memory").replaceChildren(memoryView(answer, model, tokens));
}

function drawControls() {
  $("kind").value = state.kind;
  $("rope").checked = state.rope;
  $("absorbed").checked = state.absorbed;
  $("absorbed-label").hidden = state.kind !== "mla";
  $("compare").value = state.compare;
  for (const option of $("compare").options) {
    option.disabled = option.value === "gqa_tiled" && state.kind === "mla"; // latent attention shares no kv heads
  }
}

function drawChecklist() {
  $("checklist").replaceChildren(...checklist(done, MANIPULATIONS));
}

function wire() {
  $("step").addEventListener("click", () => update((s) => { s.position += 1; }, "position", state.position + 1, "step-decode"));
  $("back-step").addEventListener("click", () => update((s) => { s.position -= 1; }, "position", state.position - 1, "step-decode"));
  $("kind").addEventListener("change", (e) => update((s) => { s.kind = e.target.value; if (s.compare === "gqa_tiled" && s.kind !== "gqa") s.compare = ""; },
    "kind", e.target.value, e.target.value === "mha" ? null : "switch-kind"));
  $("rope").addEventListener("change", (e) => update((s) => { s.rope = e.target.checked; if (!s.rope && s.compare === "decode_position_reset") s.compare = ""; },
    "rope", e.target.checked));
  $("absorbed").addEventListener("change", (e) => update((s) => { s.absorbed = e.target.checked; }, "absorbed", e.target.checked));
  $("compare").addEventListener("change", (e) => update((s) => { s.compare = e.target.value; }, "failure_mode", e.target.value || null,
    e.target.value ? "failure-mode" : null));
  $("model").addEventListener("change", (e) => update((s) => { s.model = e.target.value; s.context = 0; }, "model", e.target.value, "choose-preset"));
  $("context").addEventListener("change", (e) => {
    const tokens = Math.round(Number(e.target.value));
    if (Number.isFinite(tokens) && tokens >= 1 && tokens <= 100000000) update((s) => { s.context = tokens; }, "context", tokens);
  });
  VIEW.onChange((changed) => { state = settle(changed); drawControls(); render(); });
}

async function init() {
  const [kv, registry, presets] = await Promise.all([getJSON("/api/v1/presets/kv-cache"), getJSON("/api/v1/failure-modes"),
    getJSON("/api/v1/kv-cache/presets")]);
  preset = kv.request;
  models = presets.presets;
  modes = new Map(registry.failure_modes.filter((m) => m.decoding || m.step === "kv").map((m) => [m.id, m]));
  for (const mode of modes.values()) $("compare").append(el("option", { value: mode.id, text: mode.name, title: mode.description }));
  $("model").replaceChildren(...models.map((m) => el("option", { value: m.id, text: m.name })));
  state = settle(VIEW.load());
  VIEW.save(state);
  $("back").hidden = embedded;
  wire();
  drawControls();
  reportHeight();
  await render();
  startOutbox();
  restoreDone(done, { lesson: LESSON, instance: INSTANCE }, drawChecklist);
}

init().catch((error) => {
  $("equality").textContent = t("Could not compute the decode: {reason}", { reason: error.message });
});
