// @ts-check
// When a page runs inside another page's iframe: tell the host our height (so the host can size
// the iframe to its content and never nest a scroll area) and pass on what the learner did.

export const embedded = window.parent !== window;

export function post(message) {
  // The messages carry the workbench's parameters and URL hash only, never learner data.
  if (embedded) window.parent.postMessage({ source: "attention-workbench", ...message }, "*");
}

export function reportHeight() {
  if (!embedded) return;
  document.documentElement.classList.add("embedded");
  let last = 0;
  const send = () => {
    const height = Math.ceil(document.documentElement.getBoundingClientRect().height);
    if (height !== last) {
      last = height;
      post({ type: "height", height });
    }
  };
  new ResizeObserver(send).observe(document.documentElement);
  send();
}
