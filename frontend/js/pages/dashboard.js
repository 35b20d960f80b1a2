// @ts-check
// The instructor dashboard: funnel, events over time, parameters changed, mistakes, learners.
// What it shows (lesson, date range) lives in the URL hash, so a link reproduces the view.

import { getJSON, postJSON } from "../api.js";
import { HashState } from "../hash-state.js";
import { t } from "../i18n.js";
import { $, startPage } from "../shell.js";
import { charts, checkpointTitles, privacyNote, rangeText } from "../views/dashboard-charts.js";
import { drawn, el } from "../views/dom.js";
import { itemsView } from "../views/item-stats.js";
import { learnersTable } from "../views/learners-table.js";

const KEY = "workbench.analyticsKey";
const RANGES = ["7", "30", "all"];
const BASE = "/api/v1/analytics";
// The learners table's language filter (moved beside the table each time it is drawn) and the
// languages this service offers, by tag, in their own names.
const FILTER = $("locale-filter");
const LOCALE = $("locale");
const LANGUAGES = Object.fromEntries([...LOCALE.options].filter((o) => o.value).map((o) => [o.value, o.textContent]));

// What the dashboard shows, in the URL hash (hash-state.js).
const VIEW = new HashState([
  { name: "lesson", type: "string", default: "", kept: true },
  { name: "range", type: "string", default: "30", values: RANGES, kept: true },
  { name: "locale", type: "string", default: "", check: (v) => v in LANGUAGES },
]);
startPage();

// Whole days back from the start of today (UTC), or null for all time.
function since(range) {
  if (range === "all") return null;
  const today = new Date();
  today.setUTCHours(0, 0, 0, 0);
  return new Date(today.getTime() - (Number(range) - 1) * 86400000);
}

// One lesson's analytics over the view's range, every report at once.
async function figures(view, headers) {
  const lesson = encodeURIComponent(view.lesson);
  const from = since(view.range);
  const fromParam = from ? `from=${encodeURIComponent(from.toISOString())}` : "";
  const dates = fromParam ? `?${fromParam}` : "";
  const series = `${BASE}/events/timeseries?bucket=day&group_by=event&lesson=${lesson}${fromParam ? `&${fromParam}` : ""}`;
  const reports = ["funnel", "parameters", "mistakes", "durations"].map((r) =>
    getJSON(`${BASE}/lessons/${lesson}/${r}${dates}`, headers),
  );
  const [funnel, parameters, mistakes, durations, timeseries, items] = await Promise.all([
    ...reports,
    getJSON(series, headers),
    getJSON(`${BASE}/lessons/${lesson}/items`, headers),
  ]);
  return { funnel, parameters, mistakes, durations, series: timeseries, items, from, k: funnel.k, range: view.range };
}

async function show(key) {
  const headers = { Authorization: `Bearer ${key}` };
  const view = /** @type {any} */ (VIEW.load());
  $("status").textContent = t("Loading…");
  const { lessons } = await getJSON("/api/v1/lessons");
  if (!lessons.some((l) => l.id === view.lesson)) view.lesson = lessons[0].id;
  $("lesson").replaceChildren(...lessons.map((l) => el("option", { value: l.id, text: l.title })));
  $("lesson").value = view.lesson;
  $("range").value = view.range;
  LOCALE.value = view.locale;
  $("view-form").hidden = false;
  VIEW.save(view);
  const summary = lessons.find((l) => l.id === view.lesson);
  const f = { ...(await figures(view, headers)), summary };
  const noLearners = f.funnel.started === 0;
  // A figure over nobody is not drawn (it would only say "hidden"): with no learner starting in the range the
  // cohort's charts go; with no event in it either, every chart does, and the note says why.
  const anything = !noLearners || f.series.rows.some((r) => r.events === null || r.events > 0);
  const learners = { base: BASE, headers, view, summary, k: f.k, languages: LANGUAGES, filter: FILTER };
  $("charts").replaceChildren(
    el("p", { class: "platform-name", id: "platform", dataset: { platform: f.funnel.platform } }, platform(f)),
    // replaceChildren is the DOM's, not el(): a null would be drawn as the word "null"
    ...(noLearners ? [noLearnersNote(view.range)] : []),
    ...(anything ? [privacyNote(f.k), charts(f)] : []),
    ...(noLearners || !f.items.items.length ? [] : [itemsView(f.items, f.k)]),
    await learnersTable(learners),
    exportButtons(headers),
  );
  $("status").textContent = "";
}

const platform = (f) => t("Platform: {name}", { name: f.funnel.platform });

function noLearnersNote(range) {
  const text =
    range === "all"
      ? t("No learners yet: no learner of this platform has started this lesson.")
      : t("No learners yet in {range}: no learner of this platform started this lesson then.", {
          range: rangeText(range),
        });
  return el("p", { class: "note", id: "no-learners", dataset: { empty: "true" }, text });
}

// Every event the key's platform holds, as the export endpoint streams it (the key is sent as a
// header, so the download goes through fetch and a Blob rather than a plain link).
function exportButtons(headers) {
  const status = el("span", { role: "status" });
  const download = async (format) => {
    status.textContent = t("Preparing the {format} export…", { format: format.toUpperCase() });
    try {
      const response = await fetch(`/api/v1/analytics/events/export?format=${format}`, { headers });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const link = el("a", { href: URL.createObjectURL(await response.blob()), download: `events.${format}` });
      document.body.append(link);
      link.click();
      link.remove();
      status.textContent = t("Exported {file}.", { file: `events.${format}` });
    } catch (error) {
      status.textContent = t("Could not export: {reason}", { reason: error.message });
    }
  };
  const button = (format, text) =>
    el("button", { type: "button", class: "secondary", id: `export-${format}`, text, onclick: () => download(format) });
  return el(
    "p",
    { class: "exports" },
    t("Export every event (your platform's raw data, not hidden: see above):"),
    " ",
    button("csv", "CSV"),
    " ",
    button("ndjson", "NDJSON"),
    " ",
    status,
  );
}

// Opened from a course platform by an instructor (LTI): that course's learners, under the
// pseudonyms their progress is kept by; the names the platform knows never reach this page.
async function showCourse() {
  const me = await postJSON("/api/v1/session"); // only an instructor launched from a course has one to show
  if (!me.course) return;
  const response = await fetch("/lti/course", { credentials: "same-origin" });
  if (!response.ok) return;
  const course = await response.json();
  const { lessons } = await getJSON("/api/v1/lessons");
  const rows =
    course.learners === null
      ? [el("p", { class: "hidden-group", text: t("Learners hidden: {count}.", { count: course.hidden }) })]
      : [courseTable(course, lessons)];
  $("course").replaceChildren(
    el("h2", { id: "course-title", text: t("Your course: {course}", { course: course.course }) }),
    ...rows,
  );
  $("course").hidden = false;
}

function courseTable(course, lessons) {
  const named = new Map(lessons.map((l) => [l.id, { title: l.title, checkpoint: checkpointTitles(l) }]));
  const done = (lesson, ids) =>
    named.has(lesson)
      ? `${named.get(lesson).title}: ${ids.map(named.get(lesson).checkpoint).join(", ")}`
      : `${lesson}: ${ids.join(", ")}`;
  const completed = (l) =>
    Object.entries(l.completed)
      .map(([lesson, ids]) => done(lesson, ids))
      .join("; ") || t("none yet");
  const head = [t("Learner"), t("Completed checkpoints")].map((text) => el("th", { scope: "col", text }));
  const body = course.learners.map((l) =>
    el("tr", {}, el("td", { text: l.learner }), el("td", { text: completed(l) })),
  );
  return el("table", { class: "learners" }, el("thead", {}, el("tr", {}, ...head)), el("tbody", {}, ...body));
}

function init() {
  const stored = sessionStorage.getItem(KEY);
  const refresh = () => {
    const key = sessionStorage.getItem(KEY);
    if (key)
      show(key).catch((error) => {
        $("status").textContent = t("Could not load analytics: {reason}", { reason: error.message });
      });
  };
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY, $("api-key").value.trim());
    refresh();
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    $("api-key").value = "";
    $("charts").replaceChildren();
    $("view-form").hidden = true;
  });
  const changed = () => {
    VIEW.save({ lesson: $("lesson").value, range: $("range").value, locale: LOCALE.value });
    refresh();
  };
  $("view-form").addEventListener("change", changed);
  LOCALE.addEventListener("change", changed);
  VIEW.onChange(refresh);
  if (stored) {
    $("api-key").value = stored;
    refresh();
  }
  showCourse()
    .catch((error) => {
      $("status").textContent = t("Could not load your course: {reason}", { reason: error.message });
    })
    .finally(() => {
      drawn();
    });
}

init();
