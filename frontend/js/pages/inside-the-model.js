// @ts-check
// Inside the trained model: the byte model (content/models/bytes-2l-attn) read by the logit lens at every
// stream and position (POST /api/v1/models/{id}/lens), and a clean text patched into a corrupted one cell by
// cell, each head's output or each stream (POST /api/v1/models/{id}/patch), the exact effects beside
// attribution patching's estimates; a pitfall from the registry shown beside the right computation with
// where it first parts. The view lives in the URL hash; the lesson's four manipulations tick as they are
// done and are reported as parameter-changed events.

import { getJSON, postJSON } from "../api.js";
import { parameterEvents } from "../events.js";
import { HashState } from "../hash-state.js";
import { N_, sentences, t } from "../i18n.js";
import { $, backLink, FROM_LESSON, startPage } from "../shell.js";
import { drawn, el, fmt } from "../views/dom.js";
import { labelOf } from "../views/trained-heads.js";
import { effectGrid, headName, headShort, lensGrid, streamName, streamRow } from "../views/inside-views.js";

const LESSON = "inside-the-model";
const INSTANCE = "inside-the-model-explorable";
const MODEL = "/api/v1/models/bytes-2l-attn";
const MANIPULATIONS = [
  { id: "corrupt", text: N_("Change the corrupted text: see which cells carry the difference now.") },
  { id: "pick-cell", text: N_("Choose a cell: set its exact effect beside its estimate.") },
  { id: "read-head", text: N_("Read one head's own write through the lens.") },
  { id: "pitfall", text: N_("Choose a pitfall: see where it first parts from the right computation.") },
];
// The induction example: a random string typed twice, one byte of its first copy changed in the corrupted run.
const EXAMPLE = { clean: "q8Lm3Zk7q8Lm3", corrupted: "q8Lm3Yk7q8Lm3" };
const WHY = {
  saturated_softmax: N_(
    "an attention weight moves by more than half between the runs: the softmax saturates, and the slope at the corrupted run does not carry that far",
  ),
  nonlinear: N_("the estimate recovers less than half of the effect: the norms and the layers compound"),
};
const encoder = new TextEncoder();
const fits = (text) => encoder.encode(text).length >= 1 && encoder.encode(text).length <= 64;

const page = {
  state: /** @type {any} */ (null),
  model: /** @type {any} */ (null), // GET /api/v1/models' byte model: layers, heads, labels
  modes: new Map(), // the lens's, the patch's and the gradient's pitfalls, from the registry
  patch: /** @type {any} */ (null), // the last patch answer drawn
  tokens: /** @type {any[]} */ ([]), // the clean text's bytes, as the lens read them
  generation: 0,
};
const shell = startPage({ lesson: LESSON, instance: INSTANCE, manipulations: MANIPULATIONS });
const events = parameterEvents({ lesson: LESSON, instance: INSTANCE });

const VIEW = new HashState(
  [
    { name: "clean", type: "string", default: EXAMPLE.clean, kept: true, check: fits },
    { name: "corrupted", type: "string", default: EXAMPLE.corrupted, kept: true, check: fits },
    { name: "read", type: "string", default: "", check: (v) => v === "" || /^\d+\.\d+$/.test(v) },
    { name: "component", type: "string", default: "head_output", values: ["head_output", "residual"] },
    { name: "pitfall", type: "string", default: "", check: (v) => v === "" || page.modes.has(v) },
    { name: "cell", type: "string", default: "", check: (v) => v === "" || /^\d+(\.\d+){1,2}$/.test(v) },
    FROM_LESSON,
  ],
  { keep: "inside-the-model" },
);

/** The metric: z_a − z_b at the last position, a the clean byte and b the corrupted one where they first differ. */
function metricOf(s) {
  const clean = encoder.encode(s.clean);
  const corrupted = encoder.encode(s.corrupted);
  const at = clean.findIndex((b, i) => b !== corrupted[i]);
  return at < 0 ? null : { at, bytes: [clean[at], corrupted[at]] };
}

function update(change, parameter, value, manipulation) {
  change(page.state);
  VIEW.settle(page.state);
  VIEW.save(page.state);
  shell.experiment.tick(manipulation);
  events({ parameter, value, ...(manipulation ? { manipulation } : {}) });
  drawControls();
  return render();
}

async function render() {
  const mine = ++page.generation;
  const s = page.state;
  const metric = metricOf(s);
  const slip = page.modes.get(s.pitfall);
  const lensSlip = slip?.step === "lens" ? { failure_mode: s.pitfall } : {};
  const patchSlip = slip && slip.step !== "lens" ? { failure_mode: s.pitfall } : {};
  const sameLength = encoder.encode(s.clean).length === encoder.encode(s.corrupted).length;
  const asked = Promise.all([
    postJSON(`${MODEL}/lens`, { text: s.clean, top: 3, ...lensSlip }),
    metric && sameLength
      ? postJSON(`${MODEL}/patch`, {
          clean: s.clean,
          corrupted: s.corrupted,
          metric: { kind: "logit_difference", bytes: metric.bytes },
          component: s.component,
          estimate: true,
          ...patchSlip,
        })
      : null,
  ]);
  const [lens, patch] = await asked.catch((error) => {
    $("in-note").hidden = false;
    $("in-note").textContent = t("Could not compute: {reason}", { reason: error.message });
    return [null, null];
  });
  if (mine !== page.generation || !lens) return;
  page.patch = patch;
  page.tokens = lens.tokens;
  drawLens(lens);
  drawNote(metric, sameLength);
  drawPatches(patch);
  drawCell();
  document.querySelector("main")?.classList.remove("awaits-data");
  drawn();
}

function drawNote(metric, sameLength) {
  const note = !sameLength
    ? t("The two texts must be as long in bytes: a patch takes position p of one into position p of the other.")
    : !metric
      ? t("The two texts are identical: every patch changes nothing, every effect is exactly 0.")
      : "";
  $("in-note").hidden = !note;
  $("in-note").textContent = note;
  if (!metric || !sameLength) {
    $("metric").textContent = "";
    $("patches").replaceChildren();
    $("patch-status").textContent = "";
  }
}

function drawLens(lens) {
  const s = page.state;
  const last = lens.layers.length - 1;
  const [layer, head] = s.read ? s.read.split(".").map(Number) : [null, null];
  const chosen = lens.heads.find((h) => h.layer === layer && h.head === head);
  const rows = chosen
    ? [
        {
          name: headName(layer, head),
          short: headShort(layer, head),
          note: labelOf(chosen),
          layer: 0,
          positions: chosen.positions,
        },
      ]
    : lens.layers.map((l) => ({ ...streamRow(l.layer, last), layer: l.layer, positions: l.positions }));
  const title = chosen
    ? t("What {head}'s own write says, read through the lens", { head: headName(layer, head) })
    : t("The logit lens of “{text}”", { text: s.clean });
  const slip = page.modes.get(s.pitfall);
  const differs = lens.first_difference ?? null;
  const shownTitle = slip?.step === "lens" ? t("{title}, as “{mode}” reads it", { title, mode: slip.name }) : title;
  $("lens").replaceChildren(lensGrid({ rows, tokens: lens.tokens, title: shownTitle, stage: "lens", differs }));
  const status = $("lens-status");
  if (slip?.step === "lens" && differs) {
    status.dataset.first = `${differs.layer}.${differs.position}`;
    status.textContent = t(
      "“{mode}” first parts from the right lens in the row “{stream}”, position {position}: the right lens says {right} ({p}), the pitfall {broken} ({q}).",
      {
        mode: slip.name,
        stream: streamName(differs.layer, last),
        position: differs.position + 1,
        right: differs.right.top[0].text,
        p: fmt(differs.right.top[0].probability),
        broken: differs.broken.top[0].text,
        q: fmt(differs.broken.top[0].probability),
      },
    );
  } else {
    delete status.dataset.first;
    status.textContent = slip
      ? ""
      : t("Every stream read as the model reads its last: LayerNorm recomputed on that stream, then W_U.");
  }
}

/** The grid's rows: each head by layer, or each stream (0: the embedding). */
function rowsOf(component) {
  const { layers, heads } = page.model;
  if (component === "residual")
    return Array.from({ length: layers + 1 }, (_, l) => ({ ...streamRow(l, layers), index: [l] }));
  return Array.from({ length: layers * heads }, (_, k) => {
    const [l, h] = [Math.floor(k / heads), k % heads];
    return { name: headName(l, h), short: headShort(l, h), note: labelOf(page.model.layer_heads[l][h]), index: [l, h] };
  });
}

function drawPatches(patch) {
  if (!patch) return;
  const s = page.state;
  const whole = patch.clean.metric - patch.corrupted.metric;
  const metric = metricOf(s);
  const [a, b] = metric.bytes.map((byte) => String.fromCharCode(byte));
  $("metric").textContent = t(
    "Metric: the logit of {a} minus the logit of {b} at the last position (they first differ at position {position}): clean {clean}, corrupted {corrupted}.",
    { a, b, position: metric.at + 1, clean: fmt(patch.clean.metric, 3), corrupted: fmt(patch.corrupted.metric, 3) },
  );
  const slip = page.modes.get(s.pitfall);
  const right = patch.correct ?? patch;
  // the flags are of the run computed: the right one's without a pitfall, else the pitfall's own estimate's
  const flags = new Map(patch.flagged.map((f) => [f.cell.join("."), f.why]));
  const differs = patch.first_difference?.cell.join(".") ?? "";
  const grid = (values, title, stage, marked = "") =>
    effectGrid({
      values,
      rows: rowsOf(s.component),
      tokens: page.tokens,
      title,
      stage,
      whole,
      flagged: (stage === "estimate" && !slip) || (stage === "broken" && slip?.step === "gradient") ? flags : new Map(),
      picked: s.cell,
      differs: marked,
      pick,
    });
  const panels = [
    grid(right.effect, t("Exact effect of each patch"), "effect"),
    grid(right.estimate, t("Attribution patching's estimate"), "estimate"),
  ];
  if (slip) {
    const what = patch.first_difference?.what ?? (slip.step === "gradient" ? "estimate" : "effect");
    const values = what === "estimate" ? patch.estimate : patch.effect;
    panels.push(grid(values, t("As “{mode}” computes it", { mode: slip.name }), "broken", differs));
  }
  $("patches").replaceChildren(...panels.map((p) => el("div", { class: "in-panel" }, p)));
  // on a narrow screen each grid opens at its end, where the metric is read (the row names stay in view)
  for (const region of $("patches").querySelectorAll(".scroll-region")) region.scrollLeft = region.scrollWidth;
  drawPatchStatus(patch, slip, whole);
}

function drawPatchStatus(patch, slip, whole) {
  const status = $("patch-status");
  const best = largest(patch.correct?.effect ?? patch.effect);
  const name = cellName(best.cell);
  let said = t("The largest effect: {cell}, {effect} of the {whole} between the runs.", {
    cell: name,
    effect: fmt(best.value, 3),
    whole: fmt(whole, 3),
  });
  status.dataset.largest = best.cell.join(".");
  if (slip && patch.first_difference) {
    const where = cellName(patch.first_difference.cell);
    said = t("“{mode}” first parts from the right computation at {cell}.", { mode: slip.name, cell: where }).concat(
      " ",
      said,
    );
    status.dataset.first = patch.first_difference.cell.join(".");
  } else delete status.dataset.first;
  status.textContent = said;
}

function largest(grid) {
  let best = { value: -Infinity, cell: /** @type {number[]} */ ([]) };
  const walk = (v, at) => {
    if (Array.isArray(v)) {
      for (const [i, x] of v.entries()) walk(x, [...at, i]);
    } else if (Math.abs(v) > Math.abs(best.value) || best.cell.length === 0) best = { value: v, cell: at };
  };
  walk(grid, []);
  return best;
}

function cellName(cell) {
  const position = cell[cell.length - 1] + 1;
  const where = cell.length === 3 ? headName(cell[0], cell[1]) : streamName(cell[0], page.model.layers);
  return t("{component} at position {position}", { component: where, position });
}

function pick(cell) {
  update(
    (s) => {
      s.cell = cell.join(".");
    },
    "patch_cell",
    cell.join("."),
    "pick-cell",
  );
}

/** The picked cell in words: its patched metric, its effect and the estimate beside it, and why it is flagged. */
function drawCell() {
  const node = $("cell");
  const patch = page.patch;
  const cell = page.state.cell.split(".").map(Number);
  const at = (grid) => cell.reduce((v, i) => v?.[i], grid);
  const effect = patch && page.state.cell ? at(patch.correct?.effect ?? patch.effect) : undefined;
  if (effect === undefined) {
    node.textContent = t("Choose a cell to see its patched run beside its estimate.");
    return;
  }
  const estimate = at(patch.correct?.estimate ?? patch.estimate);
  const whole = patch.clean.metric - patch.corrupted.metric;
  const flag = patch.correct ? null : patch.flagged.find((f) => f.cell.join(".") === page.state.cell);
  const words = t(
    "Patching {cell} from the clean run gives {patched}: an effect of {effect} ({share} of the whole {whole}). The estimate is {estimate}.",
    {
      cell: cellName(cell),
      patched: fmt(patch.corrupted.metric + effect, 3),
      effect: fmt(effect, 3),
      share: `${fmt(whole ? (100 * effect) / whole : 0, 0)}%`,
      whole: fmt(whole, 3),
      estimate: fmt(estimate, 3),
    },
  );
  node.textContent = flag ? sentences(words, t("Flagged: {why}.", { why: t(WHY[flag.why]) })) : words;
}

function drawControls() {
  const s = page.state;
  $("clean").value = s.clean;
  $("corrupted").value = s.corrupted;
  $("read").value = s.read;
  $("component").value = s.component;
  $("pitfall").value = s.pitfall;
  backLink(s.lesson);
}

function wire() {
  $("texts").addEventListener("submit", (e) => {
    e.preventDefault();
    const [clean, corrupted] = [$("clean").value, $("corrupted").value];
    if (!fits(clean) || !fits(corrupted)) {
      $("in-note").hidden = false;
      $("in-note").textContent = t("Each text must be 1 to 64 bytes in UTF-8.");
      return;
    }
    const changed = corrupted !== page.state.corrupted;
    update(
      (s) => {
        Object.assign(s, { clean, corrupted, cell: "" });
      },
      "patch_texts",
      encoder.encode(corrupted).length,
      changed ? "corrupt" : null,
    );
  });
  $("example").addEventListener("click", () =>
    update((s) => Object.assign(s, { ...EXAMPLE, cell: "" }), "patch_texts", "example", null),
  );
  const select = (id, parameter, manipulation) =>
    $(id).addEventListener("change", (e) =>
      update(
        (s) => {
          s[id] = e.target.value;
          if (id === "component") s.cell = "";
        },
        parameter,
        e.target.value || null,
        e.target.value ? manipulation : null,
      ),
    );
  select("read", "lens_read", "read-head");
  select("component", "patch_component", null);
  select("pitfall", "failure_mode", "pitfall");
  VIEW.onChange((changed) => {
    page.state = changed;
    drawControls();
    render();
  });
}

async function init() {
  const [models, registry] = await Promise.all([getJSON("/api/v1/models"), getJSON("/api/v1/failure-modes")]);
  page.model = models.models.find((m) => m.id === "bytes-2l-attn");
  const steps = new Set(["lens", "patch", "gradient"]);
  page.modes = new Map(registry.failure_modes.filter((m) => steps.has(m.step)).map((m) => [m.id, m]));
  for (const mode of page.modes.values())
    $("pitfall").append(el("option", { value: mode.id, text: mode.name, title: mode.description }));
  page.model.layer_heads.forEach((heads, l) => {
    heads.forEach((head, h) => {
      $("read").append(el("option", { value: `${l}.${h}`, text: `${headName(l, h)} (${labelOf(head)})` }));
    });
  });
  page.state = VIEW.load();
  VIEW.save(page.state);
  wire();
  drawControls();
  await render();
  shell.drawn();
}

init().catch((error) => {
  $("status").textContent = t("Could not compute: {reason}", { reason: error.message });
});
