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
  const table = el(
    "table",
    { class: `heatmap${colour ? "" : " plain"}`, id },
    el("caption", { text: title }),
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        el(
          "th",
          { scope: "col", class: "corner" },
          el("span", { "aria-hidden": "true", text: "q \\ k" }),
          el("span", { class: "visually-hidden", text: t("query by key") }),
        ),
        ...Array.from({ length: keys }, (_, j) =>
          el(
            "th",
            { scope: "col", "aria-label": t("key {key}", { key: j + 1 }) },
            el("span", { "aria-hidden": "true", text: `k${j + 1}` }),
          ),
        ),
      ),
    ),
  );
  const body = el("tbody");
  weights.forEach((row, i) => {
    const tr = el(
      "tr",
      {},
      el(
        "th",
        { scope: "row", "aria-label": t("query {query}", { query: i + 1 }) },
        el("span", { "aria-hidden": "true", text: `q${i + 1}` }),
      ),
    );
    row.forEach((value, j) => {
      const isMasked = Boolean(masked?.[i][j]);
      const shown = isMasked ? el("span", { "aria-label": t("masked"), text: "·" }) : fmt(value);
      const chosen = picked && picked[0] === i && picked[1] === j;
      const cell = el(
        "td",
        {
          dataset: { head: String(head), row: String(i), col: String(j), value: String(value) },
          class: `cell${isMasked ? " masked" : ""}${chosen ? " picked" : ""}`,
        },
        pick
          ? el(
              "button",
              {
                type: "button",
                class: "cell-pick",
                onclick: () => pick(i, j),
                "aria-pressed": chosen ? "true" : "false",
                "aria-label": isMasked
                  ? t("Replay head {head}, query {query}, key {key}: weight 0, masked", {
                      head: head + 1,
                      query: i + 1,
                      key: j + 1,
                    })
                  : t("Replay head {head}, query {query}, key {key}: weight {weight}", {
                      head: head + 1,
                      query: i + 1,
                      key: j + 1,
                      weight: fmt(value),
                    }),
              },
              isMasked ? "·" : fmt(value),
            )
          : shown,
      );
      if (!isMasked && colour) paint(cell, value);
      if (marks?.[i][j]) markCell(cell, marks[i][j]);
      tr.append(cell);
    });
    body.append(tr);
  });
  table.append(body);
  return el(
    "figure",
    { class: "heatmap-figure" },
    table,
    summarise ? el("p", { class: "summary", text: summary(weights) }) : null,
  );
}
