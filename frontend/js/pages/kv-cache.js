// The KV cache explorable: six tokens generated position by position (POST /api/v1/attention/decode on
// the kv-cache preset), with keys and values per head (MHA), shared (GQA, MQA) or compressed into a
// latent (MLA), optionally broken the way decoding code goes wrong; and a released model's cache in
// bytes (POST /api/v1/kv-cache). The view lives in the URL hash; the lesson's four manipulations tick
// as they are done and are reported as parameter-changed events (the server completes `experiment`).
// A sliding window makes the cache roll (drawn slot by slot), sinks keep the first positions, a learned
// sink logit per head takes a share of each row, and StreamingLLM's renumbering turns the cached keys by
// their places in the cache; each long-context slip switches on what it needs, and says so.

import { getJSON, postJSON } from "../api.js";
import { embedded, reportHeight } from "../embed.js";
import { parameterEvents } from "../events.js";
import { HashState } from "../hash-state.js";
import { announcer } from "../views/announce.js";
import { Experiment } from "../views/experiment.js";
import { drawn, el } from "../views/dom.js";
import { cacheView, mappingView, memoryView, queryView, whole } from "../views/kv-cache.js";
import { N_, t } from "../i18n.js";

const KV_HEADS = { mha: 4, gqa: 2, mqa: 1, mla: 4 }; // of the preset's four query heads
const SINK_LOGITS = [1, 0, -1, 2]; // one learned logit per query head (gpt-oss learns one per head)
const WINDOW = 3; // what a long-context slip switches on when no window is set
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

const $ = (id) => document.getElementById(id);
const events = parameterEvents({ lesson: LESSON, instance: INSTANCE });
const experiment = new Experiment({
  lesson: LESSON,
  instance: INSTANCE,
  manipulations: MANIPULATIONS,
  node: $("checklist"),
});
let preset = null; // the kv-cache preset's request
let models = []; // GET /api/v1/kv-cache/presets
let modes = new Map(); // the failure modes of decoding, shared key/value heads and long contexts, from the registry
let generation = 0;

const VIEW = new HashState([
  { name: "kind", type: "string", default: "mha", values: Object.keys(KV_HEADS) },
  { name: "position", type: "integer", default: 1, check: (v) => v >= 1 && v <= (preset ? preset.tokens.length : 1) }, // 1-based
  { name: "rope", type: "boolean", default: true },
  { name: "absorbed", type: "boolean", default: false },
  { name: "compare", type: "string", default: "", check: (v) => v === "" || modes.has(v) },
  {
    name: "model",
    type: "string",
    default: LESSON === "long-context" ? "gemma-3-27b" : "deepseek-v2",
    check: (v) => models.some((m) => m.id === v),
  },
  { name: "context", type: "integer", default: 0, check: (v) => v >= 0 && v <= 100000000 }, // 0: the model's own
  { name: "window", type: "integer", default: 0, values: [0, 2, 3, 4] }, // 0: none
  { name: "sinks", type: "integer", default: 0, values: [0, 1, 2] },
  { name: "logit", type: "boolean", default: false },
  { name: "renumber", type: "boolean", default: false },
]);
let state = null;

// How this page meets each need a failure mode has (its `needs`, from GET /api/v1/failure-modes): whether
// the state meets it, what to switch, and what to say, a sentence of its own (`said`) or a few words in
// "“{mode}” needs …: switched on." Needs this page always meets (it decodes, causally, with four heads)
// have no entry. What was switched is said beside the controls (`switched`), never done silently.
const MEETS = {
  grouped_heads: {
    met: (s) => s.kind === "gqa",
    meet: (s) => {
      s.kind = "gqa";
    },
    said: (mode) =>
      t(
        "“{mode}” breaks how query heads share key/value heads, so it needs GQA: switched to GQA, 2 key/value heads for 4 query heads.",
        { mode },
      ),
  },
  head_slices: {
    met: (s) => s.kind !== "mla",
    meet: (s) => {
      s.kind = "mha";
    },
  },
  rope: {
    met: (s) => s.rope,
    meet: (s) => {
      s.rope = true;
    },
    said: (mode) => t("“{mode}” breaks the positions RoPE turns by, so it needs RoPE: turned RoPE on.", { mode }),
  },
  whole_cache: {
    met: (s) => !s.window && !s.logit,
    meet: (s) => {
      s.window = 0;
      s.logit = false;
    },
    said: (mode) => t("“{mode}” is computed over a cache that keeps every position: turned the window off.", { mode }),
  },
  window: {
    met: (s) => Boolean(s.window),
    meet: (s) => {
      s.window = WINDOW;
    },
    word: () => t("a window of {window}", { window: WINDOW }),
  },
  sinks: {
    met: (s) => s.sinks > 0,
    meet: (s) => {
      s.sinks = 1;
    },
    word: () => t("one sink"),
  },
  sink_logit: {
    met: (s) => s.logit,
    meet: (s) => {
      s.logit = true;
    },
    word: () => t("the sink logits"),
  },
  positions: {
    met: (s) => s.renumber,
    meet: (s) => {
      s.renumber = true;
    },
    word: () => t("positions in the cache"),
  },
  whole_keys: {
    met: (s) => s.kind !== "mla",
    meet: (s) => {
      s.kind = "mha";
    },
    word: () => t("MHA (a latent's RoPE key is not renumbered)"),
  },
};
// The needs this page's menu is about: a mode with one of them is offered here (the rest: the workbench).
const OFFERED = new Set(["decode", "grouped_heads", "window", "sinks", "sink_logit", "positions"]);
// A long-context slip (the long-context lesson counts choosing one): it needs a window, sinks, a sink logit or positions.
const long = (mode) =>
  Boolean(mode) && mode.needs.some((n) => ["window", "sinks", "sink_logit", "positions"].includes(n));
const unmet = (s, mode) => Object.keys(MEETS).filter((need) => mode.needs.includes(need) && !MEETS[need].met(s));

let switched = "";
function settle(s) {
  switched = "";
  const mode = modes.get(s.compare);
  if (!mode) return s;
  const said = [];
  const words = [];
  for (const need of unmet(s, mode)) {
    if (MEETS[need].met(s)) continue; // met on the way, by what an earlier need switched
    MEETS[need].meet(s);
    if (MEETS[need].said) said.push(MEETS[need].said(mode.name));
    else if (MEETS[need].word) words.push(MEETS[need].word());
  }
  if (words.length) said.push(t("“{mode}” needs {what}: switched on.", { mode: mode.name, what: words.join(", ") }));
  switched = said.join(" ");
  return s;
}

// A control changed so that the chosen mode's needs no longer hold: the mode is cleared, not the change undone.
function dropUnmet(s) {
  const mode = modes.get(s.compare);
  if (mode && unmet(s, mode).length) s.compare = "";
}

const renumbers = (s) => Boolean(s.window && s.renumber && s.rope && s.kind !== "mla");

function body(failureMode, positions = true) {
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
  change(state);
  if (parameter !== "failure_mode") dropUnmet(state);
  settle(state);
  VIEW.save(state);
  const manipulation = experiment.tick(counts);
  events({ parameter, value, ...(manipulation ? { manipulation } : {}) });
  drawControls();
  return render();
}

async function render() {
  const mine = ++generation;
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
  $("query").replaceChildren(queryView(step, broken ? correct.steps[t0] : null, state.logit));
  drawEquality(answer, correct, broken, renumbered);
  drawAbsorbed(answer, naive);
  $("kv-note").textContent = switched;
  $("kv-note").hidden = !switched;
  await drawMemory();
  document.querySelector("main").classList.remove("awaits-data");
  drawn();
}

// The largest difference between two decodes' outputs, position by position.
const apart = (a, b) => a.steps.map((s, i) => Math.max(...s.output.map((v, j) => Math.abs(v - b.steps[i].output[j]))));

// What holds at the current position, and over the run: a broken decode is often identical at first.
function drawEquality(answer, correct, broken, renumbered) {
  const node = $("equality");
  const difference = answer.max_difference_from_full_pass;
  node.dataset.stage = "equality";
  node.dataset.value = String(difference);
  node.classList.toggle("differs", difference > 1e-12);
  const larger = broken && answer.steps.at(-1).cache_elements > correct.steps.at(-1).cache_elements;
  if (renumbered) drawRenumbered(node, apart(answer, correct));
  else if (larger && difference <= 1e-12) {
    node.classList.add("differs");
    node.textContent = t(
      "{mode}: the same numbers as the decode done right, but its cache ends holding {broken} numbers where {right} would do.",
      {
        mode: modes.get(broken)?.name ?? broken,
        broken: whole(answer.steps.at(-1).cache_elements),
        right: whole(correct.steps.at(-1).cache_elements),
      },
    );
  } else if (difference === 0)
    node.textContent = t("Same numbers as recomputing the full causal pass: max difference 0.");
  else if (difference <= 1e-12)
    node.textContent = t(
      "Same numbers as recomputing the full causal pass, to float64 rounding: max difference {difference}.",
      { difference: difference.toExponential(1) },
    );
  else {
    const by = apart(answer, correct); // per position, against the right decode
    const here = by[state.position - 1];
    const from = by.findIndex((d) => d > 1e-12) + 1;
    const mode = modes.get(broken)?.name ?? broken;
    node.dataset.here = String(here);
    node.classList.toggle("differs", here > 1e-12);
    node.textContent = renumbers(state) // the right decode is itself renumbered: measured against it alone
      ? t(
          "{mode}: at position {position} the decode differs from the renumbered decode done right by up to {here}; it differs from position {from} on.",
          { mode, position: state.position, here: here.toPrecision(3), from },
        )
      : here > 1e-12
        ? t(
            "{mode}: at position {position} the decode differs from recomputing the full pass by up to {here}; over the run it differs from position {from} on, by up to {difference}.",
            { mode, position: state.position, here: here.toPrecision(3), from, difference: difference.toPrecision(3) },
          )
        : t(
            "{mode}: identical to recomputing the full pass at position {position}; it differs from position {from} on, by up to {difference}.",
            { mode, position: state.position, from, difference: difference.toPrecision(3) },
          );
  }
}

// StreamingLLM's renumbering: the text's numbers until the cache first drops a position, then its own.
function drawRenumbered(node, by) {
  const from = by.findIndex((d) => d > 1e-12) + 1;
  const here = by[state.position - 1];
  node.dataset.here = String(here);
  node.classList.toggle("differs", here > 1e-12);
  node.textContent =
    from === 0
      ? t(
          "Positions in the cache: no position has left the cache yet, so every key is turned at its own position in the text and the numbers are the full pass's.",
        )
      : t(
          "Positions in the cache: the same numbers as the full pass until the cache first dropped a position; from position {from} the keys are turned by their places in the cache, and here the output moves by {here}.",
          {
            from,
            here: here.toPrecision(3),
          },
        );
}

// Absorbed latent attention: what changes (K and V never formed) and what does not (the numbers).
function drawAbsorbed(answer, naive) {
  const node = $("absorbed-note");
  node.hidden = !naive;
  if (!naive) return;
  const [absorbed, plain] = state.absorbed ? [answer, naive] : [naive, answer];
  const difference = Math.max(...apart(absorbed, plain));
  node.dataset.value = String(difference);
  node.textContent = state.absorbed
    ? t(
        "Absorbed: K and V are never formed. Each query is moved into the latent space (through W_UK) and scored against the cached latents themselves; the output is read back through W_UV. The numbers equal the naive form's to within {difference}: the same products, multiplied in another order, so only float64 rounding differs.",
        { difference: difference.toExponential(1) },
      )
    : t(
        "Naive: the keys and values are rebuilt from the cached latent (through W_UK and W_UV) at every step. Tick “Absorbed” to fold W_UK into the query instead: the numbers stay equal, to within {difference}.",
        { difference: difference.toExponential(1) },
      );
}

async function drawMemory() {
  const model = models.find((m) => m.id === state.model);
  const tokens = state.context || model.context;
  $("model").value = model.id;
  // never under the learner's fingers: a redraw that lands while they type would splice its digits into theirs
  if (document.activeElement !== $("context")) $("context").value = String(tokens);
  const answer = await postJSON("/api/v1/kv-cache", { ...model.request, tokens });
  $("memory").replaceChildren(memoryView(answer, model, tokens));
}

function drawControls() {
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

function wire() {
  $("step").addEventListener("click", () =>
    update(
      (s) => {
        s.position += 1;
      },
      "position",
      state.position + 1,
      "step-decode",
    ),
  );
  $("back-step").addEventListener("click", () =>
    update(
      (s) => {
        s.position -= 1;
      },
      "position",
      state.position - 1,
      "step-decode",
    ),
  );
  $("kind").addEventListener("change", (e) =>
    update(
      (s) => {
        s.kind = e.target.value;
      },
      "kind",
      e.target.value,
      e.target.value === "mha" ? null : "switch-kind",
    ),
  );
  $("rope").addEventListener("change", (e) =>
    update(
      (s) => {
        s.rope = e.target.checked;
      },
      "rope",
      e.target.checked,
    ),
  );
  $("absorbed").addEventListener("change", (e) =>
    update(
      (s) => {
        s.absorbed = e.target.checked;
      },
      "absorbed",
      e.target.checked,
    ),
  );
  $("compare").addEventListener("change", (e) =>
    update(
      (s) => {
        s.compare = e.target.value;
      },
      "failure_mode",
      e.target.value || null,
      e.target.value ? [long(modes.get(e.target.value)) ? "long-slip" : null, "failure-mode"] : null,
    ),
  );
  $("window").addEventListener("change", (e) =>
    update(
      (s) => {
        s.window = Number(e.target.value);
      },
      "window",
      Number(e.target.value) || null,
      Number(e.target.value) ? "slide-window" : null,
    ),
  );
  $("sinks").addEventListener("change", (e) =>
    update(
      (s) => {
        s.sinks = Number(e.target.value);
      },
      "sinks",
      Number(e.target.value),
      Number(e.target.value) ? "keep-sinks" : null,
    ),
  );
  $("sink-logit").addEventListener("change", (e) =>
    update(
      (s) => {
        s.logit = e.target.checked;
      },
      "sink_logit",
      e.target.checked ? SINK_LOGITS : null,
      e.target.checked ? "sink-logit" : null,
    ),
  );
  $("renumber").addEventListener("change", (e) =>
    update(
      (s) => {
        s.renumber = e.target.checked;
      },
      "positions",
      e.target.checked ? "cache" : "original",
    ),
  );
  $("model").addEventListener("change", (e) =>
    update(
      (s) => {
        s.model = e.target.value;
        s.context = 0;
      },
      "model",
      e.target.value,
      "choose-preset",
    ),
  );
  $("context").addEventListener("change", (e) => {
    const text = e.target.value.trim();
    const tokens = Number(text);
    const valid = text !== "" && Number.isInteger(tokens) && tokens >= 1 && tokens <= 100000000;
    $("context-error").hidden = valid;
    $("context-error").textContent = valid
      ? ""
      : t(
          "A context is a whole number of tokens from 1 to 100,000,000; “{text}” is not one. The cache below is still for {tokens} tokens.",
          { text, tokens: state.context || models.find((m) => m.id === state.model).context },
        );
    e.target.setAttribute("aria-invalid", valid ? "false" : "true");
    if (valid)
      update(
        (s) => {
          s.context = tokens;
        },
        "context",
        tokens,
      );
  });
  // A link followed or a host's change: its state, settled, and only this page's keys kept.
  VIEW.onChange((changed) => {
    state = settle(changed);
    VIEW.save(state);
    drawControls();
    render();
  });
}

async function init() {
  const [kv, registry, presets] = await Promise.all([
    getJSON("/api/v1/presets/kv-cache"),
    getJSON("/api/v1/failure-modes"),
    getJSON("/api/v1/kv-cache/presets"),
  ]);
  preset = kv.request;
  models = presets.presets;
  modes = new Map(
    registry.failure_modes.filter((m) => m.engine && m.needs.some((n) => OFFERED.has(n))).map((m) => [m.id, m]),
  );
  for (const mode of modes.values())
    $("compare").append(el("option", { value: mode.id, text: mode.name, title: mode.description }));
  $("model").replaceChildren(...models.map((m) => el("option", { value: m.id, text: m.name })));
  state = settle(VIEW.load());
  VIEW.save(state);
  $("back").hidden = embedded;
  $("back").querySelector("a").href = `/lessons/${LESSON}`;
  announcer();
  wire();
  drawControls();
  reportHeight();
  await render();
  experiment.start();
}

init().catch((error) => {
  $("equality").textContent = t("Could not compute the decode: {reason}", { reason: error.message });
});
