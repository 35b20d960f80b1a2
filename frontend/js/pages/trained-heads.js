// Trained heads: a text runs through a model (the byte model trained here, or a pretrained
// encoder); every layer x head is drawn with the label its measured scores earned, and the head
// view draws where each head of a layer sends the chosen token. Choosing a token (hover, click,
// focus, arrow keys) updates both; a head can be switched off. The URL hash keeps all of it.

import { getJSON, postJSON, startOutbox, ensureSession } from "../api.js";
import { HashState } from "../hash-state.js";
import { reportHeight } from "../embed.js";
import { parameterEvents } from "../events.js";
import { drawn, el, fmt } from "../views/dom.js";
import { headCanvas, strongest } from "../views/head-canvas.js";
import { legend } from "../views/legend.js";
import { scrollRegion } from "../views/matrix.js";
import { t, tn } from "../i18n.js";

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

let models = [];
let model = null;
let trace = null;
let generation = 0;
const state = { model: "", text: EXAMPLES.repeat, selected: null, off: new Set(), layer: 0 };

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
    model: model.id,
    text: state.text,
    byte: state.selected === null ? null : state.selected + 1,
    off: [...state.off].join(","),
  };
  VIEW.save(view);
}

const events = parameterEvents({ lesson: LESSON, instance: INSTANCE });

function emit(example) {
  events(
    { parameter: "model_text", model: model?.id ?? null, bytes: encoder.encode(state.text).length, example },
    "text",
  );
}

const SHOWN = { " ": "␣", "\\x0a": "↵", "\\x09": "⇥" }; // bytes a learner could not see
const unit = () => (model.reads === "UTF-8 bytes" ? "byte" : "piece");
const byteName = (token) =>
  unit() === "byte"
    ? t("byte {index} “{text}”", { index: token.index + 1, text: token.text })
    : t("piece {index} “{text}”", { index: token.index + 1, text: token.text });
// The heads' labels are the API's names of their patterns (data-label keeps them); shown translated.
const LABELS = {
  "previous token": t("previous token"),
  induction: t("induction"),
  "first token": t("first token"),
  "current token": t("current token"),
  "next token": t("next token"),
  "no single pattern": t("no single pattern"),
};
const labelOf = (head) => LABELS[head.label] ?? head.label;

function select(index, focus = false) {
  if (!trace) return;
  state.selected = Math.max(0, Math.min(trace.tokens.length - 1, index));
  writeHash();
  drawSelection(focus);
}

// A byte model's bytes grouped by the UTF-8 character they spell (é is two buttons under one é).
function groups(buttons) {
  if (unit() !== "byte") return buttons;
  let at = 0;
  return Array.from(trace.text, (c) => {
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
      trace.tokens.map((token) =>
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
            const step = { ArrowLeft: -1, ArrowRight: 1, Home: -token.index, End: trace.tokens.length }[event.key];
            if (step === undefined) return;
            event.preventDefault();
            select(token.index + step, true);
          },
        }),
      ),
    ),
  );
}

function drawLayers() {
  const i = state.selected;
  $("layers").replaceChildren(
    ...trace.layers.map((layer) =>
      el(
        "section",
        { class: "th-layer", "aria-labelledby": `layer-${layer.index}` },
        el("h2", { id: `layer-${layer.index}`, text: t("Layer {layer}", { layer: layer.index + 1 }) }),
        el(
          "div",
          { class: "th-heads" },
          ...layer.heads.map((head) => {
            const name = t("Layer {layer} head {head}", { layer: layer.index + 1, head: head.index + 1 });
            const best = i === null ? null : strongest(head.weights, i, model.causal);
            const score = Math.max(...Object.values(head.pattern_scores));
            const key = `${layer.index}.${head.index}`;
            const pattern = Object.keys(head.pattern_scores).find((p) => head.pattern_scores[p] === score);
            const scored =
              head.ablation && !head.off
                ? t("score {score} → {after} with the heads off", {
                    score: fmt(score),
                    after: fmt(head.ablation.ablated[pattern]),
                  })
                : t("score {score}", { score: fmt(score) });
            return el(
              "figure",
              {
                class: `th-head${head.off ? " off" : ""}`,
                dataset: { layer: String(layer.index), head: String(head.index), label: head.label },
              },
              el(
                "figcaption",
                {},
                el("button", {
                  type: "button",
                  class: "link",
                  "aria-expanded": "false",
                  text: t("Head {head}: {label}", { head: head.index + 1, label: labelOf(head) }),
                  onclick: (e) =>
                    e.target.setAttribute("aria-expanded", String(e.target.closest("figure").classList.toggle("open"))),
                }),
                el("span", { class: "muted", text: ` (${scored})` }),
                el(
                  "label",
                  { class: "th-off" },
                  el("input", {
                    type: "checkbox",
                    checked: head.off,
                    "aria-label": t("Switch off {head}", { head: name }),
                    onchange: () => {
                      state.off.has(key) ? state.off.delete(key) : state.off.add(key);
                      writeHash();
                      render();
                    },
                  }),
                  " ",
                  t("off"),
                ),
              ),
              headCanvas({
                weights: head.weights,
                selected: i,
                onPick: (row) => select(row),
                causal: model.causal,
                label: t("{head} weights, labelled {label}", { head: name, label: labelOf(head) }),
              }),
              el("p", {
                class: "th-reads",
                text:
                  best === null
                    ? t("Choose a byte.")
                    : `${byteName(trace.tokens[i])} → ${byteName(trace.tokens[best.key])}: ${fmt(best.weight)}`,
              }),
            );
          }),
        ),
      ),
    ),
  );
}

function drawTable() {
  const i = state.selected;
  if (i === null) {
    $("table").replaceChildren(el("p", { text: t("Choose a byte first.") }));
    return;
  }
  const keys = model.causal ? trace.tokens.slice(0, i + 1) : trace.tokens;
  const table = el(
    "table",
    { class: "th-table" },
    el("caption", { text: t("Weights from {token} to every token it can see", { token: byteName(trace.tokens[i]) }) }),
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        el("th", { scope: "col", text: t("Head") }),
        ...keys.map((token) =>
          el("th", { scope: "col", "aria-label": byteName(token), text: `${token.index + 1} ${token.text}` }),
        ),
      ),
    ),
    el(
      "tbody",
      {},
      ...trace.layers.flatMap((layer) =>
        layer.heads.map((head) =>
          el(
            "tr",
            {},
            el("th", { scope: "row", text: `L${layer.index + 1} H${head.index + 1} ${labelOf(head)}` }),
            ...head.weights[i].slice(0, keys.length).map((value) => el("td", { text: fmt(value) })),
          ),
        ),
      ),
    ),
  );
  $("table").replaceChildren(scrollRegion(t("Weights of the chosen token"), table));
}

function drawSelection(focus) {
  document.querySelectorAll(".th-token").forEach((button) => {
    const chosen = Number(button.dataset.index) === state.selected;
    button.setAttribute("aria-pressed", String(chosen));
    button.tabIndex = chosen || (state.selected === null && button.dataset.index === "0") ? 0 : -1;
    if (chosen && focus) button.focus();
  });
  const i = state.selected;
  $("reading").textContent = i === null ? "" : t("{token} chosen.", { token: byteName(trace.tokens[i]) });
  drawLayers();
  drawLines();
  drawTable();
  if (trace.after) drawNext();
}

const colour = (head) => `hsl(${(head.index * 360) / model.heads} 70% 26%)`; // 4.5:1 on white at every hue

// The head view: the chosen token on the left, every token on the right, one line per head of the
// chosen layer to each token, as opaque as that head's weight (the colour is the head's).
function drawLines() {
  const i = state.selected,
    n = trace.tokens.length,
    row = 16,
    svg = "http://www.w3.org/2000/svg";
  const layer = trace.layers[Math.min(state.layer, trace.layers.length - 1)];
  const node = (tag, attrs, text) => {
    const e = document.createElementNS(svg, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text) e.textContent = text;
    return e;
  };
  const picture = node("svg", {
    viewBox: `0 0 320 ${n * row + 4}`,
    class: "th-lines",
    role: "img",
    "aria-label": t("Where each head of layer {layer} sends {token}", {
      layer: layer.index + 1,
      token: byteName(trace.tokens[i]),
    }),
  });
  trace.tokens.forEach((token, j) => {
    picture.append(
      node("text", { x: 60, y: j * row + 14, "text-anchor": "end", "font-weight": j === i ? 700 : 400 }, token.text),
    );
    picture.append(node("text", { x: 260, y: j * row + 14 }, token.text));
  });
  // Each head's lines are offset a little from the others' (heads that agree lie side by side, not
  // on top of each other) and never fainter than 0.3, so every head stays readable; the width says the weight.
  for (const head of layer.heads) {
    head.weights[i].forEach((w, j) => {
      const offset = (head.index - (layer.heads.length - 1) / 2) * 2.5;
      if (w > 0.02)
        picture.append(
          node("line", {
            x1: 66,
            y1: i * row + 10 + offset,
            x2: 254,
            y2: j * row + 10 + offset,
            "data-head": head.index,
            "data-key": j,
            "data-weight": w.toFixed(3),
            stroke: colour(head),
            "stroke-opacity": (0.3 + 0.7 * w).toFixed(2),
            "stroke-width": (1 + 2.5 * w).toFixed(2),
          }),
        );
    });
  }
  $("lines").replaceChildren(
    el(
      "p",
      { class: "th-key" },
      ...layer.heads.map((h) => {
        const key = el("span", { text: "━ ".concat(t("head {head}", { head: h.index + 1 }), " ") });
        key.style.color = colour(h); // the CSS object model: the page's CSP refuses style attributes
        return key;
      }),
    ),
    picture,
  );
}

// What the model predicts after the chosen byte (had the text ended there: it reads no further).
function drawNext() {
  const i = state.selected ?? trace.tokens.length - 1;
  $("next-title").textContent = t("What the model expects after {token}", { token: byteName(trace.tokens[i]) });
  $("next").replaceChildren(
    ...trace.after[i].map((p) => el("li", { text: `“${SHOWN[p.text] ?? p.text}” ${fmt(p.probability * 100, 1)} %` })),
  );
}

async function render() {
  const mine = ++generation;
  const bytes = encoder.encode(state.text).length;
  const counted = unit() === "byte";
  $("bytes").textContent = counted ? t("{count} of {context} bytes", { count: bytes, context: model.context }) : "";
  if (bytes === 0 || (counted && bytes > model.context)) {
    $("status").textContent =
      bytes === 0
        ? t("Type some text.")
        : t("That is {count} bytes; the model reads at most {context}.", { count: bytes, context: model.context });
    return;
  }
  const ablate = [...state.off]
    .map((k) => k.split(".").map(Number))
    .filter(([l, h]) => l < model.layers && h < model.heads)
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
    const result = await postJSON(`/api/v1/models/${model.id}/attention`, {
      text: sent,
      include: ["weights"],
      precision: 4,
      ablate,
    }).finally(() => clearTimeout(slow));
    if (mine !== generation) return;
    trace = { ...result, text: sent };
    // The last byte until the learner chooses: where each head looks to predict what comes next.
    if (state.selected === null || state.selected >= trace.tokens.length) state.selected = trace.tokens.length - 1;
    $("status").textContent = "";
    drawTokens();
    drawSelection(false);
    document.documentElement.classList.add("drawn");
    drawn();
  } catch (error) {
    if (mine !== generation) return;
    $("status").textContent = t("Could not compute ({reason}).", { reason: error.message });
    document.documentElement.classList.add("drawn");
    drawn();
  }
}

function choose(id) {
  model = models.find((m) => m.id === id) ?? models[0];
  document.body.dataset.kind = model.reads === "UTF-8 bytes" ? "bytes" : "encoder";
  $("model").value = model.id;
  $("context").textContent =
    unit() === "byte" ? t("{count} bytes", { count: model.context }) : t("{count} pieces", { count: model.context });
  $("unit-title").textContent = unit() === "byte" ? t("Bytes") : t("Word pieces");
  const measured = t("Each head's label comes from scores the service measured on {sample}.", {
    sample: model.measured_on,
  });
  $("model-note").textContent = `${model.description} ${measured}`;
  $("lines-layer").replaceChildren(
    ...Array.from({ length: model.layers }, (_, l) =>
      el("option", { value: String(l), text: t("Layer {layer}", { layer: l + 1 }) }),
    ),
  );
  state.layer = 0;
}

async function init() {
  readHash();
  ({ models } = await getJSON("/api/v1/models"));
  if (!models.length) throw new Error(t("no trained model is installed"));
  $("model").replaceChildren(...models.map((m) => el("option", { value: m.id, text: m.id })));
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
  for (const button of document.querySelectorAll("[data-example]")) {
    button.addEventListener("click", () => {
      state.text = input.value = button.dataset.example === "repeat" ? randomTwice() : EXAMPLES[button.dataset.example];
      state.selected = null;
      writeHash();
      emit(button.dataset.example);
      render();
    });
  }
  reportHeight();
  await render();
  startOutbox();
  ensureSession().catch(() => null);
}

init().catch((error) => {
  $("status").textContent = t("Could not load the model ({reason}).", { reason: error.message });
  document.documentElement.classList.add("drawn");
  drawn();
});
