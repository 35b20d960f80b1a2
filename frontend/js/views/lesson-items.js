// @ts-check
// The lesson's questions (its `items`): asked before the workbench and again after, each form drawn as
// the server scored it or as this device still holds it. The after questions show their keys, so they
// open only once every question before the workbench is answered or skipped and the experiment is done
// (the server holds the same order: docs/decisions.md).

import { flush, queued, queueEvent } from "../api.js";
import { t } from "../i18n.js";
import { el } from "./dom.js";
import { gainLine, itemForm } from "./items.js";

export class Questions {
  /**
   * @param {{ lesson: any, answers: Map<string, any>, checkpoints: any[] }} page the lesson page's runtime
   * @param {string} lessonId
   * @param {() => void} redraw the page's progress drawn again (this block included)
   */
  constructor(page, lessonId, redraw) {
    this.page = page;
    this.lessonId = lessonId;
    this.redraw = redraw;
    /** @type {any[]} every question's form */
    this.forms = [];
    /** @type {HTMLElement[]} the sections asking the after questions (the before-and-after line goes there) */
    this.postBlocks = [];
    /** @type {HTMLElement[]} what the after questions wait for, above them */
    this.lockNotes = [];
    /** @type {HTMLElement[]} the before block's "skip the rest", each on its line */
    this.skipButtons = [];
  }

  /** A section asking the questions of `phase` (pre or post). @param {HTMLElement} section @param {string} phase */
  block(section, phase) {
    section.prepend(el("h2", { text: phase === "pre" ? t("Before the workbench") : t("Check your understanding") }));
    const asked = this.page.lesson.items.filter((i) => i.phase === phase || i.phase === "both");
    asked.forEach((item, i) => {
      const onAnswer = (response) => this.answer(item, phase, response);
      const form = itemForm({ item, phase, position: i + 1, onAnswer });
      this.forms.push(form);
      section.append(form);
    });
    if (phase === "post") {
      this.postBlocks.push(section);
      const note = el("p", { class: "note items-locked", role: "status" });
      this.lockNotes.push(note);
      section.querySelector("h2").after(note);
    } else {
      const skip = el("button", {
        type: "button",
        class: "secondary items-skip",
        text: t("Skip the questions I cannot answer yet"),
        onclick: () => this.skip(),
      });
      const line = el("p", {}, skip);
      this.skipButtons.push(line);
      section.append(line);
    }
    this.draw();
  }

  /** Each question as the server scored it, or as this device still holds it. */
  draw() {
    const { answers, lesson } = this.page;
    for (const e of queued()) {
      const key = `${e.item}:${e.data?.phase}`;
      if (e.lesson === this.lessonId && (e.event === "answered" || e.event === "skipped") && !answers.has(key)) {
        answers.set(
          key,
          e.event === "skipped" ? { skipped: true, pending: true } : { response: e.data.response, pending: true },
        );
      }
    }
    const locked = this.afterLocked();
    for (const form of this.forms) {
      const { item, phase } = form.dataset;
      form.show(answers.get(`${item}:${phase}`), phase === "post" ? locked : null);
    }
    for (const note of this.lockNotes) {
      note.hidden = !locked;
      note.textContent = locked || "";
    }
    for (const line of this.skipButtons) line.hidden = !this.unansweredBefore().length; // its line: a button's display is styled
    for (const section of this.postBlocks) {
      section.querySelector(".item-gain")?.remove();
      const line = gainLine(lesson.items, answers);
      if (line) section.append(line);
    }
  }

  unansweredBefore() {
    return this.page.lesson.items.filter((i) => i.phase !== "post" && !this.page.answers.has(`${i.id}:pre`));
  }

  /** Why the after questions are closed, or null when open. */
  afterLocked() {
    const experiment = this.page.lesson.checkpoints.find((c) => c.completion === "explorable-event");
    const waiting = [];
    if (this.unansweredBefore().length) waiting.push(t("answer (or skip) the questions before the workbench"));
    const done = experiment && this.page.checkpoints.find((c) => c.id === experiment.id)?.completed;
    if (experiment && !done) waiting.push(t("do the workbench's four manipulations"));
    if (!waiting.length) return null;
    const steps =
      waiting.length === 2 ? t("{first} and {second}", { first: waiting[0], second: waiting[1] }) : waiting[0];
    return t("These questions open once you {steps}.", { steps });
  }

  skip() {
    for (const item of this.unansweredBefore())
      queueEvent({ lesson: this.lessonId, event: "skipped", item: item.id, data: { phase: "pre" } });
    this.redraw();
    flush();
  }

  answer(item, phase, response) {
    queueEvent({ lesson: this.lessonId, event: "answered", item: item.id, data: { response, phase } });
    this.redraw();
    // the verdict where the learner can read it (on a phone it may be below the screen's edge)
    const form = this.forms.find((f) => f.dataset.item === item.id && f.dataset.phase === phase);
    if (form) form.querySelector(".item-feedback").scrollIntoView({ block: "nearest" });
    flush();
  }
}
