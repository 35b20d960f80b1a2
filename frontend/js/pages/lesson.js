// The lesson page: objectives, checkpoints, the embedded workbench, the exercise, progress.
// Progress is honest about where it is: on the server, or saved on this device until it answers.

import {
  ApiError,
  ensureSession,
  flush,
  getJSON,
  isPending,
  pendingEvents,
  queued,
  queueEvent,
  startOutbox,
} from "../api.js";
import { forward } from "../hash-state.js";
import { consistent, defaults, STATE } from "../state.js";
import { progressBar, syncLine, textForm } from "../views/checkpoint-panel.js";
import { drawn, el } from "../views/dom.js";
import { announce, announcer } from "../views/announce.js";
import { exercisePanel } from "../views/exercise-panel.js";
import { gainLine, itemForm, predictionChoice, predictionVerdict } from "../views/items.js";
import { t } from "../i18n.js";

const lessonId = decodeURIComponent(location.pathname.split("/").pop());
const WORKBENCH_PAGE = "/explorables/multi-head-attention";
const $ = (id) => document.getElementById(id);
let learner = null;
let lesson = null;
let checkpoints = [];
let deliveredAt = null;
let unreachable = false;
const forms = new Map(); // event id -> the form waiting for its delivery
let exercise = null; // the exercise panel, whose trace command follows the workbench
let answers = new Map(); // "item:phase" -> the latest answer and, once shown to the learner, its score
const itemForms = []; // every question's form
const postBlocks = []; // the sections asking the post questions (the before-and-after line goes there)
const lockNotes = []; // what the after questions wait for, above them
const skipButtons = []; // the before block's "skip the rest", each on its line
let verdict = null; // the predict section's line saying what the engine found
let verdictSaid = null;

// The embedded workbench's state: in its page's hash once loaded, in its src until then.
function workbenchState(frame) {
  return frame.dataset.loaded === "true" ? STATE.load(frame.contentWindow) : STATE.read(new URL(frame.src).hash);
}

// Give the embedded workbench a state: its page redraws once loaded; before, it loads with it.
function setWorkbenchState(frame, state) {
  if (frame.dataset.loaded === "true") STATE.send(state, frame.contentWindow);
  else frame.src = STATE.link(state, frame.src);
}

// The embedded workbench's configuration as a standalone workbench link; another explorable's own
// address, its state in its hash (the online softmax's tokens and block size).
function workbenchLink() {
  const frame = $("workbench-frame");
  const src = frame && new URL(frame.src, location.href);
  if (src && src.pathname !== WORKBENCH_PAGE)
    return frame.dataset.loaded === "true" ? frame.contentWindow.location.href : src.href;
  let state = defaults();
  try {
    if (frame) state = workbenchState(frame);
  } catch {
    // not loaded yet
  }
  return STATE.link(state, location.origin + WORKBENCH_PAGE);
}

const byId = (id) => checkpoints.find((c) => c.id === id) || {};

// Only the latest read is drawn: one asked before a skip was delivered must not undo it.
let progressAsked = 0;

async function refreshProgress() {
  const asked = ++progressAsked;
  const before = new Set(checkpoints.filter((c) => c.completed).map((c) => c.id));
  const firstLoad = !checkpoints.length;
  try {
    const progress = await getJSON(`/api/v1/learners/${encodeURIComponent(learner)}/progress?lesson=${lessonId}`);
    if (asked !== progressAsked) return;
    const titled = new Map(lesson.checkpoints.map((c) => [c.id, c.title])); // in the lesson's language
    checkpoints = progress.lessons[0].checkpoints.map((c) => ({ ...c, title: titled.get(c.id) ?? c.title }));
    answers = new Map((progress.lessons[0].items || []).map((a) => [`${a.item}:${a.phase}`, a]));
    unreachable = false;
  } catch (error) {
    if (asked !== progressAsked) return;
    if (error instanceof ApiError && error.status === 404) {
      checkpoints = lesson.checkpoints.map((c) => ({ ...c, completed: false }));
    } else if (error instanceof ApiError && error.status === 0) {
      unreachable = true; // keep what is drawn; the queue line says what is waiting
    } else {
      throw error;
    }
  }
  drawProgress();
  const now = checkpoints.filter((c) => c.completed);
  const fresh = firstLoad ? [] : now.filter((c) => !before.has(c.id));
  if (fresh.length) {
    // said below what the learner last worked: the button, or the embedded workbench's frame
    announce(
      t("Checkpoint complete: {title} ({done} of {all} done).", {
        title: fresh.map((c) => c.title).join(", "),
        done: now.length,
        all: checkpoints.length,
      }),
    );
  }
}

function drawProgress() {
  if (!checkpoints.length) checkpoints = lesson.checkpoints.map((c) => ({ ...c, completed: false }));
  const done = checkpoints.filter((c) => c.completed).map((c) => c.id);
  progressBar($("progress"), checkpoints);
  syncLine($("sync"), { pending: pendingEvents(), deliveredAt, unreachable });
  for (const [checkpoint, answer] of answerSections) if (done.includes(checkpoint)) answer.hidden = false;
  drawItems();
}

// Each question as the server scored it, or as this device still holds it.
function drawItems() {
  for (const e of queued()) {
    if (
      e.lesson === lessonId &&
      (e.event === "answered" || e.event === "skipped") &&
      !answers.has(`${e.item}:${e.data.phase}`)
    ) {
      answers.set(
        `${e.item}:${e.data.phase}`,
        e.event === "skipped" ? { skipped: true, pending: true } : { response: e.data.response, pending: true },
      );
    }
  }
  const locked = afterLocked();
  for (const form of itemForms)
    form.show(answers.get(`${form.dataset.item}:${form.dataset.phase}`), form.dataset.phase === "post" ? locked : null);
  for (const note of lockNotes) {
    note.hidden = !locked;
    note.textContent = locked || "";
  }
  for (const line of skipButtons) line.hidden = !unansweredBefore().length; // its line: a button's display is styled
  for (const section of postBlocks) {
    section.querySelector(".item-gain")?.remove();
    const line = gainLine(lesson.items, answers);
    if (line) section.append(line);
  }
  const prediction = byId("predict").prediction;
  if (verdict) {
    const said = predictionVerdict(verdict, prediction);
    if (said && verdictSaid !== null && said !== verdictSaid) announce(said);
    verdictSaid = said || "";
  }
}

// Before, then after: the after questions show their keys, so they open only once every question
// before the workbench is answered or skipped and the experiment is done (the server holds the same
// order: docs/decisions.md). Why they are closed, or null when open.
const unansweredBefore = () => lesson.items.filter((i) => i.phase !== "post" && !answers.has(`${i.id}:pre`));

function afterLocked() {
  const experiment = lesson.checkpoints.find((c) => c.completion === "explorable-event");
  const waiting = [];
  if (unansweredBefore().length) waiting.push(t("answer (or skip) the questions before the workbench"));
  if (experiment && !byId(experiment.id).completed) waiting.push(t("do the workbench's four manipulations"));
  if (!waiting.length) return null;
  const steps =
    waiting.length === 2 ? t("{first} and {second}", { first: waiting[0], second: waiting[1] }) : waiting[0];
  return t("These questions open once you {steps}.", { steps });
}

function skipBefore() {
  for (const item of unansweredBefore())
    queueEvent({ lesson: lessonId, event: "skipped", item: item.id, data: { phase: "pre" } });
  drawProgress();
  flush();
}

function answerItem(item, phase, response) {
  queueEvent({ lesson: lessonId, event: "answered", item: item.id, data: { response, phase } });
  drawProgress();
  // the verdict where the learner can read it (on a phone it may be below the screen's edge)
  const form = itemForms.find((f) => f.dataset.item === item.id && f.dataset.phase === phase);
  if (form) form.querySelector(".item-feedback").scrollIntoView({ block: "nearest" });
  flush();
}

function itemsBlock(section, phase) {
  section.prepend(el("h2", { text: phase === "pre" ? t("Before the workbench") : t("Check your understanding") }));
  const asked = lesson.items.filter((i) => i.phase === phase || i.phase === "both");
  asked.forEach((item, i) => {
    const form = itemForm({ item, phase, position: i + 1, onAnswer: (response) => answerItem(item, phase, response) });
    itemForms.push(form);
    section.append(form);
  });
  if (phase === "post") {
    postBlocks.push(section);
    const note = el("p", { class: "note items-locked", role: "status" });
    lockNotes.push(note);
    section.querySelector("h2").after(note);
  } else {
    const line = el(
      "p",
      {},
      el("button", {
        type: "button",
        class: "secondary items-skip",
        text: t("Skip the questions I cannot answer yet"),
        onclick: skipBefore,
      }),
    );
    skipButtons.push(line);
    section.append(line);
  }
  drawItems();
}

// Each text checkpoint's model answer (an `answer` block naming it), shown once the learner's own
// words are recorded, never before: they answer first, then compare.
const answerSections = new Map(); // checkpoint -> its answer's section
const revealAnswer = (checkpoint) => {
  if (answerSections.has(checkpoint)) answerSections.get(checkpoint).hidden = false;
};

function record(form, checkpoint, event, data) {
  const queuedEvent = queueEvent({ lesson: lessonId, checkpoint, event, data });
  forms.set(queuedEvent.id, form);
  form.showDelivery(false);
  drawProgress();
  flush();
}

// The learner's words survive a reload: from the server, or from this device's queue if not sent yet.
function savedText(checkpoint) {
  const text = waiting(checkpoint, "text");
  if (text) return { text, delivered: false };
  const response = byId(checkpoint).response;
  return response ? { text: response, delivered: true } : null;
}

function textCheckpoint(section, { heading, id, label, button, checkpoint, after, choice }) {
  const saved = savedText(checkpoint);
  const rule = lesson.checkpoints.find((c) => c.id === checkpoint);
  const form = textForm({
    id,
    label,
    button,
    text: saved ? saved.text : "",
    done: Boolean(saved?.delivered),
    rule,
    onSubmit: (text) => {
      const picked = choice?.value();
      record(form, checkpoint, "completed", picked ? { text, choice: picked } : { text });
      if (after) after();
    },
  });
  if (saved && !saved.delivered) form.showDelivery(false);
  if (choice) form.prepend(choice.node);
  section.prepend(el("h2", { text: heading }));
  section.append(form);
}

// The prediction's choice as last recorded: on this device if not sent yet, else on the server.
function savedChoice(checkpoint) {
  return waiting(checkpoint, "choice") ?? byId(checkpoint).prediction?.choice;
}

// A checkpoint's latest `key` on this device, not yet sent.
const waiting = (checkpoint, key) =>
  queued()
    .filter((e) => e.lesson === lessonId && e.checkpoint === checkpoint && e.data?.[key])
    .pop()?.data[key];

function enhance(section, block) {
  const cp = block.checkpoint;
  switch (block.kind) {
    case "predict": {
      const choice = lesson.checkpoints.find((c) => c.id === cp)?.prediction ? predictionChoice(savedChoice(cp)) : null;
      textCheckpoint(section, {
        heading: t("Predict"),
        id: "prediction",
        label: t("Your prediction"),
        button: t("Record prediction"),
        checkpoint: cp,
        after: () => revealAnswer(cp),
        choice,
      });
      if (choice) {
        verdict = el("p", { class: "prediction-verdict", role: "status", hidden: true });
        section.append(verdict);
      }
      break;
    }
    case "items":
      itemsBlock(section, block.phase);
      break;
    case "answer":
      answerSections.set(cp, section);
      section.dataset.answers = cp;
      section.hidden = !byId(cp).completed && !savedText(cp);
      section.prepend(el("h2", { text: cp === "explain" ? t("A model answer") : t("The answer") }));
      break;
    case "explorable": {
      section.prepend(el("h2", { text: block.title }));
      // Loaded when the learner nears it: on a phone it is far below the text, and a reader who has
      // not got there yet should not wait for its drawing (docs/decisions.md).
      const frame = el("iframe", {
        src: block.src,
        title: block.title,
        height: block.height || "850",
        id: "workbench-frame",
        name: "workbench",
        loading: "lazy",
        onload: (e) => {
          e.target.dataset.loaded = "true";
        },
      });
      section.append(frame);
      break;
    }
    case "exercise": {
      section.prepend(el("h2", { text: block.title }));
      exercise = exercisePanel({
        block,
        verification: byId(cp).verification,
        workbenchLink,
        onVerdict: (result) => {
          if (result.correct) refreshProgress();
        },
      });
      section.append(exercise.node);
      break;
    }
    case "failure-modes":
      // Each failure mode opens in the lesson's own workbench, its tokens kept: the lesson stays.
      for (const a of section.querySelectorAll("a[data-failure-mode]")) {
        a.addEventListener("click", (e) => {
          const iframe = $("workbench-frame");
          if (!iframe || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return; // a new tab: the page has a way back
          e.preventDefault();
          const target = new URL(a.href);
          if (target.pathname !== new URL(iframe.src, location.href).pathname) return;
          if (target.pathname !== WORKBENCH_PAGE) {
            // another explorable (the KV cache's) reads its own hash, and keeps only its own keys
            if (iframe.dataset.loaded === "true") forward(target.hash, iframe.contentWindow);
            else iframe.src = target.href;
          } else {
            // Its tokens kept; what the link sets; W_O and the reuse toggle back to their defaults.
            const { wo, reuse } = defaults();
            setWorkbenchState(
              iframe,
              consistent({ ...workbenchState(iframe), wo, reuse, ...STATE.partial(target.hash) }),
            );
          }
          iframe.scrollIntoView({ block: "start", behavior: "smooth" });
        });
      }
      break;
    case "explain":
      textCheckpoint(section, {
        heading: t("Explain"),
        id: "explanation",
        label: t("Your explanation"),
        button: t("Record explanation"),
        checkpoint: cp,
        after: () => revealAnswer(cp),
      });
      break;
    case "self-check":
      section.prepend(el("h2", { text: t("Check your understanding") }));
      modelAnswers(section);
      break;
    default:
  }
}

// Each question's model answer (the item nested under it) behind a "Show a model answer" toggle:
// the learner answers first, then compares.
function modelAnswers(section) {
  for (const answer of section.querySelectorAll(":scope > ul > li > ul")) {
    const reveal = el("details", { class: "model-answer" }, el("summary", { text: t("Show a model answer") }));
    answer.replaceWith(reveal);
    reveal.append(answer);
  }
}

// The prerequisites: a link where the lesson is in this catalog, its title otherwise.
function prerequisites(lesson) {
  if (!lesson.prerequisites.length) return [el("li", { text: t("nothing: this lesson starts from scratch") })];
  return lesson.prerequisites.map((id, i) =>
    el(
      "li",
      {},
      lesson.prerequisites_present[i]
        ? el("a", { href: `/lessons/${encodeURIComponent(id)}`, text: lesson.prerequisite_titles[i] })
        : el("span", { text: t("{title} (not in this catalog yet)", { title: lesson.prerequisite_titles[i] }) }),
    ),
  );
}

// Scroll so the workbench's inputs and both heatmaps (its rows top..bottom) share the screen.
function showTogether(iframe, top, bottom) {
  const box = iframe.getBoundingClientRect();
  const [from, to] = [box.top + top, box.top + bottom];
  if (to - from > window.innerHeight) return; // taller than the screen: leave the learner's scroll alone
  if (from < 0) window.scrollBy(0, from - 8);
  else if (to > window.innerHeight) window.scrollBy(0, to - window.innerHeight + 8);
}

function listen() {
  const frame = () => $("workbench-frame");
  window.addEventListener("message", (e) => {
    if (e.origin !== location.origin || !e.data || e.data.source !== "attention-workbench") return;
    const iframe = frame();
    if (!iframe || e.source !== iframe.contentWindow) return;
    if (e.data.type === "height") {
      iframe.style.height = `${Math.max(200, Math.ceil(e.data.height) + 2)}px`; // + the iframe's border
    } else if (e.data.type === "show") {
      showTogether(iframe, e.data.top, e.data.bottom);
    } else if (e.data.type === "state") {
      if (exercise) exercise.refresh(); // the trace command follows the workbench's restored state
    } else if (e.data.type === "parameter-changed") {
      // The workbench queued an event in the queue both pages share: send it from here too and
      // redraw the chips (the storage event says the same, but not every browser delivers it).
      setTimeout(() => flush().then(refreshProgress), 500);
      if (exercise) exercise.refresh();
    }
  });
  document.addEventListener("workbench:events-sent", (e) => {
    deliveredAt = new Date();
    unreachable = false;
    for (const id of e.detail.ids) {
      const form = forms.get(id);
      if (form) {
        form.showDelivery(true);
        forms.delete(id);
      }
    }
    refreshProgress();
  });
  let pending = pendingEvents();
  document.addEventListener("workbench:queue", (e) => {
    // The embedded workbench shares this queue: when it sends, its events leave the queue too.
    if (e.detail.pending < pending) {
      deliveredAt = new Date();
      for (const [id, form] of forms)
        if (!isPending(id)) {
          form.showDelivery(true);
          forms.delete(id);
        }
      refreshProgress();
    } else {
      drawProgress();
    }
    pending = e.detail.pending;
  });
}

async function init() {
  announcer();
  // The lesson is public: asked for beside the session, not after it (one round trip less to the first drawing).
  [learner, lesson] = await Promise.all([ensureSession(), getJSON(`/api/v1/lessons/${lessonId}`)]);
  document.title = t("{lesson} · Multi-head attention workbench", { lesson: lesson.title });
  $("lesson-header").replaceChildren(
    el("p", { class: "note", text: t("Lesson {number}", { number: lesson.order }) }),
    el("h2", { text: t("Objectives") }),
    el(
      "ul",
      {},
      lesson.objectives.map((o) => el("li", { text: o })),
    ),
    el("h2", { text: t("Before this lesson") }),
    el("ul", {}, prerequisites(lesson)),
  );
  // What the lesson is written in: the interface's language, or English where it is not translated.
  if (lesson.locale !== document.documentElement.lang) {
    $("lesson-header").lang = lesson.locale;
    $("lesson-body").lang = lesson.locale;
  }
  const body = $("lesson-body");
  body.innerHTML = lesson.html; // rendered by the server from the lesson's markdown (raw HTML disabled)
  const title = body.querySelector("h1");
  if (title) $("lesson-header").prepend(title);
  await refreshProgress();
  const byLine = new Map(lesson.blocks.map((b) => [String(b.line), b]));
  for (const section of body.querySelectorAll("section.directive")) {
    const block = byLine.get(section.dataset.line);
    if (block) enhance(section, block);
  }
  listen();
  startOutbox();
  document.documentElement.classList.add("drawn");
  drawn();
}

init().catch((error) => {
  $("status").textContent = t("Could not load the lesson: {reason}", { reason: error.message });
  document.documentElement.classList.add("drawn");
});
