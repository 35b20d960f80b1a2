// @ts-check
// The dashboard's items view: for each question, how many of the cohort's latest answers are right,
// how well it separates learners who understood from those who did not (its discrimination), which
// choices they made and the misconception each wrong one reveals; and the gain from before the
// workbench to after. Every figure over fewer than k learners is hidden.

import { el, math } from "./dom.js";
import { hidden } from "./bars.js";
import { number, t } from "../i18n.js";

const percent = (x) => (x === null ? null : t("{percent} %", { percent: Math.round(x * 100) }));

function gainLine(gain, k) {
  if (gain.suppressed) {
    return el("p", {
      class: "note",
      id: "items-gain",
      text: t(
        "Gain from before the workbench to after, over the learners who answered every question of both phases: {hidden}.",
        { hidden: hidden(k) },
      ),
    });
  }
  return el("p", {
    class: "items-gain",
    id: "items-gain",
    text: t(
      "{learners} learners answered every question before and after the workbench: {pre} right before, {post} after; normalized gain {gain}.",
      {
        learners: gain.learners,
        pre: percent(gain.pre_mean),
        post: percent(gain.post_mean),
        gain: gain.normalized_gain === null ? "–" : number(gain.normalized_gain, 2),
      },
    ),
  });
}

function choiceRow(choice, learners, k) {
  const share = choice.count === null || !learners ? 0 : choice.count / learners;
  const bar = el("span");
  bar.style.width = `${Math.round(share * 100)}%`; // through the CSSOM: the CSP allows no style attribute
  return el(
    "li",
    { class: choice.correct ? "choice right" : "choice", dataset: { choice: choice.id } },
    el("span", { class: "choice-text" }, choice.correct ? `✓ ` : "", math(choice.text)),
    el("span", { class: "choice-bar", "aria-hidden": "true" }, bar),
    el("span", {
      class: "choice-count",
      text: choice.count === null ? hidden(k) : t("{count} learners", { count: choice.count }),
    }),
    choice.misconception
      ? el("span", { class: "misconception", text: t("reveals: {idea}", { idea: choice.misconception }) })
      : null,
  );
}

function itemRow(row, k) {
  const phase = row.phase === "pre" ? t("before") : t("after");
  const figures = row.suppressed
    ? hidden(k)
    : t("{rate} right · discrimination {d} · {count} learners", {
        rate: percent(row.correct_rate),
        d: row.discrimination === null ? "–" : number(row.discrimination, 2),
        count: row.learners,
      });
  return el(
    "details",
    { class: "item-stat", dataset: { item: row.id, phase: row.phase } },
    el(
      "summary",
      {},
      el("span", { class: "phase-badge", text: phase }),
      " ",
      math(row.prompt),
      el("span", { class: "item-figures", text: figures }),
    ),
    el(
      "ul",
      { class: "item-choices-stats" },
      row.choices.map((c) => choiceRow(c, row.learners, k)),
    ),
  );
}

export function itemsView(body, k) {
  if (!body.items.length) return null;
  return el(
    "section",
    { class: "items-view", id: "items" },
    el("h2", { text: t("What learners understood: the lesson's questions, all time") }),
    gainLine(body.gain, k),
    el("p", {
      class: "note",
      text: t(
        "Discrimination is the correlation between a question's score and the learner's score on the other questions of the same phase: near 0 or below, the question does not separate those who understood.",
      ),
    }),
    body.items.map((row) => itemRow(row, k)),
  );
}
