// @ts-check
// The one shell every page starts with (frontend/js/pages/*.js): the element lookup, the announcer (a
// completion said where the learner looks: views/announce.js), an embedded page's height for its host
// (embed.js), the outbox (events queued on this device, sent and sent again: api.js) and, on an
// explorable, the experiment: the lesson's manipulations ticked as they are done, drawn into the page's
// #checklist, said once, and restored from this device and the server (views/experiment.js).

import { startOutbox } from "./api.js";
import { embedded, reportHeight } from "./embed.js";
import { announcer } from "./views/announce.js";
import { Experiment } from "./views/experiment.js";

/**
 * A page's element by its id, from the page's own markup (frontend/pages/*.html): typed by its use
 * (a select, an input, a section), as the markup declares it.
 * @param {string} id
 * @returns {any}
 */
export function $(id) {
  return document.getElementById(id);
}

/**
 * @typedef {object} ExperimentOptions
 * @property {string} lesson the lesson whose `experiment` checkpoint the manipulations complete
 * @property {string} instance the explorable's instance id, as its events carry it
 * @property {{ id: string, text: string }[]} manipulations in the lesson's order (text marked for translation)
 * @property {() => void} [onDraw] what the page adds once the checklist is drawn
 */

/**
 * A page, started before its first drawing: the announcer made (a live region exists before it speaks) and
 * the page's height sent to a host that embeds it; with `experiment`, the checklist it ticks.
 * @param {ExperimentOptions} [experiment]
 */
export function startPage(experiment) {
  announcer();
  reportHeight();
  const checklist = experiment ? new Experiment({ ...experiment, node: $("checklist") }) : null;
  return {
    experiment: checklist,
    /** Once the page is first drawn: the events waiting on this device sent, and what was done restored. */
    drawn() {
      startOutbox();
      return checklist ? checklist.restore() : Promise.resolve();
    },
  };
}

/** An explorable's `lesson` hash property: the lesson a link came from, offered as the way back to it. */
export const FROM_LESSON = {
  name: "lesson",
  type: "string",
  default: "",
  check: (/** @type {string} */ v) => v === "" || /^[a-z0-9-]{1,64}$/.test(v),
};

/**
 * The page's way back (#back): to `lesson`, or the page's own lesson; hidden in a host's frame unless a link
 * named the lesson it came from.
 * @param {string} lesson
 */
export function backLink(lesson) {
  const back = $("back");
  back.hidden = embedded && !lesson;
  if (lesson) back.querySelector("a").href = `/lessons/${lesson}`;
}
