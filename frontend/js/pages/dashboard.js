// The instructor dashboard: funnel, events over time, parameters changed, mistakes, learners.
// What it shows (lesson, date range) lives in the URL hash, so a link reproduces the view.

import { ApiError, getJSON, postJSON } from "../api.js";
import { HashState } from "../hash-state.js";
import { barChart, hidden } from "../views/bars.js";
import { columnChart } from "../views/columns.js";
import { drawn, el } from "../views/dom.js";
import { itemsView } from "../views/item-stats.js";
import { scrollRegion } from "../views/matrix.js";
import { t } from "../i18n.js";

const KEY = "workbench.analyticsKey";
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
const RANGES = ["7", "30", "all"];
// The learners table's language filter (moved beside the table each time it is drawn) and the
// languages this service offers, by tag, in their own names.
const FILTER = document.getElementById("locale-filter");
const LOCALE = document.getElementById("locale");
const LANGUAGES = Object.fromEntries([...LOCALE.options].filter((o) => o.value).map((o) => [o.value, o.textContent]));
const LEARNERS_PAGE = 20;
const $ = (id) => document.getElementById(id);

// What the dashboard shows, in the URL hash (hash-state.js).
const VIEW = new HashState([
  { name: "lesson", type: "string", default: "", kept: true },
  { name: "range", type: "string", default: "30", values: RANGES, kept: true },
  { name: "locale", type: "string", default: "", check: (v) => v in LANGUAGES },
]);

// Whole days back from the start of today (UTC), or null for all time.
function since(range) {
  if (range === "all") return null;
  const today = new Date();
  today.setUTCHours(0, 0, 0, 0);
  return new Date(today.getTime() - (Number(range) - 1) * 86400000);
}
const pct = (x) =>
  x === null || x === undefined ? "" : t("{percent} % of the previous step", { percent: Math.round(x * 100) });

async function show(key) {
  const headers = { Authorization: `Bearer ${key}` };
  const base = "/api/v1/analytics";
  const view = VIEW.load();
  $("status").textContent = t("Loading…");
  const { lessons } = await getJSON("/api/v1/lessons");
  if (!lessons.some((l) => l.id === view.lesson)) view.lesson = lessons[0].id;
  $("lesson").replaceChildren(...lessons.map((l) => el("option", { value: l.id, text: l.title })));
  $("lesson").value = view.lesson;
  $("range").value = view.range;
  $("view-form").hidden = false;
  VIEW.save(view);
  const lesson = encodeURIComponent(view.lesson);
  const from = since(view.range);
  const fromParam = from ? `from=${encodeURIComponent(from.toISOString())}` : "";
  const dates = fromParam ? `?${fromParam}` : "";
  const [funnel, series, parameters, mistakes, durations, items] = await Promise.all([
    getJSON(`${base}/lessons/${lesson}/funnel${dates}`, headers),
    getJSON(
      `${base}/events/timeseries?bucket=day&group_by=event&lesson=${lesson}${fromParam ? `&${fromParam}` : ""}`,
      headers,
    ),
    getJSON(`${base}/lessons/${lesson}/parameters${dates}`, headers),
    getJSON(`${base}/lessons/${lesson}/mistakes${dates}`, headers),
    getJSON(`${base}/lessons/${lesson}/durations${dates}`, headers),
    getJSON(`${base}/lessons/${lesson}/items`, headers),
  ]);
  const perDay = new Map();
  for (const row of series.rows) {
    // A day with any hidden group is hidden: a sum of the visible part would pass for the whole.
    const day = row.bucket.slice(0, 10);
    const sofar = perDay.has(day) ? perDay.get(day) : 0;
    perDay.set(day, sofar === null || row.events === null ? null : sofar + row.events);
  }
  const today = new Date().toISOString().slice(0, 10);
  const minutes = (s) => (s === null ? null : Math.round(s / 6) / 10);
  const k = funnel.k;
  const rangeText = view.range === "all" ? t("all time") : t("the last {days} days", { days: view.range });
  const cohort = (title) =>
    view.range === "all" ? title : t("{title}, learners who started in {range}", { title, range: rangeText });
  const during = (title) => (view.range === "all" ? title : t("{title}, {range}", { title, range: rangeText }));
  const summary = lessons.find((l) => l.id === view.lesson);
  const titled = checkpointTitles(summary);
  const noLearners = funnel.started === 0;
  // Charts only for what the lesson has: the exercise's two when a checkpoint asks for passing tests.
  const hasExercise = (summary?.checkpoints || []).some((c) => c.requires === "passing-tests");
  $("charts").replaceChildren(
    el(
      "p",
      { class: "platform-name", id: "platform", dataset: { platform: funnel.platform } },
      t("Platform: {name}", { name: funnel.platform }),
    ),
    // replaceChildren is the DOM's, not el(): a null would be drawn as the word "null"
    ...(noLearners
      ? [
          el("p", {
            class: "note",
            id: "no-learners",
            dataset: { empty: "true" },
            text:
              view.range === "all"
                ? t("No learners yet: no learner of this platform has started this lesson.")
                : t("No learners yet in {range}: no learner of this platform started this lesson then.", {
                    range: rangeText,
                  }),
          }),
        ]
      : []),
    // A figure over nobody is not drawn (it would only say "hidden"): with no learner starting in the
    // range the cohort's charts go; with no event in it either, every chart does, and the note says why.
    ...(noLearners && !series.rows.some((r) => r.events === null || r.events > 0) ? [] : [privacyNote(k), charts()]),
    ...(noLearners || !items.items.length ? [] : [itemsView(items, k)]),
    await learnersTable(base, headers, view, summary, k),
    exportButtons(headers),
  );
  $("status").textContent = "";

  function charts() {
    return el(
      "div",
      { class: "chart-grid" },
      ...(noLearners
        ? []
        : [
            barChart({
              k,
              id: "funnel",
              title: cohort(t("Learners per checkpoint")),
              valueLabel: t("learners"),
              rows: [
                { label: t("started"), value: funnel.started },
                ...funnel.steps.map((s) => ({ label: s.title, value: s.learners, note: pct(s.share_of_previous) })),
              ],
            }),
          ]),
      ...(hasExercise && !noLearners
        ? [
            barChart({
              k,
              id: "implement",
              title: cohort(t("How the implement checkpoint was completed")),
              valueLabel: t("learners"),
              rows: funnel.steps
                .filter((s) => "verified" in s)
                .flatMap((s) => [
                  { label: t("verified by the server (challenge)"), value: s.verified, note: s.title },
                  { label: t("reported by the platform"), value: s.reported, note: s.title },
                ]),
            }),
          ]
        : []),
      ...(noLearners
        ? []
        : [
            barChart({
              k,
              id: "durations",
              title: cohort(t("Median minutes to complete (from first event)")),
              valueLabel: t("minutes"),
              rows: durations.checkpoints.map((c) => ({
                label: titled(c.checkpoint),
                value: minutes(c.median_seconds),
                note: c.p90_seconds === null ? "" : t("p90 {minutes} min", { minutes: minutes(c.p90_seconds) }),
              })),
            }),
          ]),
      columnChart({
        k,
        id: "timeseries",
        title: t("Events per day, {range} (UTC)", { range: rangeText }),
        valueLabel: t("events"),
        openDay: today,
        days: everyDay(from || firstDay(perDay, today), today).map((day) => ({
          day,
          value: perDay.has(day) ? perDay.get(day) : 0,
        })),
      }),
      barChart({
        k,
        id: "parameters",
        title: during(t("Workbench parameters changed")),
        valueLabel: t("changes"),
        rows: parameters.parameters.map((p) => ({
          label: p.description,
          value: p.times,
          note: p.learners === null ? "" : t("{count} learners", { count: p.learners }),
        })),
      }),
      ...(parameters.manipulations
        ? [
            barChart({
              k,
              id: "manipulations",
              valueLabel: t("learners"),
              title: during(t("The workbench's manipulations, in the lesson's order")),
              rows: [
                ...parameters.manipulations.manipulations.map((m, i) => ({
                  label: `${i + 1}. ${MANIPULATION_NAMES[m.id] || m.id}`,
                  value: m.learners,
                })),
                {
                  label: t("all of them: {checkpoint}", { checkpoint: titled(parameters.manipulations.checkpoint) }),
                  value:
                    funnel.steps.find((s) => s.checkpoint === parameters.manipulations.checkpoint)?.learners ?? null,
                  note: t("learners who started in the range"),
                },
              ],
            }),
          ]
        : []),
      ...(hasExercise
        ? [
            barChart({
              k,
              id: "mistakes",
              title: during(t("Mistakes found by the exercise checker")),
              valueLabel: t("checks"),
              rows: mistakes.mistakes.map((m) => ({
                label: m.name || m.id,
                value: m.times,
                note: m.learners === null ? "" : t("{count} learners", { count: m.learners }),
              })),
            }),
          ]
        : []),
    );
  }
}

// One label per checkpoint on every chart and table: the lesson's title for it.
function checkpointTitles(summary) {
  const titles = new Map((summary?.checkpoints ? summary.checkpoints : []).map((c) => [c.id, c.title]));
  return (id) => titles.get(id) || id;
}

// Why a figure can say "hidden", and what the export is: before the charts, in plain words.
function privacyNote(k) {
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

// Every UTC day from `start` (a Date or "YYYY-MM-DD") to `end` ("YYYY-MM-DD"): days without
// events are on the axis as 0 (nothing happened), unlike hidden days (null).
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

const firstDay = (perDay, today) => [...perDay.keys()].sort()[0] || today;

// The lesson's learners, a page at a time (the API returns rows only for a group of at least k).
async function learnersTable(base, headers, view, summary, k) {
  const lesson = view.lesson;
  const total = summary?.checkpoints ? summary.checkpoints.length : null;
  const body = el("tbody");
  const more = el("button", {
    type: "button",
    class: "secondary",
    id: "learners-more",
    text: t("More learners"),
    hidden: true,
  });
  const section = el(
    "section",
    { class: "chart-block", id: "learners", "aria-label": t("Learners") },
    el("h2", { text: t("Learners") }),
    localeFilter(view.locale),
    scrollRegion(
      t("Learners"),
      el(
        "table",
        { class: "data learners-table" },
        el("caption", { text: t("Each learner's progress in this lesson (pseudonymous ids)") }),
        el(
          "thead",
          {},
          el(
            "tr",
            {},
            ...[
              t("learner"),
              t("language"),
              t("started (UTC)"),
              t("checkpoints done"),
              t("last completion (UTC)"),
              t("their words"),
            ].map((text) => el("th", { scope: "col", text })),
          ),
        ),
        body,
      ),
    ),
    more,
  );
  const when = (iso) => (iso ? iso.replace("T", " ").slice(0, 16) : "");
  let cursor = null;
  const load = async () => {
    const page = await getJSON(
      `${base}/learners?lesson=${encodeURIComponent(lesson)}&limit=${LEARNERS_PAGE}` +
        (view.locale ? `&locale=${encodeURIComponent(view.locale)}` : "") +
        (cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""),
      headers,
    );
    if (page.suppressed || (!cursor && !page.learners.length)) {
      // a group of one to k-1 is hidden; none at all hides no one
      body.replaceChildren(
        el("tr", {}, el("td", { colspan: "6", text: page.suppressed ? hidden(k) : t("No learners yet.") })),
      );
      return;
    }
    for (const row of page.learners) {
      const done = Object.values(row.completed || {}).sort();
      const open = el("button", {
        type: "button",
        class: "secondary",
        text: t("Read"),
        "aria-label": t("Read {learner}'s prediction and explanation", { learner: row.learner }),
        "aria-expanded": "false",
      });
      const line = el(
        "tr",
        {},
        el("th", { scope: "row", text: row.learner }),
        el("td", { lang: row.locale || false, text: row.locale ? LANGUAGES[row.locale] || row.locale : "" }),
        el("td", { text: when(row.started_at) }),
        el("td", {
          text: total === null ? String(done.length) : t("{done} of {all}", { done: done.length, all: total }),
        }),
        el("td", { text: when(done[done.length - 1]) }),
        el("td", {}, open),
      );
      open.addEventListener("click", () => toggleTexts(line, open, row.learner, lesson, summary, headers));
      body.append(line);
    }
    cursor = page.next;
    more.hidden = !cursor;
  };
  more.addEventListener("click", () =>
    load().catch((error) => {
      $("status").textContent = t("Could not load learners: {reason}", { reason: error.message });
    }),
  );
  await load();
  return section;
}

// The learners table's language filter (the page's menu of languages, moved beside the table).
function localeFilter(locale) {
  FILTER.hidden = false;
  LOCALE.value = locale;
  return FILTER;
}

// A learner's own words (their prediction, their explanation), from the progress API: the key
// must also hold progress:read, and reads its own platform's learners only.
async function toggleTexts(line, button, learner, lesson, summary, headers) {
  const shown = line.nextElementSibling?.classList.contains("learner-texts");
  if (shown) {
    line.nextElementSibling.remove();
    button.setAttribute("aria-expanded", "false");
    button.textContent = t("Read");
    return;
  }
  const cell = el("td", { colspan: "6", text: t("Loading…") });
  line.after(el("tr", { class: "learner-texts" }, cell));
  button.setAttribute("aria-expanded", "true");
  button.textContent = t("Hide");
  try {
    const progress = await getJSON(
      `/api/v1/learners/${encodeURIComponent(learner)}/progress?lesson=${encodeURIComponent(lesson)}`,
      headers,
    );
    const texts = (progress.lessons[0] ? progress.lessons[0].checkpoints : []).filter(
      (c) => summary.checkpoints.find((s) => s.id === c.id)?.requires === "text",
    );
    cell.replaceChildren(
      el(
        "dl",
        { class: "texts", "aria-label": t("{learner}'s words", { learner }) },
        ...texts.flatMap((c) => [
          el("dt", { text: c.title }),
          el("dd", { text: c.response === null || c.response === undefined ? t("nothing written yet") : c.response }),
        ]),
      ),
    );
  } catch (error) {
    cell.textContent =
      error instanceof ApiError && error.status === 403
        ? t(
            "This key cannot read learners' words: that needs the {scope} scope as well (an operator makes one with {command}).",
            {
              scope: "progress:read",
              command: "workbench keys create --platform NAME --scopes analytics:read,progress:read",
            },
          )
        : t("Could not load the texts: {reason}", { reason: error.message });
  }
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
  return el(
    "p",
    { class: "exports" },
    t("Export every event (your platform's raw data, not hidden: see above):"),
    " ",
    el("button", { type: "button", class: "secondary", id: "export-csv", text: "CSV", onclick: () => download("csv") }),
    " ",
    el("button", {
      type: "button",
      class: "secondary",
      id: "export-ndjson",
      text: "NDJSON",
      onclick: () => download("ndjson"),
    }),
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
  const named = new Map(lessons.map((l) => [l.id, { title: l.title, checkpoint: checkpointTitles(l) }]));
  const done = (lesson, ids) =>
    named.has(lesson)
      ? `${named.get(lesson).title}: ${ids.map(named.get(lesson).checkpoint).join(", ")}`
      : `${lesson}: ${ids.join(", ")}`;
  const rows =
    course.learners === null
      ? [el("p", { class: "hidden-group", text: t("Learners hidden: {count}.", { count: course.hidden }) })]
      : [
          el(
            "table",
            { class: "learners" },
            el(
              "thead",
              {},
              el(
                "tr",
                {},
                el("th", { scope: "col", text: t("Learner") }),
                el("th", { scope: "col", text: t("Completed checkpoints") }),
              ),
            ),
            el(
              "tbody",
              {},
              ...course.learners.map((l) =>
                el(
                  "tr",
                  {},
                  el("td", { text: l.learner }),
                  el("td", {
                    text:
                      Object.entries(l.completed)
                        .map(([lesson, ids]) => done(lesson, ids))
                        .join("; ") || t("none yet"),
                  }),
                ),
              ),
            ),
          ),
        ];
  $("course").replaceChildren(
    el("h2", { id: "course-title", text: t("Your course: {course}", { course: course.course }) }),
    ...rows,
  );
  $("course").hidden = false;
}

function init() {
  const stored = sessionStorage.getItem(KEY);
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const key = $("api-key").value.trim();
    sessionStorage.setItem(KEY, key);
    show(key).catch((error) => {
      $("status").textContent = t("Could not load analytics: {reason}", { reason: error.message });
    });
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    $("api-key").value = "";
    $("charts").replaceChildren();
    $("view-form").hidden = true;
  });
  const refresh = () => {
    const key = sessionStorage.getItem(KEY);
    if (key)
      show(key).catch((error) => {
        $("status").textContent = t("Could not load analytics: {reason}", { reason: error.message });
      });
  };
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
