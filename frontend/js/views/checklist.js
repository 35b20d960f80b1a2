// @ts-check
// An explorable's manipulations as a checklist: each item ticks when done (data-done).

import { ensureSession, getJSON, queued } from "../api.js";
import { announce } from "./announce.js";
import { el } from "./dom.js";
import { t } from "../i18n.js";

// The manipulations already done, on the server or queued on this device and not yet sent: added
// to `done`, and `draw()` called with what this device holds, then again with the server's.
export async function restoreDone(done, { lesson, instance }, draw) {
  for (const e of queued())
    if (e.instance_id === instance && e.data && e.data.manipulation) done.add(e.data.manipulation);
  draw();
  try {
    const learner = await ensureSession();
    const progress = await getJSON(`/api/v1/learners/${encodeURIComponent(learner)}/progress?lesson=${lesson}`);
    const experiment = progress.lessons[0].checkpoints.find((c) => c.id === "experiment");
    for (const m of experiment?.manipulations || []) done.add(m);
  } catch {
    // offline, or no session yet: what this device holds is shown
  }
  draw();
}

// `manipulations`: [{id, text}] in the lesson's order (text marked for translation).
// A manipulation just done, said as both workbenches say it (views/announce.js: after the controls used).
export function sayDone(done, manipulations, id) {
  announce(
    done.size === manipulations.length
      ? t("All four manipulations done: the experiment checkpoint is complete.")
      : t("Manipulation {done} of {all} done: {text}", {
          done: done.size,
          all: manipulations.length,
          text: t(manipulations.find((m) => m.id === id).text),
        }),
  );
}

export function checklist(done, manipulations) {
  const MANIPULATIONS = manipulations;
  const items = MANIPULATIONS.map((m, k) =>
    el(
      "li",
      { dataset: { manipulation: m.id, done: String(done.has(m.id)) } },
      el("span", { class: "tick", "aria-hidden": "true", text: done.has(m.id) ? "✓" : String(k + 1) }),
      el(
        "span",
        {},
        t(m.text),
        el("span", { class: "visually-hidden", text: done.has(m.id) ? t(" (done)") : t(" (not done yet)") }),
      ),
    ),
  );
  const all = done.size >= MANIPULATIONS.length;
  return [
    el("ol", { class: "checklist" }, items),
    el("p", {
      class: "checklist-note",
      text: all
        ? t("All four done: the experiment checkpoint is complete.")
        : t("{done} of {all} done; the experiment checkpoint completes when all four are.", {
            done: done.size,
            all: MANIPULATIONS.length,
          }),
    }),
  ];
}
