// Checkpoint forms (predict, exercise report, explain) and the progress bar.

import { el } from "./dom.js";

export function progressBar(list, checkpoints) {
  list.replaceChildren(...checkpoints.map((c) => el("li", {
    class: c.completed ? "done" : "", dataset: { checkpoint: c.id, completed: String(c.completed) },
  }, `${c.title}${c.completed ? " (done)" : ""}`)));
}

export function textForm({ id, label, button, done, onSubmit }) {
  const area = el("textarea", { id, required: true });
  const note = el("p", { class: "done-note", hidden: !done, text: "Recorded." });
  const form = el("form", { class: "checkpoint-form", onsubmit: (e) => {
    e.preventDefault();
    const text = area.value.trim();
    if (!text) { area.focus(); return; }
    onSubmit(text);
    note.hidden = false;
  } }, el("label", { for: id, text: label }), area, el("p", {}, el("button", { type: "submit", text: button })), note);
  return form;
}

export function reportForm({ onSubmit, done }) {
  const passed = el("input", { id: "tests-passed", type: "number", min: "0", step: "1", value: "0" });
  const failed = el("input", { id: "tests-failed", type: "number", min: "0", step: "1", value: "0" });
  const note = el("p", { class: "done-note", role: "status", hidden: !done, text: done ? "All tests passed: recorded." : "" });
  return el("form", { class: "checkpoint-form", onsubmit: (e) => {
    e.preventDefault();
    const p = Math.max(0, Math.trunc(Number(passed.value) || 0));
    const f = Math.max(0, Math.trunc(Number(failed.value) || 0));
    onSubmit(p, f);
    note.hidden = false;
    note.textContent = f === 0 && p > 0 ? "All tests passed: recorded." : `Recorded an attempt (${p} passed, ${f} failed).`;
  } }, el("p", { text: "Report your test run:" }),
  el("label", { for: "tests-passed", text: "Tests passed " }), passed, " ",
  el("label", { for: "tests-failed", text: "Tests failed " }), failed, " ",
  el("button", { type: "submit", text: "Report result" }), note);
}
