// @ts-check
// The lesson list with the learner's progress in each.

import { ApiError, ensureSession, getJSON } from "../api.js";
import { t } from "../i18n.js";
import { $, startPage } from "../shell.js";
import { drawn, el } from "../views/dom.js";

startPage();

async function init() {
  const [learner, { lessons }] = await Promise.all([ensureSession(), getJSON("/api/v1/lessons")]);
  let progress = [];
  try {
    progress = (await getJSON(`/api/v1/learners/${encodeURIComponent(learner)}/progress`)).lessons;
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error;
  }
  const done = new Map(progress.map((p) => [p.lesson, p.completed]));
  $("lessons").replaceChildren(
    ...lessons.map((lesson) => {
      const count = done.get(lesson.id) || 0;
      return el(
        "article",
        { class: "lesson-card" },
        el("h3", {}, el("a", { href: `/lessons/${lesson.id}`, text: lesson.title })),
        el("p", { text: lesson.summary }),
        el(
          "p",
          { class: "progress-line", dataset: { lesson: lesson.id, completed: String(count) } },
          t("{done} of {all} checkpoints done", { done: count, all: lesson.checkpoints.length }),
        ),
      );
    }),
  );
  drawn();
}

init().catch((error) => {
  $("lessons").replaceChildren(
    el("p", { class: "error", text: t("Could not load: {reason}", { reason: error.message }) }),
  );
});
