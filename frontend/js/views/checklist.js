// The lesson's four manipulations as a checklist: each item ticks when done (data-done).

import { MANIPULATIONS } from "../manipulations.js";
import { el } from "./dom.js";

export function checklist(done) {
  const items = MANIPULATIONS.map((m, k) => el("li", { dataset: { manipulation: m.id, done: String(done.has(m.id)) } },
    el("span", { class: "tick", "aria-hidden": "true", text: done.has(m.id) ? "✓" : String(k + 1) }),
    el("span", {}, m.text, el("span", { class: "visually-hidden", text: done.has(m.id) ? " (done)" : " (not done yet)" }))));
  const all = done.size >= MANIPULATIONS.length;
  return [el("ol", { class: "checklist" }, items),
    el("p", { class: "checklist-note", text: all ? "All four done: the experiment checkpoint is complete."
      : `${done.size} of ${MANIPULATIONS.length} done; the experiment checkpoint completes when all four are.` })];
}
