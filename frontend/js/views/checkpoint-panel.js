// Checkpoint forms (predict, explain), the progress chips and the line that says where the
// learner's progress is: on the server, or saved on this device waiting to be sent.

import { el } from "./dom.js";

export function progressBar(list, checkpoints) {
  list.replaceChildren(...checkpoints.map((c) => el("li", {
    class: c.completed ? "done" : "", dataset: { checkpoint: c.id, completed: String(c.completed) },
  }, `${c.title}${c.completed ? " (done)" : ""}`)));
}

const clock = (date) => date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });

export function syncLine(node, { pending, deliveredAt, unreachable }) {
  node.dataset.pending = String(pending);
  if (pending) {
    node.textContent = `${pending} ${pending === 1 ? "event is" : "events are"} saved on this device and will be ` +
      `sent when the server answers${unreachable ? " (the server is not reachable right now)" : ""}.`;
  } else {
    node.textContent = deliveredAt
      ? `All your progress is on the server (last sent at ${clock(deliveredAt)}).`
      : "All your progress is on the server.";
  }
}

// A text checkpoint: the learner's words, restored after a reload, with an honest note of where they are.
export function textForm({ id, label, button, text = "", done, onSubmit }) {
  const area = el("textarea", { id, required: true });
  area.value = text;
  const note = el("p", { class: "done-note", role: "status", hidden: !done, text: done ? "Recorded on the server." : "" });
  const form = el("form", { class: "checkpoint-form", onsubmit: (e) => {
    e.preventDefault();
    const value = area.value.trim();
    if (!value) { area.focus(); return; }
    onSubmit(value);
  } }, el("label", { for: id, text: label }), area, el("p", {}, el("button", { type: "submit", text: button })), note);
  form.showDelivery = (delivered) => {
    note.hidden = false;
    note.classList.toggle("queued", !delivered);
    note.textContent = delivered
      ? "Recorded on the server."
      : "Saved on this device; it will be sent when the server answers.";
  };
  return form;
}
