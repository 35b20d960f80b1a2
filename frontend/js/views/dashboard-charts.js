// @ts-check
// The dashboard's charts of one lesson over a range of days: learners per checkpoint, how the implement
// checkpoint was completed, minutes to complete, events per day, parameters changed, the manipulations
// and the mistakes; each hides a group smaller than k (views/bars.js) and says why (`privacyNote`).

import { t } from "../i18n.js";
import { barChart, hidden } from "./bars.js";
import { columnChart } from "./columns.js";
import { el } from "./dom.js";

const MANIPULATION_NAMES = {
  "last-two": t("changed only dimension 3 or 4"),
  "first-two": t("changed only dimension 1 or 2"),
  "causal-mask": t("toggled the causal mask"),
  "broken-reuse": t("enabled the broken reuse"),
  "step-decode": t("stepped the decode"),
  "switch-kind": t("switched to GQA, MQA or MLA"),
  "choose-preset": t("chose a released model"),
  "failure-mode": t("broke the decode with a failure mode"),
};

/**
 * @typedef {object} Figures one lesson's analytics, as the dashboard read them
 * @property {number} k the k-anonymity threshold
 * @property {any} funnel @property {any} series @property {any} parameters @property {any} mistakes
 * @property {any} durations @property {any} summary the lesson's summary (its checkpoints)
 * @property {string} range "7", "30" or "all" @property {Date | null} from the first day counted
 */

const pct = (x) =>
  x === null || x === undefined ? "" : t("{percent} % of the previous step", { percent: Math.round(x * 100) });
const minutes = (s) => (s === null ? null : Math.round(s / 6) / 10);

/** One label per checkpoint on every chart and table: the lesson's title for it. @param {any} summary */
export function checkpointTitles(summary) {
  const titles = new Map((summary?.checkpoints ? summary.checkpoints : []).map((c) => [c.id, c.title]));
  return (id) => titles.get(id) || id;
}

/** The range in words: "all time", "the last 30 days". @param {string} range */
export const rangeText = (range) => (range === "all" ? t("all time") : t("the last {days} days", { days: range }));

/** Every chart the lesson has (the exercise's two when a checkpoint asks for passing tests). @param {Figures} f */
export function charts(f) {
  const noLearners = f.funnel.started === 0;
  const hasExercise = (f.summary?.checkpoints || []).some((c) => c.requires === "passing-tests");
  const cohort = (title) =>
    f.range === "all" ? title : t("{title}, learners who started in {range}", { title, range: rangeText(f.range) });
  const during = (title) => (f.range === "all" ? title : t("{title}, {range}", { title, range: rangeText(f.range) }));
  return el(
    "div",
    { class: "chart-grid" },
    ...(noLearners ? [] : [funnelChart(f, cohort)]),
    ...(hasExercise && !noLearners ? [implementChart(f, cohort)] : []),
    ...(noLearners ? [] : [durationsChart(f, cohort)]),
    timeseriesChart(f),
    parametersChart(f, during),
    ...(f.parameters.manipulations ? [manipulationsChart(f, during)] : []),
    ...(hasExercise ? [mistakesChart(f, during)] : []),
  );
}

function funnelChart(f, cohort) {
  const steps = f.funnel.steps.map((s) => ({ label: s.title, value: s.learners, note: pct(s.share_of_previous) }));
  return barChart({
    k: f.k,
    id: "funnel",
    title: cohort(t("Learners per checkpoint")),
    valueLabel: t("learners"),
    rows: [{ label: t("started"), value: f.funnel.started }, ...steps],
  });
}

function implementChart(f, cohort) {
  const rows = f.funnel.steps
    .filter((s) => "verified" in s)
    .flatMap((s) => [
      { label: t("verified by the server (challenge)"), value: s.verified, note: s.title },
      { label: t("reported by the platform"), value: s.reported, note: s.title },
    ]);
  const title = cohort(t("How the implement checkpoint was completed"));
  return barChart({ k: f.k, id: "implement", title, valueLabel: t("learners"), rows });
}

function durationsChart(f, cohort) {
  const titled = checkpointTitles(f.summary);
  const rows = f.durations.checkpoints.map((c) => ({
    label: titled(c.checkpoint),
    value: minutes(c.median_seconds),
    note: c.p90_seconds === null ? "" : t("p90 {minutes} min", { minutes: minutes(c.p90_seconds) }),
  }));
  const title = cohort(t("Median minutes to complete (from first event)"));
  return barChart({ k: f.k, id: "durations", title, valueLabel: t("minutes"), rows });
}

function timeseriesChart(f) {
  const perDay = new Map();
  for (const row of f.series.rows) {
    // A day with any hidden group is hidden: a sum of the visible part would pass for the whole.
    const day = row.bucket.slice(0, 10);
    const sofar = perDay.has(day) ? perDay.get(day) : 0;
    perDay.set(day, sofar === null || row.events === null ? null : sofar + row.events);
  }
  const today = new Date().toISOString().slice(0, 10);
  const first = [...perDay.keys()].sort()[0] || today;
  const days = everyDay(f.from || first, today).map((day) => ({ day, value: perDay.has(day) ? perDay.get(day) : 0 }));
  const title = t("Events per day, {range} (UTC)", { range: rangeText(f.range) });
  return columnChart({ k: f.k, id: "timeseries", title, valueLabel: t("events"), openDay: today, days });
}

function parametersChart(f, during) {
  const rows = f.parameters.parameters.map((p) => ({
    label: p.description,
    value: p.times,
    note: p.learners === null ? "" : t("{count} learners", { count: p.learners }),
  }));
  return barChart({
    k: f.k,
    id: "parameters",
    title: during(t("Workbench parameters changed")),
    valueLabel: t("changes"),
    rows,
  });
}

function manipulationsChart(f, during) {
  const { manipulations, checkpoint } = f.parameters.manipulations;
  const each = manipulations.map((m, i) => ({
    label: `${i + 1}. ${MANIPULATION_NAMES[m.id] || m.id}`,
    value: m.learners,
  }));
  const all = {
    label: t("all of them: {checkpoint}", { checkpoint: checkpointTitles(f.summary)(checkpoint) }),
    value: f.funnel.steps.find((s) => s.checkpoint === checkpoint)?.learners ?? null,
    note: t("learners who started in the range"),
  };
  const title = during(t("The workbench's manipulations, in the lesson's order"));
  return barChart({ k: f.k, id: "manipulations", valueLabel: t("learners"), title, rows: [...each, all] });
}

function mistakesChart(f, during) {
  const rows = f.mistakes.mistakes.map((m) => ({
    label: m.name || m.id,
    value: m.times,
    note: m.learners === null ? "" : t("{count} learners", { count: m.learners }),
  }));
  const title = during(t("Mistakes found by the exercise checker"));
  return barChart({ k: f.k, id: "mistakes", title, valueLabel: t("checks"), rows });
}

/**
 * Every UTC day from `start` (a Date or "YYYY-MM-DD") to `end` ("YYYY-MM-DD"): days without events are on the
 * axis as 0 (nothing happened), unlike hidden days (null).
 * @param {Date | string} start @param {string} end
 */
function everyDay(start, end) {
  const days = [];
  const at = new Date(typeof start === "string" ? `${start}T00:00:00Z` : start.getTime());
  for (let i = 0; i < 3660; i++) {
    const day = at.toISOString().slice(0, 10);
    days.push(day);
    if (day >= end) break;
    at.setUTCDate(at.getUTCDate() + 1);
  }
  return days;
}

/** Why a figure can say "hidden", and what the export is: before the charts, in plain words. @param {number} k */
export function privacyNote(k) {
  return el(
    "details",
    { class: "privacy", id: "why-hidden" },
    el("summary", { text: t("Why some figures say “{hidden}”", { hidden: hidden(k) }) }),
    el("p", {
      text: t(
        "A chart never shows a group of fewer than {k} learners (the service's k-anonymity threshold, {setting}): in a small class a count, a median time or a mistake could point at one person. The group is hidden, never drawn as a number or a zero.",
        { k, setting: "WORKBENCH_K_ANONYMITY" },
      ),
    }),
    el("p", {
      text: t(
        "The export below is different: it is your platform's own raw data, every event your platform sent, learner by learner under the pseudonymous ids your platform knows them by, so it is not hidden. Handle it as you handle your platform's records.",
      ),
    }),
  );
}
