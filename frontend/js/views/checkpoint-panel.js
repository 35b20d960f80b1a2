// @ts-check
// Checkpoint forms (predict, explain), the progress chips and the line that says where the
// learner's progress is: on the server, or saved on this device waiting to be sent.

import { el } from "./dom.js";
import { locale, t, tn } from "../i18n.js";

export function progressBar(list, checkpoints) {
  list.replaceChildren(
    ...checkpoints.map((c) =>
      el(
        "li",
        {
          class: c.completed ? "done" : "",
          dataset: { checkpoint: c.id, completed: String(c.completed) },
        },
        c.completed ? t("{title} (done)", { title: c.title }) : c.title,
      ),
    ),
  );
}

const clock = (date) => date.toLocaleTimeString(locale, { hour: "2-digit", minute: "2-digit", second: "2-digit" });

export function syncLine(node, { pending, deliveredAt, unreachable }) {
  node.dataset.pending = String(pending);
  if (pending) {
    node.textContent = unreachable
      ? tn(
          "{count} event is saved on this device and will be sent when the server answers (the server is not reachable right now).",
          "{count} events are saved on this device and will be sent when the server answers (the server is not reachable right now).",
          pending,
        )
      : tn(
          "{count} event is saved on this device and will be sent when the server answers.",
          "{count} events are saved on this device and will be sent when the server answers.",
          pending,
        );
  } else {
    node.textContent = deliveredAt
      ? t("All your progress is on the server (last sent at {time}).", { time: clock(deliveredAt) })
      : t("All your progress is on the server.");
  }
}

// A text checkpoint: the learner's words, restored after a reload, with an honest note of where they are.
// `rule`: the checkpoint's {min_words, vocabulary} when its text must earn the completion (the
// server holds the same rule and refuses what this would).
export function textForm({ id, label, button, text = "", done, onSubmit, rule = null }) {
  const area = el("textarea", { id, required: true, "aria-describedby": `${id}-hint` });
  area.value = text;
  const note = el("p", {
    class: "done-note",
    role: "status",
    hidden: !done,
    text: done ? t("Recorded on the server.") : "",
  });
  const hint = el("p", { class: "text-hint", id: `${id}-hint`, role: "alert", hidden: true });
  const form = el(
    "form",
    {
      class: "checkpoint-form",
      onsubmit: (e) => {
        e.preventDefault();
        const value = area.value.trim();
        if (!value) {
          area.focus();
          return;
        }
        const problem = rule && textProblem(rule, value);
        hint.hidden = !problem;
        hint.textContent = problem || "";
        if (problem) {
          area.focus();
          return;
        }
        onSubmit(value);
      },
    },
    el("label", { for: id, text: label }),
    area,
    hint,
    el("p", {}, el("button", { type: "submit", text: button })),
    note,
  );
  form.showDelivery = (delivered) => {
    note.hidden = false;
    note.classList.toggle("queued", !delivered);
    note.textContent = delivered
      ? t("Recorded on the server.")
      : t("Saved on this device; it will be sent when the server answers.");
  };
  return form;
}

const CJK = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]/gu; // one word per character

// Why a text does not earn its checkpoint, as a hint, or null: as service/lessons/model.py judges it.
/**
 * Why the text cannot complete the checkpoint yet, or "" (the server applies the same rule).
 * @param {{ min_words?: number, vocabulary?: Record<string, string[]>, expects?: string }} rule @param {string} text
 */
export function textProblem({ min_words: least = 0, vocabulary = {}, expects = "" }, text) {
  if (expects === "number" && !/\p{Nd}/u.test(text))
    return t("The question asks for a number: write the number you expect.");
  const tokens = [
    ...text.replace(CJK, " ").toLocaleLowerCase().split(/\s+/u).filter(Boolean),
    ...(text.match(CJK) || []),
  ];
  const words = tokens.length;
  if (words < least)
    return t("Say a little more: at least {least} words about what you saw (this has {words}).", { least, words });
  const distinct = new Set(tokens).size;
  const needed = Math.floor((least + 1) / 2);
  if (distinct < needed) return t("Use at least {needed} different words (this has {distinct}).", { needed, distinct });
  const lowered = text.toLocaleLowerCase();
  const every = Object.values(vocabulary).flat(); // a word of any of the lesson's languages counts
  const found = new Set(every.map((w) => w.toLocaleLowerCase()).filter((w) => lowered.includes(w)));
  if (every.length && found.size < Math.min(2, every.length)) {
    const examples = (vocabulary[locale] || vocabulary.en || every)
      .slice(0, 4)
      .join(locale.startsWith("zh") ? "、" : ", ");
    return t("Use at least two of the lesson's words for what you saw, such as {examples}.", { examples });
  }
  return null;
}
