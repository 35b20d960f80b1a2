// @ts-check
// The dashboard's learners of one lesson, a page at a time (the API returns rows only for a group of at least
// k), each with their language, when they started, the checkpoints they completed, and their own words on a
// click (the progress API: the key must hold progress:read, and reads its own platform's learners only).

import { ApiError, getJSON } from "../api.js";
import { t } from "../i18n.js";
import { $ } from "../shell.js";
import { hidden } from "./bars.js";
import { el } from "./dom.js";
import { scrollRegion } from "./matrix.js";

const LEARNERS_PAGE = 20;
const when = (iso) => (iso ? iso.replace("T", " ").slice(0, 16) : "");

/**
 * @typedef {object} Asked what the table shows, and with which key
 * @property {string} base the analytics API's path @property {Record<string, string>} headers the key
 * @property {{ lesson: string, locale: string }} view @property {any} summary the lesson's summary
 * @property {number} k the k-anonymity threshold @property {Record<string, string>} languages tag -> name
 * @property {HTMLElement} filter the language filter, moved beside the table
 */

/** The learners table, its first page loaded. @param {Asked} asked */
export async function learnersTable(asked) {
  const body = el("tbody");
  const more = el("button", { type: "button", class: "secondary", id: "learners-more", text: t("More learners") });
  more.hidden = true;
  const columns = [
    t("learner"),
    t("language"),
    t("started (UTC)"),
    t("checkpoints done"),
    t("last completion (UTC)"),
    t("their words"),
  ];
  const table = el(
    "table",
    { class: "data learners-table" },
    el("caption", { text: t("Each learner's progress in this lesson (pseudonymous ids)") }),
    el("thead", {}, el("tr", {}, ...columns.map((text) => el("th", { scope: "col", text })))),
    body,
  );
  asked.filter.hidden = false;
  const section = el(
    "section",
    { class: "chart-block", id: "learners", "aria-label": t("Learners") },
    el("h2", { text: t("Learners") }),
    asked.filter,
    scrollRegion(t("Learners"), table),
    more,
  );
  let cursor = null;
  const load = async () => {
    const page = await getJSON(pageUrl(asked, cursor), asked.headers);
    if (page.suppressed || (!cursor && !page.learners.length)) {
      // a group of one to k-1 is hidden; none at all hides no one
      const text = page.suppressed ? hidden(asked.k) : t("No learners yet.");
      body.replaceChildren(el("tr", {}, el("td", { colspan: "6", text })));
      return;
    }
    for (const row of page.learners) body.append(learnerRow(row, asked));
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

function pageUrl(asked, cursor) {
  const { base, view } = asked;
  return (
    `${base}/learners?lesson=${encodeURIComponent(view.lesson)}&limit=${LEARNERS_PAGE}` +
    (view.locale ? `&locale=${encodeURIComponent(view.locale)}` : "") +
    (cursor ? `&cursor=${encodeURIComponent(cursor)}` : "")
  );
}

/** One learner's line, with the button that reads their words. */
function learnerRow(row, asked) {
  const total = asked.summary?.checkpoints ? asked.summary.checkpoints.length : null;
  const done = Object.values(row.completed || {}).sort();
  const open = el("button", {
    type: "button",
    class: "secondary",
    text: t("Read"),
    "aria-label": t("Read {learner}'s prediction and explanation", { learner: row.learner }),
    "aria-expanded": "false",
  });
  const language = row.locale ? asked.languages[row.locale] || row.locale : "";
  const line = el(
    "tr",
    {},
    el("th", { scope: "row", text: row.learner }),
    el("td", { lang: row.locale || false, text: language }),
    el("td", { text: when(row.started_at) }),
    el("td", { text: total === null ? String(done.length) : t("{done} of {all}", { done: done.length, all: total }) }),
    el("td", { text: when(done[done.length - 1]) }),
    el("td", {}, open),
  );
  open.addEventListener("click", () => toggleTexts(line, open, row.learner, asked));
  return line;
}

/** A learner's own words (their prediction, their explanation), under their line, or hidden again. */
async function toggleTexts(line, button, learner, asked) {
  if (line.nextElementSibling?.classList.contains("learner-texts")) {
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
    const lesson = encodeURIComponent(asked.view.lesson);
    const progress = await getJSON(
      `/api/v1/learners/${encodeURIComponent(learner)}/progress?lesson=${lesson}`,
      asked.headers,
    );
    const texts = (progress.lessons[0] ? progress.lessons[0].checkpoints : []).filter(
      (c) => asked.summary.checkpoints.find((s) => s.id === c.id)?.requires === "text",
    );
    const words = texts.flatMap((c) => [
      el("dt", { text: c.title }),
      el("dd", { text: c.response === null || c.response === undefined ? t("nothing written yet") : c.response }),
    ]);
    cell.replaceChildren(el("dl", { class: "texts", "aria-label": t("{learner}'s words", { learner }) }, ...words));
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
