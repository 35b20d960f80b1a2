// The workbench: the whole attention block drawn live. Every control updates the state (kept in
// the URL hash, and on this device when embedded), the API computes, the diagram redraws, and
// the change is reported (debounced) as a parameter-changed event to the API and to a host page.
// The lesson's four manipulations tick as they are done; the server completes `experiment`.

import { getJSON, postJSON, startOutbox } from "../api.js";
import { embedded, post, reportHeight } from "../embed.js";
import { parameterEvents } from "../events.js";
import { MANIPULATIONS, manipulationOf } from "../manipulations.js";
import { consistent, D_MODEL, defaults, loadState, remember, requestBody, save, STATE } from "../state.js";
import { announcer } from "../views/announce.js";
import { checklist, restoreDone, sayDone } from "../views/checklist.js";
import { diagram } from "../views/diagram.js";
import { drawn, el, math } from "../views/dom.js";
import { legend } from "../views/legend.js";
import { replay } from "../views/replay.js";
import { notATest, savedTests, savedTestsView } from "../views/saved-test.js";
import { close } from "../views/stage.js";
import { markOwners, tokenEditor } from "../views/token-editor.js";
import { connect } from "../views/wires.js";
import { t } from "../i18n.js";

const INSTANCE = "multi-head-workbench";
const LESSON = "multi-head-attention";
const STAGES = ["x", "q", "k", "v", "scores", "weights", "head-output", "concat", "wo", "output", "residual"];
const STAGE_NAMES = {
  x: "X",
  q: "Q",
  k: "K",
  v: "V",
  scores: t("the scores"),
  weights: t("the weights"),
  "head-output": t("the head outputs"),
  concat: t("the concatenation"),
  wo: "W_O",
  output: t("the output Y"),
  residual: "X + Y",
};

const $ = (id) => document.getElementById(id);
let state = loadState(embedded);
let generation = 0;
let previous = null; // the last drawn response: cells that changed since are marked
let learned = null; // the learned-looking projections (GET /api/v1/presets/workbench-learned)
let modes = new Map(); // failure mode id -> {name, description}
let menuFilled = Promise.resolve(); // the compare menu, filled from the registry once per page
let replayAt = 0;
const open = new Set(); // stages whose numbers are shown
const done = new Set(); // the lesson's manipulations done
let notCounted = false; // the last token edit was outside the teaching case: the checklist says why

const events = parameterEvents({ lesson: LESSON, instance: INSTANCE });
const emit = (parameter, data) => events({ parameter, ...data }); // debounced per parameter and manipulation

function update(change, parameter, data) {
  const before = structuredClone(state);
  change(state);
  consistent(state);
  save(state);
  if (embedded) remember(state);
  const manipulation = manipulationOf({ parameter, ...data }, before);
  const uncounted = parameter === "token" && !manipulation; // an edit outside the teaching case
  if ((manipulation && !done.has(manipulation)) || uncounted !== notCounted) {
    if (manipulation) done.add(manipulation);
    notCounted = uncounted;
    drawChecklist();
    if (manipulation) sayDone(done, MANIPULATIONS, manipulation);
  }
  // A token manipulation carries the edit itself: the server's engine judges the learner's prediction on it.
  const edit =
    parameter === "token" && manipulation
      ? { tokens_before: before.tokens, tokens: structuredClone(state.tokens), causal: state.causal }
      : {};
  emit(parameter, manipulation ? { ...data, manipulation, ...edit } : data);
  render();
}

function identity(size) {
  return Array.from({ length: size }, (_, i) => Array.from({ length: size }, (_, j) => (i === j ? 1 : 0)));
}

async function learnedProjections() {
  if (!learned) learned = (await getJSON("/api/v1/presets/workbench-learned")).request.projections;
  return learned;
}

// What the diagram draws, from one response (or comparison).
function view(response, comparison) {
  const projections = state.qkv === "learned" ? learned : {};
  const wo = state.wo === "learned" ? learned.output : identity(D_MODEL);
  const skipped = comparison && modes.get(comparison.failure_mode.id)?.step === "output"; // W_O not applied
  return {
    // the concatenation's numbers without a click where the lesson asks to inspect them
    showConcat: state.reuse || Boolean(state.compare),
    state,
    response,
    previous,
    projections,
    wo,
    open,
    picked: state.cell,
    broken: comparison ? comparison.broken : null,
    divergence: comparison ? comparison.divergence : null,
    brokenWo: skipped ? identity(D_MODEL) : wo,
    yours: state.yours,
    yoursDivergence: state.yours ? yoursDivergence(response) : null,
    onToggle: (key) => {
      if (open.has(key)) open.delete(key);
      else open.add(key);
      redraw();
    },
    pick: (h, i, j) => {
      state.cell = [h, i, j];
      replayAt = 0;
      save(state);
      redraw();
      focusReplay();
    },
  };
}

// Where a learner's own numbers (the exercise's `trace`) part from the engine's: a stage differs
// in shape or in a number (beyond float64 rounding).
function yoursDivergence(response) {
  const engine = {
    weights: response.heads.map((h) => h.weights),
    "head-output": response.heads.map((h) => h.output),
    concat: response.concat,
    output: response.output,
  };
  const differs = (s) => !same(state.yours[s], engine[s]);
  const stages = STAGES.filter((s) => s in state.yours && s in engine && differs(s));
  const headDiffers = (s, h) => !same(state.yours[s]?.[h], engine[s][h]);
  const heads = response.heads.map((_, h) => ({
    head: h,
    stages: stages.filter((s) => PER_HEAD_STAGES.includes(s) && headDiffers(s, h)),
  }));
  const first = stages[0] || null;
  const firstHead = PER_HEAD_STAGES.includes(first)
    ? (heads.find((x) => x.stages.includes(first)) || { head: null }).head
    : null;
  return { first, first_head: firstHead, stages, heads };
}

const PER_HEAD_STAGES = ["weights", "head-output"]; // what a learner's trace holds per head

// The same shape and, cell by cell, the same number (beyond float64 rounding).
function same(mine, theirs, flat = theirs.flat(2)) {
  return (
    Array.isArray(mine) &&
    String(shapeOf(mine)) === String(shapeOf(theirs)) &&
    mine.flat(2).every((v, k) => typeof v === "number" && close(v, flat[k]))
  );
}

function shapeOf(value) {
  return Array.isArray(value) ? [value.length, ...shapeOf(value[0])] : [];
}

let last = null;

// The wires are measured once a frame, when the browser lays the page out anyway: a drawing and the
// resize it causes cost one measurement, not one each inside the drawing's own task.
let wiring = 0;
function rewire() {
  cancelAnimationFrame(wiring);
  wiring = requestAnimationFrame(() => $("diagram").firstElementChild && connect($("diagram").firstElementChild));
}

function draw(response, comparison) {
  last = { response, comparison };
  const v = view(response, comparison);
  $("diagram").replaceChildren(diagram(v));
  rewire();
  const { n, d_model: dm, heads, d_head: d } = response.shape;
  $("diagram-shape").textContent = `n = ${n}, d_model = ${dm}, H = ${heads}, d_head = ${d}`;
  markOwners($("tokens").querySelector("table"), ownersOfCoordinates(response));
  $("replay-area").replaceChildren(
    state.cell
      ? replay({
          response,
          cell: state.cell,
          causal: state.causal,
          wo: v.wo,
          tokens: state.tokens,
          at: replayAt,
          onStep: (k) => {
            replayAt = k;
            redraw();
            focusReplay();
          },
          onClose: () => {
            state.cell = null;
            save(state);
            redraw();
          },
        })
      : "",
  );
  $("status").replaceChildren(...math(statusLine(response, comparison, v.yoursDivergence)));
  $("identity-note").textContent =
    state.qkv === "learned"
      ? t("Learned-looking projections: every head reads a mix of all four coordinates, as in a trained model.")
      : t(
          "Identity projections: {heads}; a trained model's learned projections mix all coordinates before the split.",
          { heads: response.heads.map(readsWhat).join(", ") },
        );
}

// "head 1 reads dimensions 1–2": what one head reads under identity projections.
function readsWhat(h) {
  const [first, last] = [h.feature_indices[0] + 1, h.feature_indices[h.feature_indices.length - 1] + 1];
  return first === last
    ? t("head {head} reads dimension {dim}", { head: h.index + 1, dim: first })
    : t("head {head} reads dimensions {first}–{last}", { head: h.index + 1, first, last });
}

function redraw() {
  if (last) draw(last.response, last.comparison);
}

function focusReplay() {
  const node = document.querySelector("[data-replay]");
  if (!node) return;
  node.focus({ preventScroll: true });
  const reduced = window.matchMedia("(prefers-reduced-motion: reduce)").matches;
  node.scrollIntoView({ block: "nearest", behavior: reduced ? "auto" : "smooth" });
}

// Which heads read each raw coordinate: under identity projections the head's own features.
function ownersOfCoordinates(response) {
  return [0, 1, 2, 3].map((d) =>
    response.heads
      .filter((h) => state.qkv === "learned" || h.feature_indices.includes(d))
      .map((h) => String(h.index))
      .join(" "),
  );
}

// The needs (GET /api/v1/failure-modes) this page meets, by its state: a mode needing only these is in its menu.
const MEETS = {
  head_slices: () => true,
  several_heads: (s) => s.heads > 1,
  grouped_heads: (s) => s.kv < s.heads,
  rope: (s) => s.rope,
  causal: (s) => s.causal,
  output_projection: (s) => s.wo === "learned",
};
// Why nothing differs, by the first need unmet.
const UNMET_SAYS = {
  causal: (name) =>
    t(
      "Nothing differs: “{name}” breaks the causal mask, and the mask is off. Turn on “Causal mask” to see what it does.",
      { name },
    ),
  output_projection: () =>
    t(
      "Nothing differs: W_O here is the identity, so skipping it changes no number. Choose a learned-looking output projection to see what stopping at the concatenation loses.",
    ),
  several_heads: (name) =>
    t(
      "Nothing differs: “{name}” computes the same numbers as the correct implementation for this configuration (with one head there is one slice and one head order).",
      { name },
    ),
  none: (name) =>
    t("Nothing differs: “{name}” computes the same numbers as the correct implementation for this configuration.", {
      name,
    }),
};

function statusLine(response, comparison, yours) {
  if (comparison) {
    const mode = modes.get(comparison.failure_mode.id) || comparison.failure_mode; // the registry's words, translated
    const { first, first_head: firstHead } = comparison.divergence;
    if (first && firstHead != null) {
      const stageOfHead = t("{stage} of head {head}", { stage: STAGE_NAMES[first], head: firstHead + 1 });
      return t(
        "Compared with “{name}” ({description}): the first stage that differs is {stage}; the stages after it that differ show the broken numbers beside the correct ones (Δ marks the cells), and a head whose numbers are the same reads “identical”.",
        { name: mode.name, description: mode.description, stage: stageOfHead },
      );
    }
    if (first) {
      return t(
        "Compared with “{name}” ({description}): the first stage that differs is {stage}; the stages after it that differ show the broken numbers beside the correct ones (Δ marks the cells).",
        { name: mode.name, description: mode.description, stage: STAGE_NAMES[first] },
      );
    }
    const missing = (mode.needs || []).find((need) => need in UNMET_SAYS && !MEETS[need](state));
    return (UNMET_SAYS[missing] || UNMET_SAYS.none)(mode.name);
  }
  if (yours) {
    return yours.first
      ? t("Your numbers first differ from the engine's at {stage} (marked “first difference”).", {
          stage: STAGE_NAMES[yours.first],
        })
      : t("Your numbers equal the engine's at every stage your function returns.");
  }
  if (state.reuse && response.shape.heads > 1) {
    return t("Broken: every head reads dimensions 1–2 (head 1's features); dimensions 3–4 are ignored.");
  }
  return "";
}

async function render() {
  const mine = ++generation;
  performance.mark("workbench-input");
  try {
    if (state.qkv === "learned" || state.wo === "learned") await learnedProjections();
    const body = requestBody(state, learned);
    const comparison = state.compare
      ? await postJSON("/api/v1/attention/compare", { ...body, failure_mode: state.compare })
      : null;
    const response = comparison ? comparison.correct : await postJSON("/api/v1/attention", body);
    if (comparison) await menuFilled; // a comparison is drawn with the registry's words and needs
    if (mine !== generation) return; // a newer edit is already on its way
    draw(response, comparison);
    previous = response;
    document.body.classList.remove("stale");
    performance.measure("workbench-render", "workbench-input"); // User Timing: DevTools, the benchmark and the tests read it
  } catch (error) {
    if (mine !== generation) return;
    document.body.classList.add("stale");
    $("status").textContent = t(
      "Could not compute ({reason}). The numbers shown are from before your last change; they update when the server answers.",
      { reason: error.message },
    );
  }
  document.documentElement.classList.add("drawn");
  await menuFilled; // ready means every control is usable, the compare menu included
  drawn();
}

function drawControls() {
  $("tokens").replaceChildren(
    tokenEditor(state.tokens, (k, d, v) =>
      update(
        (s) => {
          s.tokens[k][d] = v;
        },
        "token",
        { token: k + 1, dimension: d + 1, value: v },
      ),
    ),
  );
  $("causal").checked = state.causal;
  $("reuse").checked = state.reuse;
  $("compare").value = state.compare;
  $("heads").value = String(state.heads);
  $("kv").replaceChildren(
    ...[1, 2, 4]
      .filter((k) => state.heads % k === 0)
      .map((k) =>
        el("option", {
          value: String(k),
          text:
            k === state.heads
              ? t("{count} (one per head)", { count: k })
              : k === 1
                ? t("1 (multi-query)")
                : t("{count} (grouped-query)", { count: k }),
        }),
      ),
  );
  $("kv").value = String(state.kv);
  $("rope").value = state.rope;
  $("rope").disabled = state.heads === 4;
  $("base").value = String(state.base);
  $("base").disabled = !state.rope;
  $("qkv").value = state.qkv;
  $("wo").value = state.wo;
  $("open-all").setAttribute("aria-pressed", String(everyStage().every((k) => open.has(k))));
  $("controls-note").textContent = [
    state.heads === 4 ? t("RoPE needs an even d_head: with 4 heads d_head is 1.") : "",
    state.rope === "half" ? t("Half: each coordinate pairs with the one d_head/2 after it (rotate half).") : "",
    state.rope === "interleaved" ? t("Interleaved: adjacent coordinates pair up (1 with 2, 3 with 4).") : "",
    state.kv < state.heads
      ? t("{count} heads share each K/V head: each lane says whose keys and values it reads.", {
          count: state.heads / state.kv,
        })
      : "",
    state.rope && state.heads === 2
      ? t(
          "With d_head 2 each head has one pair, rotated by position × 1 radian whatever the base: choose 1 head to see the base and the two pairings differ.",
        )
      : "",
  ]
    .filter(Boolean)
    .join(" ");
}

// "Save as a test": the engine's numbers for this case, with the broken-mode toggles off.
async function saveAsTest() {
  const why = notATest(state);
  $("saved-test").hidden = false;
  if (why) {
    $("saved-test").replaceChildren(
      el("p", { class: "note", text: t("{why} Switch those off to save the case as a test.", { why }) }),
    );
    return;
  }
  if (state.wo === "learned") await learnedProjections();
  const plain = { ...state, reuse: false, compare: "" };
  const correct = await postJSON("/api/v1/attention", requestBody(plain, learned));
  const wo = state.wo === "learned" ? learned.output : null;
  $("saved-test").replaceChildren(savedTestsView(savedTests({ ...plain, wo }, correct)));
}

const everyStage = () => [
  "projections",
  "concat",
  "wo",
  "output",
  "residual",
  ...Array.from({ length: state.heads }, (_, h) =>
    ["q", "k", "v", "scores", "head-output"].map((s) => `${s}:${h}`),
  ).flat(),
];

function drawChecklist() {
  $("checklist").replaceChildren(...checklist(done, MANIPULATIONS));
  // the note goes where the edit happened, under the tokens, in view of the learner who typed
  document.querySelector("[data-note=not-counted]")?.remove();
  if (notCounted) $("tokens").after(notCountedNote());
}

// Why a token edit did not tick anything, under the tokens just edited: the lesson's claim (one
// head moves) holds in its teaching case only, and one click returns there, the tokens kept.
function notCountedNote() {
  const back = el("button", { type: "button", class: "secondary", text: t("Back to the teaching case") });
  back.addEventListener("click", () => {
    Object.assign(state, { heads: 2, kv: 2, qkv: "identity", reuse: false, cell: null });
    consistent(state);
    save(state);
    if (embedded) remember(state);
    notCounted = false;
    drawControls();
    drawChecklist();
    render();
  });
  return el(
    "p",
    { class: "note", role: "status", dataset: { note: "not-counted" } },
    t(
      "This edit does not count towards the experiment: token edits count in the lesson's teaching case (two heads, identity Q, K, V projections, no reuse), where changing dimensions 3–4 moves only head 2.",
    ),
    " ",
    back,
  );
}

async function fillComparisons(select) {
  // Names come from the one registry the engine, the checker and the dashboard share.
  const { failure_modes: all } = await getJSON("/api/v1/failure-modes");
  modes = new Map(all.filter((m) => m.engine && m.needs.every((n) => n in MEETS)).map((m) => [m.id, m]));
  for (const mode of modes.values())
    select.append(el("option", { value: mode.id, text: mode.name, title: mode.description }));
  select.value = state.compare;
}

function on(id, parameter, change) {
  $(id).addEventListener("change", (e) => {
    const value = e.target.type === "checkbox" ? e.target.checked : e.target.value;
    update((s) => change(s, value), parameter, { value });
    drawControls();
  });
}

function init() {
  menuFilled = fillComparisons($("compare")).catch(() => null); // offline: the comparison waits for the server anyway
  $("legend").replaceChildren(legend({ signed: true }));
  // The wires follow the boxes: a new width (a turned phone, a resized window) redraws them.
  new ResizeObserver(rewire).observe($("diagram"));
  $("causal").addEventListener("change", (e) =>
    update(
      (s) => {
        s.causal = e.target.checked;
      },
      "causal",
      { value: e.target.checked },
    ),
  );
  $("reuse").addEventListener("change", (e) => {
    update(
      (s) => {
        s.reuse = e.target.checked;
        if (s.reuse) s.compare = "";
      },
      "reuse_first_slice",
      { value: e.target.checked },
    );
    drawControls();
  });
  $("compare").addEventListener("change", (e) => {
    update(
      (s) => {
        s.compare = e.target.value;
        if (s.compare) s.reuse = false;
      },
      "failure_mode",
      { value: e.target.value || null },
    );
    drawControls();
  });
  on("heads", "heads", (s, v) => {
    s.heads = Number(v);
    s.kv = s.heads;
    s.cell = null;
  });
  on("kv", "kv_heads", (s, v) => {
    s.kv = Number(v);
  });
  on("rope", "rope", (s, v) => {
    s.rope = v;
  });
  on("qkv", "projections", (s, v) => {
    s.qkv = v;
  });
  on("wo", "output_projection", (s, v) => {
    s.wo = v;
  });
  $("base").addEventListener("change", (e) => {
    const base = Number(e.target.value);
    if (Number.isFinite(base) && base > 1)
      update(
        (s) => {
          s.base = base;
        },
        "rope_base",
        { value: base },
      );
  });
  $("save-test").addEventListener("click", () =>
    saveAsTest().catch((error) => {
      $("saved-test").replaceChildren(
        el("p", { class: "error", text: t("Could not compute the case: {reason}", { reason: error.message }) }),
      );
    }),
  );
  $("reset").addEventListener("click", () => {
    update(
      (s) => {
        s.tokens = defaults().tokens;
      },
      "reset",
      {},
    );
    drawControls();
  });
  $("open-all").addEventListener("click", () => {
    const keys = everyStage();
    if (keys.every((k) => open.has(k))) open.clear();
    else for (const k of keys) open.add(k); // some open: open the rest
    drawControls();
    redraw();
  });
  $("diagram").addEventListener("pointerover", (e) => light(e.target));
  $("diagram").addEventListener("focusin", (e) => light(e.target));
  $("diagram").addEventListener("pointerleave", () => {
    delete document.querySelector("main").dataset.lit;
    unlink();
  });
  $("diagram").addEventListener("focusout", () => {
    delete document.querySelector("main").dataset.lit;
    unlink();
  });
  STATE.onChange((changed) => {
    state = changed;
    if (embedded) {
      remember(state);
      post({ type: "state" });
    }
    drawControls();
    render();
  });
  backToLesson();
  save(state);
  if (embedded) post({ type: "state" }); // the host's links and commands follow the restored state
  announcer();
  drawControls();
  reportHeight();
  // Embedded: whenever the learner works a control, ask the host to show the inputs and weights together,
  // once a press ends (scrolled under a pressed button, the click would miss).
  let pressed = false,
    wanted = false;
  const show = () => {
    wanted = pressed;
    if (wanted) return;
    const top = $("tokens").getBoundingClientRect().top;
    const bottom = Math.max(
      ...[...document.querySelectorAll(".weights-stage")].map((n) => n.getBoundingClientRect().bottom),
    );
    post({ type: "show", top: top + window.scrollY, bottom: bottom + window.scrollY });
  };
  addEventListener(
    "pointerdown",
    () => {
      pressed = true;
    },
    true,
  );
  for (const end of ["pointerup", "pointercancel"])
    addEventListener(
      end,
      () => {
        pressed = false;
        if (wanted) show();
      },
      true,
    );
  document.addEventListener("focusin", show);
  render();
  startOutbox();
  restoreDone(done, { lesson: LESSON, instance: INSTANCE }, drawChecklist);
}

// Hovering or focusing one head lights it everywhere: its coordinates, lane, concat columns, W_O rows.
function light(target) {
  const owner = target.closest?.("[data-owner]");
  const main = document.querySelector("main");
  if (owner && /^\d$/.test(owner.dataset.owner)) main.dataset.lit = owner.dataset.owner;
  link(target);
}

// A weight (head h, query i, key j) and what it came from and goes to: query row i of that head's
// Q, key row j of its K, the V row j it mixes, the head-output row i it feeds; each marked
// data-linked (their stages too, so a folded stage shows it). Leaving the cell clears them.
function link(target) {
  unlink();
  const cell = target.closest?.('[data-stage="weights"] [data-variant="main"] td[data-head][data-row][data-col]');
  if (!cell) return;
  const { head, row, col } = cell.dataset;
  const rows = [
    ["q", row],
    ["k", col],
    ["v", col],
    ["head-output", row],
  ];
  for (const [stageName, r] of rows) {
    const stage = document.querySelector(`[data-stage="${stageName}"][data-head="${head}"]`);
    if (!stage) continue;
    stage.dataset.linked = "true";
    for (const c of stage.querySelectorAll(`[data-variant="main"] [data-row="${r}"]`)) c.dataset.linked = "true";
  }
  cell.dataset.linked = "true";
}

// Opened from a lesson (a failure mode's link in a new tab, or the link the exercise's trace prints,
// which names its lesson): a visible way back to it.
function backToLesson() {
  if (embedded) return;
  const from = document.referrer ? new URL(document.referrer) : null;
  const lesson = state.lesson
    ? `/lessons/${state.lesson}`
    : from && from.origin === location.origin && from.pathname.startsWith("/lessons/")
      ? from.pathname
      : null;
  if (!lesson) return;
  const back = el("a", { href: lesson, id: "back-to-lesson", class: "back-link", text: t("← Back to the lesson") });
  document.querySelector("main").prepend(back);
}

function unlink() {
  for (const node of document.querySelectorAll("[data-linked]")) delete node.dataset.linked;
}

init();
