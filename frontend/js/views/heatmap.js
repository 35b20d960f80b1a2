// @ts-check
// An attention matrix as an HTML table: a number in every cell, colour for the eye, a caption
// and a one-line summary for everyone. Cells carry data-head/row/col/value (unrounded).
// Numbers people read are 1-based: "query 1" is row 0.

import { paint } from "./color.js";
import { el, fmt } from "./dom.js";
import { markCell } from "./marks.js";
import { t } from "../i18n.js";

export function summary(weights) {
  const last = weights.length - 1;
  const row = weights[last];
  const top = row.indexOf(Math.max(...row));
  return t("query {query} puts {weight} on key {key}", { query: last + 1, weight: fmt(row[top]), key: top + 1 });
}

// values: [n][n] numbers; masked: [n][n] booleans (future cells); marks: [n][n] of null | "up" | "down" | "differs".
// colour: false draws plain numbers (scores are not probabilities, so the 0..1 scale does not apply).
// pick(i, j): each cell is a button that calls it (the workbench's one-cell replay); picked: [i, j] or null.
/**
 * @param {{ head: number, weights: number[][], masked?: boolean[][] | null, title: string, marks?: any,
 *   id?: string, colour?: boolean, summarise?: boolean, pick?: ((i: number, j: number) => void) | null,
 *   picked?: number[] | null }} options
 */
export function heatmap({
  head,
  weights,
  masked = null,
  title,
  marks = null,
  id,
  colour = true,
  summarise = true,
  pick = null,
  picked = null,
}) {
  const keys = weights[0].length;
  const corner = el(
    "th",
    { scope: "col", class: "corner" },
    el("span", { "aria-hidden": "true", text: "q \\ k" }),
    el("span", { class: "visually-hidden", text: t("query by key") }),
  );
  const columns = Array.from({ length: keys }, (_, j) =>
    el(
      "th",
      { scope: "col", "aria-label": t("key {key}", { key: j + 1 }) },
      el("span", { "aria-hidden": "true", text: `k${j + 1}` }),
    ),
  );
  const rows = weights.map((row, i) => {
    const label = el(
      "th",
      { scope: "row", "aria-label": t("query {query}", { query: i + 1 }) },
      el("span", { "aria-hidden": "true", text: `q${i + 1}` }),
    );
    const cells = row.map((value, j) => {
      const cell = weightCell({ head, value, i, j, masked: Boolean(masked?.[i][j]), pick, picked });
      if (!masked?.[i][j] && colour) paint(cell, value);
      if (marks?.[i][j]) markCell(cell, marks[i][j]);
      return cell;
    });
    return el("tr", {}, label, ...cells);
  });
  const table = el(
    "table",
    { class: `heatmap${colour ? "" : " plain"}`, id },
    el("caption", { text: title }),
    el("thead", {}, el("tr", {}, corner, ...columns)),
    el("tbody", {}, ...rows),
  );
  return el(
    "figure",
    { class: "heatmap-figure" },
    table,
    summarise ? el("p", { class: "summary", text: summary(weights) }) : null,
  );
}

// One weight's cell: its number (a dot where masked), a button that replays it when the table can be picked.
function weightCell({ head, value, i, j, masked, pick, picked }) {
  const chosen = picked && picked[0] === i && picked[1] === j;
  const where = { head: head + 1, query: i + 1, key: j + 1 };
  const shown = masked ? el("span", { "aria-label": t("masked"), text: "·" }) : fmt(value);
  const button = () =>
    el(
      "button",
      {
        type: "button",
        class: "cell-pick",
        onclick: () => pick(i, j),
        "aria-pressed": chosen ? "true" : "false",
        "aria-label": masked
          ? t("Replay head {head}, query {query}, key {key}: weight 0, masked", where)
          : t("Replay head {head}, query {query}, key {key}: weight {weight}", { ...where, weight: fmt(value) }),
      },
      masked ? "·" : fmt(value),
    );
  return el(
    "td",
    {
      dataset: { head: String(head), row: String(i), col: String(j), value: String(value) },
      class: `cell${masked ? " masked" : ""}${chosen ? " picked" : ""}`,
    },
    pick ? button() : shown,
  );
}
