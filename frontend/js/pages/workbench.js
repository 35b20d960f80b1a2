// The workbench: edit tokens, toggle the mask and the broken reuse, compare with a broken
// implementation. Every change is computed by the API, redrawn, kept in the URL hash, and
// reported (debounced) as a parameter-changed event to the API and to a host page.

import { ensureSession, postJSON, queueEvent } from "../api.js";
import { defaults, fromHash, save } from "../state.js";
import { el, fmt } from "../views/dom.js";
import { heatmap } from "../views/heatmap.js";
import { matrix } from "../views/matrix.js";
import { tokenEditor } from "../views/token-editor.js";

const INSTANCE = "multi-head-workbench";
const LESSON = "multi-head-attention";
const COMPARABLE = {
  interleaved_split: "Interleaved split", no_scaling: "No score scaling", scale_by_d_model: "Scaled by sqrt(d_model)",
  mask_after_softmax: "Mask after softmax", swapped_head_order: "Swapped head order", reuse_first_slice: "Reuse slice 0",
};

const $ = (id) => document.getElementById(id);
let state = fromHash();
let generation = 0;
const timings = (window.__workbenchTimings = []);
const pending = new Map();

function emit(parameter, data) {
  // Debounced per parameter: a burst of keystrokes is one event.
  clearTimeout(pending.get(parameter));
  pending.set(parameter, setTimeout(() => {
    const payload = { parameter, ...data };
    queueEvent({ lesson: LESSON, checkpoint: "experiment", event: "parameter-changed", instance_id: INSTANCE, data: payload });
    if (window.parent !== window) {
      window.parent.postMessage({ source: "attention-workbench", type: "parameter-changed", instanceId: INSTANCE,
        data: payload, hash: location.hash }, "*");
    }
  }, 400));
}

function update(change, parameter, data) {
  change(state);
  save(state);
  emit(parameter, data);
  render();
}

function masks(response) {
  return response.heads.map((h) => h.masked_scores.map((row) => row.map((v) => v === null)));
}

function headSection(head, masked) {
  const [start, end] = head.features || [0, 0];
  const label = head.features ? `features ${start + 1}–${end}` : `features ${head.feature_indices.map((f) => f + 1).join(", ")}`;
  const cols = head.feature_indices.map((f) => `dim ${f + 1}`);
  return el("section", { class: "head", "aria-labelledby": `head-${head.index}-title` },
    el("h2", { id: `head-${head.index}-title`, text: `Head ${head.index + 1} (${label})` }),
    el("div", { class: "qkv" },
      matrix({ rows: head.query, caption: `Q slice, head ${head.index + 1}`, colLabels: cols }),
      matrix({ rows: head.key, caption: `K slice, head ${head.index + 1}`, colLabels: cols }),
      matrix({ rows: head.value, caption: `V slice, head ${head.index + 1}`, colLabels: cols })),
    heatmap({ head: head.index, weights: head.weights, masked, id: `heatmap-${head.index}`,
      title: `Head ${head.index + 1} attention weights (rows: queries, columns: keys)` }),
    matrix({ rows: head.output, caption: `Head ${head.index + 1} output`, colLabels: cols }));
}

function drawComparison(result) {
  const section = $("comparison");
  section.hidden = !result;
  if (!result) return;
  const body = $("comparison-body");
  const diff = result.differences;
  const changed = (m) => m.map((row) => row.map((v) => Math.abs(v) > 1e-9));
  $("comparison-summary").textContent = `${result.failure_mode.description}. Largest change in the output: ` +
    `${fmt(result.differences.max_abs.concat, 3)}; cells marked Δ differ.`;
  body.replaceChildren(...result.correct.heads.map((head, h) => el("div", { class: "pair" },
    heatmap({ head: h, weights: head.weights, title: `Correct, head ${h + 1}`, id: `compare-correct-${h}` }),
    heatmap({ head: h, weights: result.broken.heads[h].weights, title: `Broken, head ${h + 1}`,
      marks: changed(diff.weights[h]), id: `compare-broken-${h}` }))),
    el("div", { class: "pair" },
      matrix({ rows: result.correct.concat, caption: "Correct concatenation" }),
      matrix({ rows: result.broken.concat, caption: "Broken concatenation", marks: changed(diff.concat) })));
}

async function render() {
  const mine = ++generation;
  const started = performance.now();
  const body = { tokens: state.tokens, heads: 2, causal: state.causal,
    failure_mode: state.reuse ? "reuse_first_slice" : null };
  try {
    const [response, comparison] = await Promise.all([
      postJSON("/api/v1/attention", body),
      state.compare ? postJSON("/api/v1/attention/compare", { ...body, failure_mode: state.compare }) : null,
    ]);
    if (mine !== generation) return; // a newer edit is already on its way
    const masked = masks(response);
    $("heads").replaceChildren(...response.heads.map((h) => headSection(h, masked[h.index])));
    $("concat").replaceChildren(matrix({ rows: response.concat, caption: "Concatenated outputs [O_1 | O_2]" }));
    drawComparison(comparison);
    $("status").textContent = state.reuse
      ? "Broken: both heads read features 1–2; features 3–4 are ignored."
      : "";
    timings.push(performance.now() - started);
    document.body.dataset.ready = "true";
  } catch (error) {
    if (mine === generation) $("status").textContent = `Could not compute: ${error.message}`;
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
  $("causal").addEventListener("change", (e) => update((s) => { s.causal = e.target.checked; }, "causal", { value: e.target.checked }));
  $("reuse").addEventListener("change", (e) => update((s) => { s.reuse = e.target.checked; }, "reuse_first_slice", { value: e.target.checked }));
  select.addEventListener("change", (e) => update((s) => { s.compare = e.target.value; }, "failure_mode", { value: e.target.value || null }));
  $("reset").addEventListener("click", () => {
    update((s) => { s.tokens = defaults().tokens; }, "reset", {});
    drawControls();
  });
  window.addEventListener("hashchange", () => { state = fromHash(); drawControls(); render(); });
  drawControls();
  render();
  ensureSession().catch(() => null);
}

init();
