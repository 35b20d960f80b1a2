// A completion said where the learner is looking: a polite live region placed just below the
// element they last used (the button they clicked, the toggle they flipped), so it is on screen
// whatever the page's size or scroll, inside an embedded workbench too; it fades after a while.

import { el } from "./dom.js";

const SHOWN_MS = 12000;
let region = null;
let timer = 0;

// Made once, empty, as the page starts: a live region must exist before its text changes.
export function announcer() {
  if (!region) {
    region = el("div", { class: "announcement", role: "status", "aria-live": "polite", dataset: { announce: "checkpoint" }, hidden: true });
    document.body.append(region);
  }
  return region;
}

export function announce(text, near = document.activeElement) {
  const box = announcer();
  const anchor = near && near !== document.body ? near.getBoundingClientRect() : null;
  const top = anchor && anchor.bottom + 80 < window.innerHeight ? anchor.bottom + 8 : window.innerHeight - 96;
  box.style.top = `${Math.max(8, top) + window.scrollY}px`;
  box.hidden = false;
  box.textContent = text;
  clearTimeout(timer);
  timer = setTimeout(() => { box.hidden = true; }, SHOWN_MS);
}
