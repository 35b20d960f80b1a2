// @ts-check
// A command for the learner's terminal, with a Copy button.

import { el } from "./dom.js";
import { t } from "../i18n.js";

// A command line with a Copy button; `set` replaces the text.
export function command(id) {
  const code = el("code", { id });
  const node = el(
    "div",
    { class: "command" },
    code,
    el("button", {
      type: "button",
      class: "secondary",
      text: t("Copy"),
      "aria-label": t("Copy the command"),
      onclick: () => copy(code),
    }),
  );
  return {
    node,
    set: (text) => {
      code.textContent = text;
    },
  };
}

export async function copy(code) {
  try {
    await navigator.clipboard.writeText(code.textContent);
  } catch {
    const range = document.createRange();
    range.selectNodeContents(code);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
}
