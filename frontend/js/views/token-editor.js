// Three editable 4-d tokens; inputs are labelled "Token T dimension D" (1-based).

import { el } from "./dom.js";

export function tokenEditor(tokens, onEdit) {
  const table = el("table", { class: "token-editor" },
    el("caption", { text: "Each row is one token. Head 1 reads dimensions 1–2, head 2 reads 3–4." }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "token" }),
      ...tokens[0].map((_, d) => el("th", { scope: "col", class: d < 2 ? "head-a" : "head-b", text: `dim ${d + 1}` })))));
  const body = el("tbody");
  tokens.forEach((row, t) => {
    const tr = el("tr", {}, el("th", { scope: "row", text: `${t + 1}` }));
    row.forEach((value, d) => {
      const id = `token-${t + 1}-dim-${d + 1}`;
      const input = el("input", {
        id, type: "number", step: "0.1", value: String(value), class: d < 2 ? "head-a" : "head-b", inputmode: "decimal",
        oninput: (e) => {
          const v = Number(e.target.value);
          if (e.target.value !== "" && Number.isFinite(v)) onEdit(t, d, v);
        },
      });
      tr.append(el("td", {}, el("label", { for: id, class: "visually-hidden", text: `Token ${t + 1} dimension ${d + 1}` }), input));
    });
    body.append(tr);
  });
  table.append(body);
  return table;
}
