// @ts-check
// The workbench: the whole attention block drawn live. Every control updates the state (kept in
// the URL hash, and on this device when embedded), the API computes, the diagram redraws, and
// the change is reported (debounced) as a parameter-changed event to the API and to a host page.
// The lesson's four manipulations tick as they are done; the server completes `experiment`.

import { getJSON, postJSON } from "../api.js";
import { embedded, post } from "../embed.js";
import { parameterEvents } from "../events.js";
import { t } from "../i18n.js";
import { MANIPULATIONS, manipulationOf } from "../manipulations.js";
import { $, startPage } from "../shell.js";
import { consistent, D_MODEL, defaults, loadState, remember, requestBody, STATE, save } from "../state.js";
import { diagram } from "../views/diagram.js";
import { drawn, el, math } from "../views/dom.js";
import { light, unlight } from "../views/highlight.js";
import { legend } from "../views/legend.js";
import { replay } from "../views/replay.js";
import { notATest, savedTests, savedTestsView } from "../views/saved-test.js";
import { markOwners } from "../views/token-editor.js";
import { drawControls, everyStage, wireControls } from "../views/workbench-controls.js";
import { connect } from "../views/wires.js";
import { MEETS, readsWhat, statusLine, yoursDivergence } from "../views/workbench-status.js";

const INSTANCE = "multi-head-workbench";
const LESSON = "multi-head-attention";

// The page's runtime, beside its configuration (`state`, kept in the hash by STATE: state.js).
const page = {
  state: /** @type {any} */ (loadState(embedded)),
  generation: 0, // the latest render asked: an older answer is not drawn
  previous: null, // the last drawn response: cells that changed since are marked
  last: null, // the last drawn response and comparison: a redraw draws them again
  learned: null, // the learned-looking projections (GET /api/v1/presets/workbench-learned)
  modes: new Map(), // failure mode id -> the registry's entry, in the page's language
  menuFilled: Promise.resolve(), // the compare menu, filled from the registry once per page
  replayAt: 0, // the replay's step
  open: new Set(), // stages whose numbers are shown
  notCounted: false, // the last token edit was outside the teaching case: the checklist says why
  wiring: 0, // the animation frame the wires are measured in
};
const shell = startPage({ lesson: LESSON, instance: INSTANCE, manipulations: MANIPULATIONS, onDraw: drawNotCounted });
const events = parameterEvents({ lesson: LESSON, instance: INSTANCE });
const emit = (parameter, data) => events({ parameter, ...data }); // debounced per parameter and manipulation

function update(change, parameter, data) {
  const before = structuredClone(page.state);
  change(page.state);
  keep();
  const manipulation = manipulationOf({ parameter, ...data }, before);
  const uncounted = parameter === "token" && !manipulation; // an edit outside the teaching case
  if (uncounted !== page.notCounted) {
    page.notCounted = uncounted;
    shell.experiment.draw();
  }
  shell.experiment.tick(manipulation);
  // A token manipulation carries the edit itself: the server's engine judges the learner's prediction on it.
  const edit =
    parameter === "token" && manipulation
      ? { tokens_before: before.tokens, tokens: structuredClone(page.state.tokens), causal: page.state.causal }
      : {};
  emit(parameter, manipulation ? { ...data, manipulation, ...edit } : data);
  render();
}

// The state settled, in the hash, and (embedded) on this device.
function keep() {
  consistent(page.state);
  save(page.state);
  if (embedded) remember(page.state);
}

function identity(size) {
  return Array.from({ length: size }, (_, i) => Array.from({ length: size }, (_, j) => (i === j ? 1 : 0)));
}

async function learnedProjections() {
  if (!page.learned) page.learned = (await getJSON("/api/v1/presets/workbench-learned")).request.projections;
  return page.learned;
}

// What the diagram draws, from one response (or comparison).
function view(response, comparison) {
  const { state, learned } = page;
  const projections = state.qkv === "learned" ? learned : {};
  const wo = state.wo === "learned" ? learned.output : identity(D_MODEL);
  const skipped = comparison && page.modes.get(comparison.failure_mode.id)?.step === "output"; // W_O not applied
  return {
    // the concatenation's numbers without a click where the lesson asks to inspect them
    showConcat: state.reuse || Boolean(state.compare),
    state,
    response,
    previous: page.previous,
    projections,
    wo,
    open: page.open,
    picked: state.cell,
    broken: comparison ? comparison.broken : null,
    divergence: comparison ? comparison.divergence : null,
    brokenWo: skipped ? identity(D_MODEL) : wo,
    yours: state.yours,
    yoursDivergence: state.yours ? yoursDivergence(response, state.yours) : null,
    onToggle: (key) => {
      if (page.open.has(key)) page.open.delete(key);
      else page.open.add(key);
      redraw();
    },
    pick: (h, i, j) => {
      state.cell = [h, i, j];
      page.replayAt = 0;
      save(state);
      redraw();
      focusReplay();
    },
  };
}

// The wires are measured once a frame, when the browser lays the page out anyway: a drawing and the
// resize it causes cost one measurement, not one each inside the drawing's own task.
function rewire() {
  cancelAnimationFrame(page.wiring);
  page.wiring = requestAnimationFrame(() => $("diagram").firstElementChild && connect($("diagram").firstElementChild));
}

function draw(response, comparison) {
  const state = page.state;
  page.last = { response, comparison };
  const v = view(response, comparison);
  $("diagram").replaceChildren(diagram(v));
  rewire();
  const { n, d_model: dm, heads, d_head: d } = response.shape;
  $("diagram-shape").textContent = `n = ${n}, d_model = ${dm}, H = ${heads}, d_head = ${d}`;
  markOwners($("tokens").querySelector("table"), ownersOfCoordinates(response));
  $("replay-area").replaceChildren(state.cell ? replayOf(response, v.wo) : "");
  $("status").replaceChildren(...math(statusLine(response, comparison, v.yoursDivergence, state, page.modes)));
  $("identity-note").textContent =
    state.qkv === "learned"
      ? t("Learned-looking projections: every head reads a mix of all four coordinates, as in a trained model.")
      : t(
          "Identity projections: {heads}; a trained model's learned projections mix all coordinates before the split.",
          { heads: response.heads.map(readsWhat).join(", ") },
        );
}

// The one-cell replay of the picked weight, step by step.
function replayOf(response, wo) {
  const state = page.state;
  return replay({
    response,
    cell: state.cell,
    causal: state.causal,
    wo,
    tokens: state.tokens,
    at: page.replayAt,
    onStep: (k) => {
      page.replayAt = k;
      redraw();
      focusReplay();
    },
    onClose: () => {
      state.cell = null;
      save(state);
      redraw();
    },
  });
}

function redraw() {
  if (page.last) draw(page.last.response, page.last.comparison);
}

function focusReplay() {
  const node = document.querySelector("[data-replay]");
  if (!(node instanceof HTMLElement)) return;
  node.focus({ preventScroll: true });
  const reduced = window.matchMedia("(prefers-reduced-motion: reduce)").matches;
  node.scrollIntoView({ block: "nearest", behavior: reduced ? "auto" : "smooth" });
}

// Which heads read each raw coordinate: under identity projections the head's own features.
function ownersOfCoordinates(response) {
  return [0, 1, 2, 3].map((d) =>
    response.heads
      .filter((h) => page.state.qkv === "learned" || h.feature_indices.includes(d))
      .map((h) => String(h.index))
      .join(" "),
  );
}

async function render() {
  const mine = ++page.generation;
  performance.mark("workbench-input");
  try {
    const state = page.state;
    if (state.qkv === "learned" || state.wo === "learned") await learnedProjections();
    const body = requestBody(state, page.learned);
    const comparison = state.compare
      ? await postJSON("/api/v1/attention/compare", { ...body, failure_mode: state.compare })
      : null;
    const response = comparison ? comparison.correct : await postJSON("/api/v1/attention", body);
    if (comparison) await page.menuFilled; // a comparison is drawn with the registry's words and needs
    if (mine !== page.generation) return; // a newer edit is already on its way
    draw(response, comparison);
    page.previous = response;
    document.body.classList.remove("stale");
    performance.measure("workbench-render", "workbench-input"); // User Timing: DevTools, the benchmark and the tests read it
  } catch (error) {
    if (mine !== page.generation) return;
    document.body.classList.add("stale");
    $("status").textContent = t(
      "Could not compute ({reason}). The numbers shown are from before your last change; they update when the server answers.",
      { reason: error.message },
    );
  }
  document.documentElement.classList.add("drawn");
  await page.menuFilled; // ready means every control is usable, the compare menu included
  drawn();
}

// "Save as a test": the engine's numbers for this case, with the broken-mode toggles off.
async function saveAsTest() {
  const state = page.state;
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
  const correct = await postJSON("/api/v1/attention", requestBody(plain, page.learned));
  const wo = state.wo === "learned" ? page.learned.output : null;
  $("saved-test").replaceChildren(savedTestsView(savedTests({ ...plain, wo }, correct)));
}

// Once the checklist is drawn: why a token edit did not tick anything, under the tokens just edited (in
// view of the learner who typed). The lesson's claim (one head moves) holds in its teaching case only,
// and one click returns there, the tokens kept.
function drawNotCounted() {
  document.querySelector("[data-note=not-counted]")?.remove();
  if (!page.notCounted) return;
  const back = el("button", { type: "button", class: "secondary", text: t("Back to the teaching case") });
  back.addEventListener("click", () => {
    Object.assign(page.state, { heads: 2, kv: 2, qkv: "identity", reuse: false, cell: null });
    keep();
    page.notCounted = false;
    drawControls(page, update);
    shell.experiment.draw();
    render();
  });
  const note = t(
    "This edit does not count towards the experiment: token edits count in the lesson's teaching case (two heads, identity Q, K, V projections, no reuse), where changing dimensions 3–4 moves only head 2.",
  );
  $("tokens").after(el("p", { class: "note", role: "status", dataset: { note: "not-counted" } }, note, " ", back));
}

async function fillComparisons(select) {
  // Names come from the one registry the engine, the checker and the dashboard share.
  const { failure_modes: all } = await getJSON("/api/v1/failure-modes");
  page.modes = new Map(all.filter((m) => m.engine && m.needs.every((n) => n in MEETS)).map((m) => [m.id, m]));
  for (const mode of page.modes.values())
    select.append(el("option", { value: mode.id, text: mode.name, title: mode.description }));
  select.value = page.state.compare;
}

function wireActions() {
  $("save-test").addEventListener("click", () =>
    saveAsTest().catch((error) => {
      $("saved-test").replaceChildren(
        el("p", { class: "error", text: t("Could not compute the case: {reason}", { reason: error.message }) }),
      );
    }),
  );
  $("reset").addEventListener("click", () => {
    update((s) => Object.assign(s, { tokens: defaults().tokens }), "reset", {});
    drawControls(page, update);
  });
  $("open-all").addEventListener("click", () => {
    const keys = everyStage(page.state.heads);
    if (keys.every((k) => page.open.has(k))) page.open.clear();
    else for (const k of keys) page.open.add(k); // some open: open the rest
    drawControls(page, update);
    redraw();
  });
  for (const kind of ["pointerover", "focusin"]) $("diagram").addEventListener(kind, (e) => light(e.target));
  for (const kind of ["pointerleave", "focusout"]) $("diagram").addEventListener(kind, unlight);
}

// Embedded: whenever the learner works a control, ask the host to show the inputs and weights together,
// once a press ends (scrolled under a pressed button, the click would miss).
function showWhatChanged() {
  let pressed = false;
  let wanted = false;
  const show = () => {
    wanted = pressed;
    if (wanted) return;
    const top = $("tokens").getBoundingClientRect().top;
    const stages = [...document.querySelectorAll(".weights-stage")];
    const bottom = Math.max(...stages.map((n) => n.getBoundingClientRect().bottom));
    post({ type: "show", top: top + window.scrollY, bottom: bottom + window.scrollY });
  };
  const press = (down) => () => {
    pressed = down;
    if (!down && wanted) show();
  };
  addEventListener("pointerdown", press(true), true);
  for (const end of ["pointerup", "pointercancel"]) addEventListener(end, press(false), true);
  document.addEventListener("focusin", show);
}

// Opened from a lesson (a failure mode's link in a new tab, or the link the exercise's trace prints,
// which names its lesson): a visible way back to it.
function backToLesson() {
  if (embedded) return;
  const from = document.referrer ? new URL(document.referrer) : null;
  const lesson = page.state.lesson
    ? `/lessons/${page.state.lesson}`
    : from && from.origin === location.origin && from.pathname.startsWith("/lessons/")
      ? from.pathname
      : null;
  if (!lesson) return;
  const back = el("a", { href: lesson, id: "back-to-lesson", class: "back-link", text: t("← Back to the lesson") });
  document.querySelector("main").prepend(back);
}

function init() {
  page.menuFilled = fillComparisons($("compare")).catch(() => null); // offline: the comparison waits for the server
  $("legend").replaceChildren(legend({ signed: true }));
  // The wires follow the boxes: a new width (a turned phone, a resized window) redraws them.
  new ResizeObserver(rewire).observe($("diagram"));
  wireControls(update, () => drawControls(page, update));
  wireActions();
  STATE.onChange((changed) => {
    page.state = changed;
    if (embedded) {
      remember(page.state);
      post({ type: "state" });
    }
    drawControls(page, update);
    render();
  });
  backToLesson();
  save(page.state);
  if (embedded) post({ type: "state" }); // the host's links and commands follow the restored state
  drawControls(page, update);
  showWhatChanged();
  render();
  shell.drawn();
}

init();
