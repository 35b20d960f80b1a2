// @ts-check
// Small DOM helpers shared by the views.

import { number } from "../i18n.js";

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Numbers people read, in the page's locale (a decimal comma in es).
export const fmt = (x, digits = 2) => number(x, digits);

// The page's main region is drawn: screen readers (and anything waiting for the page) learn it is no longer busy.
export function drawn() {
  document.querySelector("main")?.setAttribute("aria-busy", "false");
}

// One notation for subscripts (docs/conventions.md): a matrix's index is a subscript, W_O -> W<sub>O</sub>,
// Q_1 -> Q<sub>1</sub>, in words and titles alike; names such as d_model stay as the API spells them.
const INDEXED = /\b([WQKVOSA])_([QKVO]|h|\d+)\b/g;
export function math(text) {
  const parts = [];
  let at = 0;
  for (const found of String(text).matchAll(INDEXED)) {
    parts.push(text.slice(at, found.index), found[1], el("sub", { text: found[2] }));
    at = found.index + found[0].length;
  }
  parts.push(String(text).slice(at));
  return parts.filter((part) => part !== "");
}
