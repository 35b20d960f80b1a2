// The workbench: edit tokens, toggle the mask and the broken reuse, compare with a broken
// implementation. Every change is computed by the API, redrawn, kept in the URL hash (and, when
// embedded, on this device, so a reload of the lesson keeps it), and reported (debounced) as a
// parameter-changed event to the API and to a host page.

import { ensureSession, getJSON, postJSON, queueEvent, startOutbox } from "../api.js";
import { embedded, post, reportHeight } from "../embed.js";
import { defaults, fromHash, remember, save } from "../state.js";
import {
  comparisonSummary, comparisonViews, concatView, outputViews, qkvViews, scoresViews, weightsViews,
} from "../views/attention-views.js";
import { el } from "../views/dom.js";
import { legend } from "../views/legend.js";
import { tokenEditor } from "../views/token-editor.js";

const INSTANCE = "multi-head-workbench";
const LESSON = "multi-head-attention";
// The identity W_O of this workbench hides a skipped output projection: not worth comparing.
const HIDDEN_HERE = new Set(["no_output_projection"]);

const $ = (id) => document.getElementById(id);
let state = fromHash(location.hash, embedded);
let generation = 0;
let previous = null; // the last drawn response: cells that changed since are marked
let renders = 0;
const pending = new Map();

function emit(parameter, data) {
  // Debounced per parameter: a burst of keystrokes is one event.
  clearTimeout(pending.get(parameter));
  pending.set(parameter, setTimeout(() => {
    const payload = { parameter, ...data };
    queueEvent({ lesson: LESSON, checkpoint: "experiment", event: "parameter-changed", instance_id: INSTANCE, data: payload });
    post({ type: "parameter-changed", instanceId: INSTANCE, data: payload, hash: location.hash });
  }, 400));
}

function update(change, parameter, data) {
  change(state);
  save(state);
  if (embedded) remember(state);
  emit(parameter, data);
  render();
}

const NO_COMPARISON = "Choose a broken implementation under Controls to compare it with the correct one.";

function draw(response, comparison) {
  $("weights").replaceChildren(...weightsViews(response, previous));
  $("scores").replaceChildren(...scoresViews(response));
  $("qkv").replaceChildren(...qkvViews(response));
  $("outputs").replaceChildren(...outputViews(response, previous));
  $("concat").replaceChildren(concatView(response, previous));
  $("comparison-summary").textContent = comparison ? comparisonSummary(comparison) : NO_COMPARISON;
  $("comparison-body").replaceChildren(...(comparison ? comparisonViews(comparison) : []));
  if (comparison) $("comparison").open = true;
}

async function render() {
  const mine = ++generation;
  performance.mark("workbench-input");
  const body = { tokens: state.tokens, heads: 2, causal: state.causal,
    failure_mode: state.reuse ? "reuse_first_slice" : null };
  try {
    const [response, comparison] = await Promise.all([
      postJSON("/api/v1/attention", body),
      state.compare ? postJSON("/api/v1/attention/compare", { ...body, failure_mode: state.compare }) : null,
    ]);
    if (mine !== generation) return; // a newer edit is already on its way
    draw(response, comparison);
    previous = response;
    document.body.classList.remove("stale");
    $("status").textContent = state.reuse ? "Broken: both heads read dimensions 1–2; dimensions 3–4 are ignored." : "";
    performance.measure("workbench-render", "workbench-input");
    document.body.dataset.renders = String(++renders);
    document.body.dataset.ready = "true";
  } catch (error) {
    if (mine !== generation) return;
    document.body.classList.add("stale");
    $("status").textContent = `Could not compute (${error.message}). The numbers shown are from before your last ` +
      "change; they update when the server answers.";
    document.body.dataset.ready = "true";
  }
}

function drawControls() {
  $("tokens").replaceChildren(tokenEditor(state.tokens, (t, d, v) =>
    update((s) => { s.tokens[t][d] = v; }, "token", { token: t + 1, dimension: d + 1, value: v })));
  $("causal").checked = state.causal;
  $("reuse").checked = state.reuse;
  $("compare").value = state.compare;
}

async function fillComparisons(select) {
  // Names come from the one registry the engine, the checker and the dashboard share.
  const { failure_modes: modes } = await getJSON("/api/v1/failure-modes");
  for (const mode of modes.filter((m) => m.engine && !HIDDEN_HERE.has(m.id))) {
    select.append(el("option", { value: mode.id, text: mode.name, title: mode.description }));
  }
  select.value = state.compare;
}

function init() {
  const select = $("compare");
  fillComparisons(select).catch(() => null); // offline: the comparison waits for the server anyway
  $("legend").replaceChildren(legend());
  $("causal").addEventListener("change", (e) => update((s) => { s.causal = e.target.checked; }, "causal", { value: e.target.checked }));
  $("reuse").addEventListener("change", (e) => update((s) => { s.reuse = e.target.checked; }, "reuse_first_slice", { value: e.target.checked }));
  select.addEventListener("change", (e) => update((s) => { s.compare = e.target.value; }, "failure_mode", { value: e.target.value || null }));
  $("reset").addEventListener("click", () => {
    update((s) => { s.tokens = defaults().tokens; }, "reset", {});
    drawControls();
  });
  window.addEventListener("hashchange", () => { state = fromHash(); drawControls(); render(); });
  save(state);
  drawControls();
  reportHeight();
  // Embedded: whenever the learner works a control, ask the host to show inputs and weights together.
  document.addEventListener("focusin", () => {
    const grid = document.querySelector(".wb-grid").getBoundingClientRect();
    post({ type: "show", top: grid.top + window.scrollY, bottom: grid.bottom + window.scrollY });
  });
  render();
  startOutbox();
  ensureSession().catch(() => null);
}

init();
