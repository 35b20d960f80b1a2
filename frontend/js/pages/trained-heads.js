// Trained heads: a text runs through the small model trained here; each head's weights are drawn
// with the label its measured scores earned. Choosing a byte (hover, click, focus, arrow keys)
// shows where every head sends it. The text and the chosen byte live in the URL hash.

import { getJSON, postJSON, queueEvent, startOutbox, ensureSession } from "../api.js";
import { post, reportHeight } from "../embed.js";
import { el, fmt } from "../views/dom.js";
import { headCanvas, strongest } from "../views/head-canvas.js";
import { legend } from "../views/legend.js";
import { scrollRegion } from "../views/matrix.js";

const LESSON = "multi-head-attention";
const INSTANCE = "trained-heads";
const RANDOM_BYTES = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789#&!?%+=";
// A fresh random string each time, typed twice: no heads could have learned it.
function randomTwice(length = 16) {
  const picks = crypto.getRandomValues(new Uint8Array(length));
  const once = Array.from(picks, (v) => RANDOM_BYTES[v % RANDOM_BYTES.length]).join("");
  return once + once;
}
const EXAMPLES = {
  repeat: "Kx7#qPz2!mW4vR9&Kx7#qPz2!mW4vR9&",
  prose: "The for statement in Python iterates over the items of any sequence, in order.",
  code: "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)",
};
const $ = (id) => document.getElementById(id);
const encoder = new TextEncoder();

let model = null;
let trace = null;
let generation = 0;
let emitTimer = null;
const state = { text: EXAMPLES.repeat, selected: null };

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  if (params.has("text")) state.text = params.get("text");
  const selected = Number.parseInt(params.get("byte") ?? "", 10);
  state.selected = Number.isInteger(selected) && selected >= 1 ? selected - 1 : null; // 1-based in the URL
}

function writeHash() {
  const params = new URLSearchParams({ text: state.text });
  if (state.selected !== null) params.set("byte", String(state.selected + 1));
  history.replaceState(null, "", `#${params}`);
}

function emit(example) {
  clearTimeout(emitTimer);
  emitTimer = setTimeout(() => {
    const data = { parameter: "model_text", model: model?.id ?? null, bytes: encoder.encode(state.text).length, example };
    queueEvent({ lesson: LESSON, checkpoint: "experiment", event: "parameter-changed", instance_id: INSTANCE, data });
    post({ type: "parameter-changed", instanceId: INSTANCE, data, hash: location.hash });
  }, 400);
}

const SHOWN = { " ": "␣", "\\x0a": "↵", "\\x09": "⇥" }; // bytes a learner could not see
const byteName = (token) => `byte ${token.index + 1} “${token.text}”`;

function select(index, focus = false) {
  if (!trace) return;
  state.selected = Math.max(0, Math.min(trace.tokens.length - 1, index));
  writeHash();
  drawSelection(focus);
}

function drawTokens() {
  $("tokens").replaceChildren(...trace.tokens.map((token) => el("button", {
    type: "button", class: "th-token", dataset: { index: String(token.index) },
    "aria-label": byteName(token), text: SHOWN[token.text] ?? token.text,
    onclick: () => select(token.index), onmouseenter: () => select(token.index), onfocus: () => select(token.index),
    onkeydown: (event) => {
      const step = { ArrowLeft: -1, ArrowRight: 1, Home: -token.index, End: trace.tokens.length }[event.key];
      if (step === undefined) return;
      event.preventDefault();
      select(token.index + step, true);
    },
  })));
}

function drawLayers() {
  const i = state.selected;
  $("layers").replaceChildren(...trace.layers.map((layer) => el("section", { class: "th-layer", "aria-labelledby": `layer-${layer.index}` },
    el("h2", { id: `layer-${layer.index}`, text: `Layer ${layer.index + 1}` }),
    el("div", { class: "th-heads" }, ...layer.heads.map((head) => {
      const name = `Layer ${layer.index + 1} head ${head.index + 1}`;
      const best = i === null ? null : strongest(head.weights, i);
      const score = Math.max(...Object.values(head.pattern_scores));
      return el("figure", { class: "th-head", dataset: { layer: String(layer.index), head: String(head.index), label: head.label } },
        el("figcaption", {}, el("strong", { text: `Head ${head.index + 1}: ${head.label}` }),
          el("span", { class: "muted", text: ` (score ${fmt(score)})` })),
        headCanvas({ weights: head.weights, selected: i, onPick: (row) => select(row),
          label: `${name} weights, labelled ${head.label}` }),
        el("p", { class: "th-reads", text: best === null ? "Choose a byte." :
          `${byteName(trace.tokens[i])} → ${byteName(trace.tokens[best.key])}: ${fmt(best.weight)}` }));
    })))));
}

function drawTable() {
  const i = state.selected;
  if (i === null) { $("table").replaceChildren(el("p", { text: "Choose a byte first." })); return; }
  const keys = trace.tokens.slice(0, i + 1);
  const table = el("table", { class: "th-table" },
    el("caption", { text: `Weights from ${byteName(trace.tokens[i])} to every byte it can see` }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Head" }),
      ...keys.map((token) => el("th", { scope: "col", "aria-label": byteName(token), text: `${token.index + 1} ${token.text}` })))),
    el("tbody", {}, ...trace.layers.flatMap((layer) => layer.heads.map((head) => el("tr", {},
      el("th", { scope: "row", text: `L${layer.index + 1} H${head.index + 1} ${head.label}` }),
      ...head.weights[i].slice(0, i + 1).map((value) => el("td", { text: fmt(value) })))))));
  $("table").replaceChildren(scrollRegion("Weights of the chosen byte", table));
}

function drawSelection(focus) {
  document.querySelectorAll(".th-token").forEach((button) => {
    const chosen = Number(button.dataset.index) === state.selected;
    button.setAttribute("aria-pressed", String(chosen));
    button.tabIndex = chosen || (state.selected === null && button.dataset.index === "0") ? 0 : -1;
    if (chosen && focus) button.focus();
  });
  const i = state.selected;
  $("reading").textContent = i === null ? "" : `${byteName(trace.tokens[i])} chosen.`;
  drawLayers();
  drawTable();
  drawNext();
}

// What the model predicts after the chosen byte (had the text ended there: it reads no further).
function drawNext() {
  const i = state.selected ?? trace.tokens.length - 1;
  $("next-title").textContent = `What the model expects after ${byteName(trace.tokens[i])}`;
  $("next").replaceChildren(...trace.after[i].map((p) => el("li", { text: `“${SHOWN[p.text] ?? p.text}” ${fmt(p.probability * 100, 1)}%` })));
}

async function render() {
  const mine = ++generation;
  const bytes = encoder.encode(state.text).length;
  $("bytes").textContent = `${bytes} of ${model.context} bytes`;
  if (bytes === 0 || bytes > model.context) {
    $("status").textContent = bytes === 0 ? "Type some text." : `That is ${bytes} bytes; the model reads at most ${model.context}.`;
    return;
  }
  try {
    const result = await postJSON(`/api/v1/models/${model.id}/attention`, { text: state.text, include: ["weights"], precision: 4 });
    if (mine !== generation) return;
    trace = result;
    // The last byte until the learner chooses: where each head looks to predict what comes next.
    if (state.selected === null || state.selected >= trace.tokens.length) state.selected = trace.tokens.length - 1;
    $("status").textContent = "";
    drawTokens();
    drawSelection(false);
    document.documentElement.classList.add("drawn");
    document.body.dataset.ready = "true";
  } catch (error) {
    if (mine !== generation) return;
    $("status").textContent = `Could not compute (${error.message}).`;
    document.documentElement.classList.add("drawn");
    document.body.dataset.ready = "true";
  }
}

async function init() {
  readHash();
  const { models } = await getJSON("/api/v1/models");
  model = models[0];
  if (!model) throw new Error("no trained model is installed");
  $("context").textContent = String(model.context);
  $("model-note").textContent = `${model.description} Each head's label comes from scores the service measured ` +
    `on ${model.measured_on}.`;
  $("legend").replaceChildren(legend({ compact: true }));
  const input = $("text");
  input.value = state.text;
  input.addEventListener("input", () => { state.text = input.value; writeHash(); emit(null); render(); });
  $("text-form").addEventListener("submit", (event) => event.preventDefault());
  document.querySelectorAll("[data-example]").forEach((button) => button.addEventListener("click", () => {
    state.text = input.value = button.dataset.example === "repeat" ? randomTwice() : EXAMPLES[button.dataset.example];
    state.selected = null;
    writeHash();
    emit(button.dataset.example);
    render();
  }));
  reportHeight();
  await render();
  startOutbox();
  ensureSession().catch(() => null);
}

init().catch((error) => {
  $("status").textContent = `Could not load the model (${error.message}).`;
  document.documentElement.classList.add("drawn");
  document.body.dataset.ready = "true";
});
