// @ts-check
// Three editable 4-d tokens: the X stage (data-stage="x", cells with data-row/col/value, 0-based);
// inputs are labelled "Token T dimension D" (1-based).

import { el } from "./dom.js";
import { t } from "../i18n.js";

export function tokenEditor(tokens, onEdit) {
  const table = el(
    "table",
    { class: "token-editor", dataset: { stage: "x" } },
    el("caption", { text: t("Each row is one token, a vector of the residual stream X.") }),
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        el("th", { scope: "col", text: t("token") }),
        ...tokens[0].map((_, d) =>
          el("th", { scope: "col", dataset: { col: String(d) }, text: t("dim {dim}", { dim: d + 1 }) }),
        ),
      ),
    ),
  );
  const body = el("tbody", { dataset: { variant: "main" } });
  tokens.forEach((row, k) => {
    const tr = el("tr", {}, el("th", { scope: "row", text: `${k + 1}` }));
    row.forEach((value, d) => {
      const id = `token-${k + 1}-dim-${d + 1}`;
      const cell = el("td", { dataset: { row: String(k), col: String(d), value: String(value) } });
      const input = el("input", {
        id,
        type: "number",
        step: "0.1",
        value: String(value),
        inputmode: "decimal",
        oninput: (e) => {
          const v = Number(e.target.value);
          if (e.target.value !== "" && Number.isFinite(v)) {
            cell.dataset.value = String(v);
            onEdit(k, d, v);
          }
        },
      });
      cell.append(
        el("label", {
          for: id,
          class: "visually-hidden",
          text: t("Token {token} dimension {dim}", { token: k + 1, dim: d + 1 }),
        }),
        input,
      );
      tr.append(cell);
    });
    body.append(tr);
  });
  table.append(body);
  return table;
}

// Which heads read each coordinate (owners[d]: "0", "0 1", or "" for none), for highlighting.
export function markOwners(table, owners) {
  for (const node of table.querySelectorAll("[data-col]")) {
    const owner = owners[Number(node.dataset.col)];
    if (owner) node.dataset.owner = owner;
    else delete node.dataset.owner;
  }
}
