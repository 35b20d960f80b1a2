// @ts-check
// A completion said where the learner is looking, never over what they need next: a polite live
// region in the page's flow, moved to just after the block the learner last used (the form they
// sent, the controls they changed), so it takes its own line there instead of covering a control or
// the numbers the action changed. It stays until their next action (a click or a key), not on a timer.

import { el } from "./dom.js";

let region = null;

// Made once, empty, as the page starts: a live region must exist before its text changes.
export function announcer() {
  if (!region) {
    region = el("div", {
      class: "announcement",
      role: "status",
      "aria-live": "polite",
      dataset: { announce: "checkpoint" },
      hidden: true,
    });
    document.body.append(region);
    // The next action clears it: a click (once its target is chosen, so nothing moves under the
    // pointer between press and release) or a key, captured before the action's own handlers, which
    // may announce again.
    for (const kind of ["click", "keydown"])
      document.addEventListener(
        kind,
        () => {
          region.hidden = true;
        },
        true,
      );
  }
  return region;
}

// The block an element belongs to: the announcement goes after it, in the flow.
const BLOCKS = "form, fieldset, .wb-checklist, section, iframe";

export function announce(text, near = document.activeElement) {
  const box = announcer();
  const block = near && near !== document.body ? near.closest(BLOCKS) : null;
  if (block?.parentElement) block.after(box);
  box.hidden = false;
  box.textContent = text;
}
