// The workbench: edit tokens, toggle the mask and the broken reuse, compare with a broken
// implementation. Every change is computed by the API, redrawn, kept in the URL hash (and, when
// embedded, on this device, so a reload of the lesson keeps it), and reported (debounced) as a
// parameter-changed event to the API and to a host page.

import { ensureSession, postJSON, queueEvent, startOutbox } from "../api.js";
import { embedded, post, reportHeight } from "../embed.js";
import { defaults, fromHash, remember, save } from "../state.js";
import { el, fmt } from "../views/dom.js";
import { heatmap } from "../views/heatmap.js";
import { legend } from "../views/legend.js";
import { changes } from "../views/marks.js";
import { matrix, scrollRegion } from "../views/matrix.js";
import { tokenEditor } from "../views/token-editor.js";

const INSTANCE = "multi-head-workbench";
const LESSON = "multi-head-attention";
const COMPARABLE = {
  interleaved_split: "Interleaved split", no_scaling: "No score scaling", scale_by_d_model: "Scaled by √d_model",
  mask_after_softmax: "Mask after softmax", swapped_head_order: "Swapped head order",
  reuse_first_slice: "Reuse the first slice",
};

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

const masks = (head) => head.masked_scores.map((row) => row.map((v) => v === null));
const dims = (head) => head.feature_indices.map((f) => `dim ${f + 1}`);

function featuresLabel(head) {
  if (head.features) return `dimensions ${head.features[0] + 1}–${head.features[1]}`;
  return `dimensions ${head.feature_indices.map((f) => f + 1).join(", ")}`;
}

function drawWeights(response) {
  $("weights").replaceChildren(...response.heads.map((head) => {
    const before = previous && previous.heads[head.index];
    return heatmap({ head: head.index, weights: head.weights, masked: masks(head), id: `heatmap-${head.index}`,
      marks: before ? changes(before.weights, head.weights) : null,
      title: `Head ${head.index + 1} (${featuresLabel(head)})` });
  }));
}

function drawDetails(response) {
  $("scores").replaceChildren(...response.heads.map((head) => scrollRegion(`Head ${head.index + 1} scores`,
    heatmap({ head: head.index, weights: head.scores,
      masked: masks(head), id: `scores-${head.index}`, colour: false, summarise: false,
      title: `Head ${head.index + 1} scores (before the softmax)` }))));
  $("qkv").replaceChildren(...response.heads.map((head) => el("div", { class: "pair" },
    ...["query", "key", "value"].map((part) => scrollRegion(`Head ${head.index + 1} ${part} slice`,
      matrix({ rows: head[part], caption: `${part[0].toUpperCase()} slice, head ${head.index + 1}`, colLabels: dims(head) }))))));
  $("outputs").replaceChildren(...response.heads.map((head) => scrollRegion(`Head ${head.index + 1} output`,
    matrix({ rows: head.output, caption: `Head ${head.index + 1} output`, colLabels: dims(head),
      marks: previous ? changes(previous.heads[head.index].output, head.output) : null }))));
  $("concat").replaceChildren(scrollRegion("Concatenated outputs",
    matrix({ rows: response.concat, caption: "Concatenated outputs [O_1 | O_2]",
      marks: previous ? changes(previous.concat, response.concat) : null })));
}

function drawComparison(result) {
  const details = $("comparison");
  if (!result) {
    $("comparison-summary").textContent = "Choose a broken implementation under Controls to compare it with the correct one.";
    $("comparison-body").replaceChildren();
    return;
  }
  details.open = true;
  const diff = result.differences;
  $("comparison-summary").textContent = `${result.failure_mode.description}. Largest change in the output: ` +
    `${fmt(diff.max_abs.concat, 3)}; cells marked Δ differ.`;
  const differs = (m) => m.map((row) => row.map((v) => (Math.abs(v) > 1e-9 ? "differs" : null)));
  $("comparison-body").replaceChildren(...result.correct.heads.map((head, h) => el("div", { class: "pair" },
    heatmap({ head: h, weights: head.weights, masked: masks(head), title: `Correct, head ${h + 1}`, id: `compare-correct-${h}` }),
    heatmap({ head: h, weights: result.broken.heads[h].weights, masked: masks(result.broken.heads[h]),
      title: `Broken, head ${h + 1}`, marks: differs(diff.weights[h]), id: `compare-broken-${h}` }))),
  el("div", { class: "pair" },
    scrollRegion("Correct concatenation", matrix({ rows: result.correct.concat, caption: "Correct concatenation" })),
    scrollRegion("Broken concatenation", matrix({ rows: result.broken.concat, caption: "Broken concatenation",
      marks: differs(diff.concat) }))));
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
    drawWeights(response);
    drawDetails(response);
    drawComparison(comparison);
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

function init() {
  const select = $("compare");
  for (const [id, label] of Object.entries(COMPARABLE)) select.append(el("option", { value: id, text: label }));
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
