// @ts-check
// Trained heads: a text runs through a model (the byte model trained here, or a pretrained
// encoder); every layer x head is drawn with the label its measured scores earned, and the head
// view draws where each head of a layer sends the chosen token. Choosing a token (hover, click,
// focus, arrow keys) updates both; a head can be switched off. The URL hash keeps all of it.

import { ensureSession, getJSON, postJSON } from "../api.js";
import { parameterEvents } from "../events.js";
import { HashState } from "../hash-state.js";
import { sentences, t, tn } from "../i18n.js";
import { $, startPage } from "../shell.js";
import { drawn, el, fmt } from "../views/dom.js";
import { legend } from "../views/legend.js";
import { headLines, layerSection, weightsTable } from "../views/trained-heads.js";

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
const encoder = new TextEncoder();

// The view in the URL hash (hash-state.js): the model, the text, the chosen byte (1-based) and the heads off.
const VIEW = new HashState([
  { name: "model", type: "string", default: "", kept: true },
  { name: "text", type: "string", default: EXAMPLES.repeat, kept: true },
  { name: "byte", type: "integer", default: null, check: (v) => v >= 1 },
  { name: "off", type: "string", default: "", check: (v) => v.split(",").every((k) => /^\d+\.\d+$/.test(k)) },
]);

function readHash() {
  const view = VIEW.load();
  Object.assign(state, {
    model: view.model,
    text: view.text,
    selected: view.byte === null ? null : view.byte - 1,
    off: new Set(view.off ? view.off.split(",") : []),
  });
}

function writeHash() {
  const view = {
    model: page.model.id,
    text: state.text,
    byte: state.selected === null ? null : state.selected + 1,
    off: [...state.off].join(","),
  };
  VIEW.save(view);
}

const events = parameterEvents({ lesson: LESSON, instance: INSTANCE });

function emit(example) {
  events(
    { parameter: "model_text", model: page.model?.id ?? null, bytes: encoder.encode(state.text).length, example },
    "text",
  );
}

// The page's runtime, beside the view kept in the hash by VIEW (`state`: the model, the text, the chosen
// token, the heads off and the head view's layer).
const page = {
  models: [], // GET /api/v1/models
  model: null, // the chosen model's card
  trace: null, // its answer for the text
  generation: 0, // the latest render asked: an older answer is not drawn
  state: { model: "", text: EXAMPLES.repeat, selected: null, off: new Set(), layer: 0 },
};
const state = page.state;
const shell = startPage();

const SHOWN = { " ": "␣", "\\x0a": "↵", "\\x09": "⇥" }; // bytes a learner could not see
const unit = () => (page.model.reads === "UTF-8 bytes" ? "byte" : "piece");
const byteName = (token) =>
  unit() === "byte"
    ? t("byte {index} “{text}”", { index: token.index + 1, text: token.text })
    : t("piece {index} “{text}”", { index: token.index + 1, text: token.text });
function select(index, focus = false) {
  if (!page.trace) return;
  state.selected = Math.max(0, Math.min(page.trace.tokens.length - 1, index));
  writeHash();
  drawSelection(focus);
}

// A byte model's bytes grouped by the UTF-8 character they spell (é is two buttons under one é).
function groups(buttons) {
  if (unit() !== "byte") return buttons;
  let at = 0;
  return Array.from(page.trace.text, (c) => {
    const n = encoder.encode(c).length;
    const part = buttons.slice(at, at + n);
    at += n;
    return n === 1
      ? part[0]
      : el(
          "span",
          {
            class: "th-char",
            title: c,
            "aria-label": tn("“{char}”: {count} byte", "“{char}”: {count} bytes", n, { char: c }),
          },
          el("span", { text: c }),
          ...part,
        );
  });
}

function drawTokens() {
  $("tokens").replaceChildren(
    ...groups(
      page.trace.tokens.map((token) =>
        el("button", {
          type: "button",
          class: "th-token",
          dataset: { index: String(token.index) },
          "aria-label": byteName(token),
          text: SHOWN[token.text] ?? token.text,
          onclick: () => select(token.index),
          onmouseenter: () => select(token.index),
          onfocus: () => select(token.index),
          onkeydown: (event) => {
            const step = { ArrowLeft: -1, ArrowRight: 1, Home: -token.index, End: page.trace.tokens.length }[event.key];
            if (step === undefined) return;
            event.preventDefault();
            select(token.index + step, true);
          },
        }),
      ),
    ),
  );
}

// What every drawing of the page reads (views/trained-heads.js).
function shown() {
  return {
    trace: page.trace,
    model: page.model,
    selected: state.selected,
    name: byteName,
    pick: (row) => select(row),
    toggle: (key) => {
      state.off.has(key) ? state.off.delete(key) : state.off.add(key);
      writeHash();
      render();
    },
  };
}

function drawLayers() {
  $("layers").replaceChildren(...page.trace.layers.map((layer) => layerSection(layer, shown())));
}

function drawTable() {
  if (state.selected === null) $("table").replaceChildren(el("p", { text: t("Choose a byte first.") }));
  else $("table").replaceChildren(weightsTable(shown()));
}

function drawSelection(focus) {
  document.querySelectorAll(".th-token").forEach((/** @type {HTMLButtonElement} */ button) => {
    const chosen = Number(button.dataset.index) === state.selected;
    button.setAttribute("aria-pressed", String(chosen));
    button.tabIndex = chosen || (state.selected === null && button.dataset.index === "0") ? 0 : -1;
    if (chosen && focus) button.focus();
  });
  const i = state.selected;
  $("reading").textContent = i === null ? "" : t("{token} chosen.", { token: byteName(page.trace.tokens[i]) });
  drawLayers();
  drawLines();
  drawTable();
  if (page.trace.after) drawNext();
}

// The head view of the chosen layer.
function drawLines() {
  const layer = page.trace.layers[Math.min(state.layer, page.trace.layers.length - 1)];
  $("lines").replaceChildren(...headLines(layer, shown()));
}

// What the model predicts after the chosen byte (had the text ended there: it reads no further).
function drawNext() {
  const i = state.selected ?? page.trace.tokens.length - 1;
  $("next-title").textContent = t("What the model expects after {token}", { token: byteName(page.trace.tokens[i]) });
  $("next").replaceChildren(
    ...page.trace.after[i].map((p) =>
      el("li", { text: `“${SHOWN[p.text] ?? p.text}” ${fmt(p.probability * 100, 1)} %` }),
    ),
  );
}

async function render() {
  const mine = ++page.generation;
  const bytes = encoder.encode(state.text).length;
  const counted = unit() === "byte";
  $("bytes").textContent = counted
    ? t("{count} of {context} bytes", { count: bytes, context: page.model.context })
    : "";
  if (bytes === 0 || (counted && bytes > page.model.context)) {
    $("status").textContent =
      bytes === 0
        ? t("Type some text.")
        : t("That is {count} bytes; the model reads at most {context}.", { count: bytes, context: page.model.context });
    return;
  }
  const ablate = [...state.off]
    .map((k) => k.split(".").map(Number))
    .filter(([l, h]) => l < page.model.layers && h < page.model.heads)
    .map(([layer, head]) => ({ layer, head }));
  // Switching heads off may measure the scores again (a new set of heads): say it is working.
  const main = document.querySelector("main");
  const slow =
    ablate.length > 0
      ? setTimeout(() => {
          main.setAttribute("aria-busy", "true");
          $("status").textContent = t("Measuring every head's scores again with the chosen heads off…");
        }, 150)
      : 0;
  try {
    const sent = state.text;
    const result = await postJSON(`/api/v1/models/${page.model.id}/attention`, {
      text: sent,
      include: ["weights"],
      precision: 4,
      ablate,
    }).finally(() => clearTimeout(slow));
    if (mine !== page.generation) return;
    page.trace = { ...result, text: sent };
    // The last byte until the learner chooses: where each head looks to predict what comes next.
    if (state.selected === null || state.selected >= page.trace.tokens.length)
      state.selected = page.trace.tokens.length - 1;
    $("status").textContent = "";
    drawTokens();
    drawSelection(false);
    document.documentElement.classList.add("drawn");
    drawn();
  } catch (error) {
    if (mine !== page.generation) return;
    $("status").textContent = t("Could not compute ({reason}).", { reason: error.message });
    document.documentElement.classList.add("drawn");
    drawn();
  }
}

function choose(id) {
  page.model = page.models.find((m) => m.id === id) ?? page.models[0];
  document.body.dataset.kind = page.model.reads === "UTF-8 bytes" ? "bytes" : "encoder";
  $("model").value = page.model.id;
  $("context").textContent =
    unit() === "byte"
      ? t("{count} bytes", { count: page.model.context })
      : t("{count} pieces", { count: page.model.context });
  $("unit-title").textContent = unit() === "byte" ? t("Bytes") : t("Word pieces");
  const measured = t("Each head's label comes from scores the service measured on {sample}.", {
    sample: page.model.measured_on,
  });
  $("model-note").textContent = sentences(page.model.description, measured);
  $("lines-layer").replaceChildren(
    ...Array.from({ length: page.model.layers }, (_, l) =>
      el("option", { value: String(l), text: t("Layer {layer}", { layer: l + 1 }) }),
    ),
  );
  state.layer = 0;
}

async function init() {
  readHash();
  ({ models: page.models } = await getJSON("/api/v1/models"));
  if (!page.models.length) throw new Error(t("no trained model is installed"));
  $("model").replaceChildren(...page.models.map((m) => el("option", { value: m.id, text: m.id })));
  choose(state.model);
  $("model").addEventListener("change", (e) => {
    choose(e.target.value);
    state.selected = null;
    state.off.clear();
    writeHash();
    render();
  });
  $("lines-layer").addEventListener("change", (e) => {
    state.layer = Number(e.target.value);
    drawLines();
  });
  $("legend").replaceChildren(legend({ compact: true }));
  const input = $("text");
  input.value = state.text;
  input.addEventListener("input", () => {
    state.text = input.value;
    writeHash();
    emit(null);
    render();
  });
  $("text-form").addEventListener("submit", (event) => event.preventDefault());
  for (const button of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll("[data-example]"))) {
    button.addEventListener("click", () => {
      const example = button.dataset.example;
      state.text = example === "repeat" ? randomTwice() : EXAMPLES[example];
      input.value = state.text;
      state.selected = null;
      writeHash();
      emit(button.dataset.example);
      render();
    });
  }
  await render();
  shell.drawn();
  ensureSession().catch(() => null);
}

init().catch((error) => {
  $("status").textContent = t("Could not load the model ({reason}).", { reason: error.message });
  document.documentElement.classList.add("drawn");
  drawn();
});
