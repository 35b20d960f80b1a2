// @ts-check
// The explorable a lesson embeds (an iframe: the workbench, or another explorable): loaded when the learner
// nears it, given a state by the lesson's failure-mode links, read back for the exercise's commands, and
// scrolled so its inputs and weights share the screen when the learner works it.

import { forward } from "../hash-state.js";
import { $ } from "../shell.js";
import { consistent, defaults, STATE } from "../state.js";
import { el } from "./dom.js";

const WORKBENCH_PAGE = "/explorables/multi-head-attention";

/** The embedded workbench's state: in its page's hash once loaded, in its src until then. @param {any} frame */
function workbenchState(frame) {
  return frame.dataset.loaded === "true" ? STATE.load(frame.contentWindow) : STATE.read(new URL(frame.src).hash);
}

/** Gives the embedded workbench a state: its page redraws once loaded; before, it loads with it. */
function setWorkbenchState(frame, state) {
  if (frame.dataset.loaded === "true") STATE.send(state, frame.contentWindow);
  else frame.src = STATE.link(state, frame.src);
}

/**
 * The embedded workbench's configuration as a standalone workbench link; another explorable's own address,
 * its state in its hash (the online softmax's tokens and block size).
 */
export function workbenchLink() {
  const frame = $("workbench-frame");
  const src = frame && new URL(frame.src, location.href);
  if (src && src.pathname !== WORKBENCH_PAGE)
    return frame.dataset.loaded === "true" ? frame.contentWindow.location.href : src.href;
  let state = defaults();
  try {
    if (frame) state = workbenchState(frame);
  } catch {
    // not loaded yet
  }
  return STATE.link(state, location.origin + WORKBENCH_PAGE);
}

/**
 * The explorable's frame, loaded when the learner nears it: on a phone it is far below the text, and a reader
 * who has not got there yet should not wait for its drawing (docs/decisions.md).
 * @param {any} block the lesson's explorable block
 */
export function explorableFrame(block) {
  return el("iframe", {
    src: block.src,
    title: block.title,
    height: block.height || "850",
    id: "workbench-frame",
    name: "workbench",
    loading: "lazy",
    onload: (e) => {
      e.target.dataset.loaded = "true";
    },
  });
}

/** Each failure mode's link opens in the lesson's own explorable, its tokens kept: the lesson stays. @param {HTMLElement} section */
export function failureModeLinks(section) {
  for (const a of /** @type {NodeListOf<HTMLAnchorElement>} */ (section.querySelectorAll("a[data-failure-mode]"))) {
    a.addEventListener("click", (e) => {
      const iframe = $("workbench-frame");
      if (!iframe || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return; // a new tab: the page has a way back
      e.preventDefault();
      const target = new URL(a.href);
      if (target.pathname !== new URL(iframe.src, location.href).pathname) return;
      if (target.pathname !== WORKBENCH_PAGE) {
        // another explorable (the KV cache's) reads its own hash, and keeps only its own keys
        if (iframe.dataset.loaded === "true") forward(target.hash, iframe.contentWindow);
        else iframe.src = target.href;
      } else {
        // Its tokens kept; what the link sets; W_O and the reuse toggle back to their defaults.
        const { wo, reuse } = defaults();
        setWorkbenchState(iframe, consistent({ ...workbenchState(iframe), wo, reuse, ...STATE.partial(target.hash) }));
      }
      iframe.scrollIntoView({ block: "start", behavior: "smooth" });
    });
  }
}

/** Scrolls so the workbench's inputs and both heatmaps (its rows top..bottom) share the screen. */
export function showTogether(iframe, top, bottom) {
  const box = iframe.getBoundingClientRect();
  const [from, to] = [box.top + top, box.top + bottom];
  if (to - from > window.innerHeight) return; // taller than the screen: leave the learner's scroll alone
  if (from < 0) window.scrollBy(0, from - 8);
  else if (to > window.innerHeight) window.scrollBy(0, to - window.innerHeight + 8);
}
