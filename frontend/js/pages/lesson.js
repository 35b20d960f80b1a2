// The lesson page: objectives, checkpoints, the embedded workbench, the exercise, progress.

import { ApiError, ensureSession, flush, getJSON, queueEvent } from "../api.js";
import { progressBar, reportForm, textForm } from "../views/checkpoint-panel.js";
import { el } from "../views/dom.js";

const lessonId = decodeURIComponent(location.pathname.split("/").pop());
const $ = (id) => document.getElementById(id);
let learner = null;
let lesson = null;
let completed = new Set();

async function refreshProgress() {
  await flush();
  let checkpoints = lesson.checkpoints.map((c) => ({ ...c, completed: false }));
  try {
    const progress = await getJSON(`/api/v1/learners/${encodeURIComponent(learner)}/progress?lesson=${lessonId}`);
    checkpoints = progress.lessons[0].checkpoints;
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error;
  }
  completed = new Set(checkpoints.filter((c) => c.completed).map((c) => c.id));
  progressBar($("progress"), checkpoints);
  document.body.dataset.progress = [...completed].sort().join(",");
  const answer = document.querySelector(".directive-answer");
  if (answer && completed.has("predict")) answer.hidden = false;
}

async function record(checkpoint, event, data) {
  queueEvent({ lesson: lessonId, checkpoint, event, data });
  await refreshProgress();
}

function enhance(section, block) {
  const cp = block.checkpoint;
  switch (block.kind) {
    case "predict":
      section.prepend(el("h2", { text: "Predict" }));
      section.append(textForm({ id: "prediction", label: "Your prediction", button: "Record prediction",
        done: completed.has(cp), onSubmit: async (text) => {
          await record(cp, "completed", { text });
          document.querySelector(".directive-answer").hidden = false;
        } }));
      break;
    case "answer":
      section.hidden = !completed.has(cp);
      section.prepend(el("h2", { text: "The answer" }));
      break;
    case "explorable":
      section.prepend(el("h2", { text: block.title }));
      section.append(el("iframe", { src: `${block.src}`, title: block.title, height: block.height || "850",
        loading: "lazy", id: "workbench-frame" }));
      break;
    case "exercise":
      section.prepend(el("h2", { text: block.title }));
      section.append(
        el("p", {}, "Run the tests: ", el("code", { text: block.command })),
        el("p", {}, el("a", { href: block.starter, download: "starter.py", text: "Download the starter (starter.py)" }),
          " · or use ", el("code", { text: `${block.path}/starter.py` }), " in the repository."),
        reportForm({ done: completed.has(cp), onSubmit: (passed, failed) => record(cp,
          failed === 0 && passed > 0 ? "completed" : "attempted", { tests: { passed, failed } }) }));
      break;
    case "explain":
      section.prepend(el("h2", { text: "Explain" }));
      section.append(textForm({ id: "explanation", label: "Your explanation", button: "Record explanation",
        done: completed.has(cp), onSubmit: (text) => record(cp, "completed", { text }) }));
      break;
    case "self-check":
      section.prepend(el("h2", { text: "Check your understanding" }));
      break;
    default:
  }
}

async function init() {
  learner = await ensureSession();
  lesson = await getJSON(`/api/v1/lessons/${lessonId}`);
  document.title = `${lesson.title} · Multi-head attention workbench`;
  $("lesson-header").replaceChildren(
    el("p", { class: "note", text: `Lesson ${lesson.order}` }),
    el("h2", { text: "Objectives" }), el("ul", {}, lesson.objectives.map((o) => el("li", { text: o }))),
    el("h2", { text: "Before this lesson" }), el("ul", {}, lesson.prerequisites.map((p) => el("li", { text: p }))));
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
  window.addEventListener("message", (e) => {
    if (e.origin === location.origin && e.data && e.data.source === "attention-workbench") {
      setTimeout(refreshProgress, 800);
    }
  });
  document.addEventListener("workbench:events-sent", () => setTimeout(refreshProgress, 100));
  document.body.dataset.ready = "true";
}

init().catch((error) => { $("status").textContent = `Could not load the lesson: ${error.message}`; });
