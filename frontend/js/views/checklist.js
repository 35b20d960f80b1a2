// An explorable's manipulations as a checklist: each item ticks when done (data-done).

import { el } from "./dom.js";
import { t } from "../i18n.js";

// `manipulations`: [{id, text}] in the lesson's order (text marked for translation).
export function checklist(done, manipulations) {
  const MANIPULATIONS = manipulations;
  const items = MANIPULATIONS.map((m, k) => el("li", { dataset: { manipulation: m.id, done: String(done.has(m.id)) } },
    el("span", { class: "tick", "aria-hidden": "true", text: done.has(m.id) ? "✓" : String(k + 1) }),
    el("span", {}, t(m.text), el("span", { class: "visually-hidden", text: done.has(m.id) ? t(" (done)") : t(" (not done yet)") }))));
  const all = done.size >= MANIPULATIONS.length;
  return [el("ol", { class: "checklist" }, items),
    el("p", { class: "checklist-note", text: all ? t("All four done: the experiment checkpoint is complete.")
      : t("{done} of {all} done; the experiment checkpoint completes when all four are.", { done: done.size, all: MANIPULATIONS.length }) })];
}
