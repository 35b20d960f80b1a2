// @ts-check
// The lesson page: objectives, checkpoints, the embedded explorable, the exercise, progress.
// Progress is honest about where it is: on the server, or saved on this device until it answers.

import { ApiError, ensureSession, flush, getJSON, isPending, pendingEvents, queued, queueEvent } from "../api.js";
import { listed, locale, OFFERED, sentences, t, useLanguage } from "../i18n.js";
import { $, startPage } from "../shell.js";
import { announce } from "../views/announce.js";
import { progressBar, syncLine, textForm } from "../views/checkpoint-panel.js";
import { drawn, el } from "../views/dom.js";
import { exercisePanel } from "../views/exercise-panel.js";
import { predictionChoice, predictionVerdict } from "../views/items.js";
import { explorableFrame, failureModeLinks, showTogether, workbenchLink } from "../views/lesson-embed.js";
import { Questions } from "../views/lesson-items.js";

const lessonId = decodeURIComponent(location.pathname.split("/").pop());

// The page's runtime: the lesson, the learner's progress as last read, and what is waiting for delivery.
const page = {
  learner: null,
  lesson: /** @type {any} */ (null),
  checkpoints: [], // the lesson's checkpoints, each with its completion as last read
  answers: new Map(), // "item:phase" -> the latest answer and, once shown to the learner, its score
  deliveredAt: null, // when events last left this device
  unreachable: false, // the server did not answer the last read
  forms: new Map(), // event id -> the form waiting for its delivery
  exercise: null, // the exercise panel, whose trace command follows the workbench
  answerSections: new Map(), // checkpoint -> its model answer's section, shown once the learner's words are in
  verdict: null, // the predict section's line saying what the engine found
  verdictSaid: null, // what it last said
  progressAsked: 0, // only the latest read is drawn: one asked before a skip was delivered must not undo it
  readAgainIn: 0, // ms before a shed read is asked again
  unit: /** @type {any} */ (null), // the cmi5 unit (cmi5.js), when an LMS launched the lesson
};
const shell = startPage();
const questions = new Questions(page, lessonId, () => drawProgress());
const byId = (id) => page.checkpoints.find((c) => c.id === id) || {};

async function refreshProgress() {
  const asked = ++page.progressAsked;
  const before = new Set(page.checkpoints.filter((c) => c.completed).map((c) => c.id));
  const firstLoad = !page.checkpoints.length;
  try {
    const progress = await getJSON(`/api/v1/learners/${encodeURIComponent(page.learner)}/progress?lesson=${lessonId}`);
    if (asked !== page.progressAsked) return;
    const titled = new Map(page.lesson.checkpoints.map((c) => [c.id, c.title])); // in the lesson's language
    page.checkpoints = progress.lessons[0].checkpoints.map((c) => ({ ...c, title: titled.get(c.id) ?? c.title }));
    page.answers = new Map((progress.lessons[0].items || []).map((a) => [`${a.item}:${a.phase}`, a]));
    page.unreachable = false;
    page.readAgainIn = 0;
  } catch (error) {
    if (asked !== page.progressAsked) return;
    if (error instanceof ApiError && error.status === 404) {
      page.checkpoints = page.lesson.checkpoints.map((c) => ({ ...c, completed: false }));
    } else if (error instanceof ApiError && error.status === 0) {
      page.unreachable = true; // keep what is drawn; the queue line says what is waiting
    } else if (error instanceof ApiError && (error.status === 429 || error.status >= 500)) {
      // the read was shed (a busy server, a held lock): read again later, 1 s doubling to 30, unless asked anew
      page.readAgainIn = Math.min(2 * page.readAgainIn || 1000, 30000);
      setTimeout(() => asked === page.progressAsked && refreshProgress(), page.readAgainIn);
      return;
    } else {
      throw error;
    }
  }
  drawProgress();
  page.unit?.sync().catch(unitSays);
  const now = page.checkpoints.filter((c) => c.completed);
  const fresh = firstLoad ? [] : now.filter((c) => !before.has(c.id));
  if (fresh.length) {
    // said below what the learner last worked: the button, or the embedded workbench's frame
    const title = listed(fresh.map((c) => c.title));
    announce(
      t("Checkpoint complete: {title} ({done} of {all} done).", {
        title,
        done: now.length,
        all: page.checkpoints.length,
      }),
    );
  }
}

function drawProgress() {
  if (!page.checkpoints.length) page.checkpoints = page.lesson.checkpoints.map((c) => ({ ...c, completed: false }));
  const done = page.checkpoints.filter((c) => c.completed).map((c) => c.id);
  progressBar($("progress"), page.checkpoints);
  syncLine($("sync"), { pending: pendingEvents(), deliveredAt: page.deliveredAt, unreachable: page.unreachable });
  for (const [checkpoint, answer] of page.answerSections) if (done.includes(checkpoint)) answer.hidden = false;
  questions.draw();
  if (page.verdict) {
    const said = predictionVerdict(page.verdict, byId("predict").prediction);
    if (said && page.verdictSaid !== null && said !== page.verdictSaid) announce(said);
    page.verdictSaid = said || "";
  }
}

// Each text checkpoint's model answer (an `answer` block naming it), shown once the learner's own
// words are recorded, never before: they answer first, then compare.
const revealAnswer = (checkpoint) => {
  if (page.answerSections.has(checkpoint)) page.answerSections.get(checkpoint).hidden = false;
};

function record(form, checkpoint, event, data) {
  const queuedEvent = queueEvent({ lesson: lessonId, checkpoint, event, data });
  page.forms.set(queuedEvent.id, form);
  form.showDelivery(false);
  drawProgress();
  flush();
}

// A checkpoint's latest `key` on this device, not yet sent.
const waiting = (checkpoint, key) =>
  queued()
    .filter((e) => e.lesson === lessonId && e.checkpoint === checkpoint && e.data?.[key])
    .pop()?.data[key];

// The learner's words survive a reload: from the server, or from this device's queue if not sent yet.
function savedText(checkpoint) {
  const text = waiting(checkpoint, "text");
  if (text) return { text, delivered: false };
  const response = byId(checkpoint).response;
  return response ? { text: response, delivered: true } : null;
}

/**
 * A checkpoint the learner completes in words (predict, explain), with a choice beside them when it asks one.
 * @param {HTMLElement} section
 * @param {{ heading: string, id: string, label: string, button: string, checkpoint: string, choice?: any }} asked
 */
function textCheckpoint(section, { heading, id, label, button, checkpoint, choice = null }) {
  const saved = savedText(checkpoint);
  const rule = page.lesson.checkpoints.find((c) => c.id === checkpoint);
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
      revealAnswer(checkpoint);
    },
  });
  if (saved && !saved.delivered) form.showDelivery(false);
  if (choice) form.prepend(choice.node);
  section.prepend(el("h2", { text: heading }));
  section.append(form);
}

// What each of the lesson's blocks (its directives) becomes on the page.
const ENHANCE = {
  predict: (section, { checkpoint: cp }) => {
    // the prediction's choice as last recorded: on this device if not sent yet, else on the server
    const saved = waiting(cp, "choice") ?? byId(cp).prediction?.choice;
    const choice = page.lesson.checkpoints.find((c) => c.id === cp)?.prediction ? predictionChoice(saved) : null;
    const words = { heading: t("Predict"), label: t("Your prediction"), button: t("Record prediction") };
    textCheckpoint(section, { ...words, id: "prediction", checkpoint: cp, choice });
    if (choice) {
      page.verdict = el("p", { class: "prediction-verdict", role: "status", hidden: true });
      section.append(page.verdict);
    }
  },
  items: (section, block) => questions.block(section, block.phase),
  answer: (section, { checkpoint: cp }) => {
    page.answerSections.set(cp, section);
    section.dataset.answers = cp;
    section.hidden = !byId(cp).completed && !savedText(cp);
    section.prepend(el("h2", { text: cp === "explain" ? t("A model answer") : t("The answer") }));
  },
  explorable: (section, block) => {
    section.prepend(el("h2", { text: block.title }));
    section.append(explorableFrame(block));
  },
  exercise: (section, block) => {
    section.prepend(el("h2", { text: block.title }));
    const onVerdict = (result) => {
      if (result.correct) refreshProgress();
    };
    page.exercise = exercisePanel({
      block,
      verification: byId(block.checkpoint).verification,
      workbenchLink,
      onVerdict,
    });
    section.append(page.exercise.node);
  },
  "failure-modes": (section) => failureModeLinks(section),
  explain: (section, { checkpoint: cp }) => {
    const words = { heading: t("Explain"), label: t("Your explanation"), button: t("Record explanation") };
    textCheckpoint(section, { ...words, id: "explanation", checkpoint: cp });
  },
  "self-check": (section) => {
    // questions the learner answers to themselves (the scored ones after the workbench have the other heading)
    section.prepend(el("h2", { text: t("Think it through") }));
    modelAnswers(section);
  },
};

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

// What the embedded explorable tells its host: its height, what to show together, its state, its events.
function listenToTheExplorable() {
  window.addEventListener("message", (e) => {
    if (e.origin !== location.origin || !e.data || e.data.source !== "attention-workbench") return;
    const iframe = $("workbench-frame");
    if (!iframe || e.source !== iframe.contentWindow) return;
    if (e.data.type === "height") {
      iframe.style.height = `${Math.max(200, Math.ceil(e.data.height) + 2)}px`; // + the iframe's border
    } else if (e.data.type === "show") {
      showTogether(iframe, e.data.top, e.data.bottom);
    } else if (e.data.type === "state") {
      page.exercise?.refresh(); // the trace command follows the workbench's restored state
    } else if (e.data.type === "parameter-changed") {
      // The workbench queued an event in the queue both pages share: send it from here too and
      // redraw the chips (the storage event says the same, but not every browser delivers it).
      setTimeout(() => flush().then(refreshProgress), 500);
      page.exercise?.refresh();
    }
  });
}

// Events leaving this device (sent from here, or from the embedded explorable through the shared queue).
function listenToTheQueue() {
  const delivered = (isDelivered) => {
    page.deliveredAt = new Date();
    for (const [id, form] of page.forms)
      if (isDelivered(id)) {
        form.showDelivery(true);
        page.forms.delete(id);
      }
    refreshProgress();
  };
  document.addEventListener("workbench:events-sent", (/** @type {CustomEvent} */ e) => {
    page.unreachable = false;
    delivered((id) => e.detail.ids.includes(id));
  });
  let pending = pendingEvents();
  document.addEventListener("workbench:queue", (/** @type {CustomEvent} */ e) => {
    // The embedded workbench shares this queue: when it sends, its events leave the queue too.
    if (e.detail.pending < pending) delivered((id) => !isPending(id));
    else drawProgress();
    pending = e.detail.pending;
  });
}

function drawHeader(lesson) {
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
}

// A launch by an LMS (cmi5, loaded only then): its token, launch data and the learner's language before
// anything is drawn or sent; a refusal says what to do, and the lesson is still there to read.
const LAUNCH = ["endpoint", "fetch", "actor", "registration", "activityId"];

function unitSays(error) {
  const said = error.told ? error.message : t("Your course did not answer: {reason}", { reason: error.message });
  $("unit-status").textContent = sentences(said, t("Close this window and open the lesson again from your course."));
}

async function startUnit(query) {
  const { Unit, preferredLocale } = await import("../cmi5.js");
  const launch = Object.fromEntries(LAUNCH.map((name) => [name, query.get(name)]));
  const unit = new Unit(launch, lessonId, (text) => {
    $("unit-status").textContent = text;
  });
  try {
    await unit.start();
  } catch (error) {
    unitSays(error);
    return null;
  }
  const chosen = preferredLocale(unit.preferences, OFFERED);
  if (chosen && chosen !== locale) await useLanguage(chosen, "lesson");
  $("progress-title").textContent = t("Your progress");
  const exit = el("button", { type: "button", id: "unit-exit", text: t("Exit to your course") });
  exit.addEventListener("click", () => {
    exit.disabled = true;
    unit.exit();
  });
  $("unit").append(exit);
  window.addEventListener("pagehide", () => unit.leaving());
  return unit;
}

async function init() {
  const query = new URLSearchParams(location.search);
  const launch = LAUNCH.some((name) => query.has(name)); // the server checked all five
  page.unit = launch ? await startUnit(query) : null;
  const lang = launch ? `?lang=${locale}` : ""; // the LMS's language, kept for the embedded explorable too
  // The lesson is public: asked for beside the session, not after it (one round trip less to the first drawing).
  [page.learner, page.lesson] = await Promise.all([ensureSession(), getJSON(`/api/v1/lessons/${lessonId}${lang}`)]);
  drawHeader(page.lesson);
  const body = $("lesson-body");
  body.innerHTML = page.lesson.html; // rendered by the server from the lesson's markdown (raw HTML disabled)
  const title = body.querySelector("h1");
  if (title) $("lesson-header").prepend(title);
  await refreshProgress();
  const byLine = new Map(page.lesson.blocks.map((b) => [String(b.line), b]));
  for (const section of body.querySelectorAll("section.directive")) {
    const block = byLine.get(section.dataset.line);
    if (block) ENHANCE[block.kind]?.(section, block);
  }
  listenToTheExplorable();
  listenToTheQueue();
  shell.drawn();
  document.documentElement.classList.add("drawn");
  drawn();
}

init().catch((error) => {
  $("status").textContent = t("Could not load the lesson: {reason}", { reason: error.message });
  document.documentElement.classList.add("drawn");
});
