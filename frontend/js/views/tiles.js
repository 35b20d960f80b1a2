// @ts-check
// The online softmax page's views, from one answer of POST /api/v1/attention/tiled and the scores of
// POST /api/v1/attention: the score matrix cut into tiles (data-stage="tiles": each cell its tile's
// index and status, the tiles done so far, the current one, the skipped ones greyed), what each row of
// the current tile carries before and after it (data-stage m, alpha, l, o_tilde), and the final
// division O = O~ / l beside the plain pass's output. Every number drawn is the API's; cells carry
// data-row, data-col and data-value (0-based, unrounded; "" for −∞).

import { el, fmt, math } from "./dom.js";
import { scrollRegion } from "./matrix.js";
import { significant, t } from "../i18n.js";

// The API writes −∞ (a row that has seen no key) as null; a factor such as α = e⁻⁹ keeps its digits.
const shown = (v) => (v === null ? "−∞" : v !== 0 && Math.abs(v) < 0.001 ? significant(v, 3) : fmt(v, 3));
const cell = (stage, row, v, col = null) =>
  el(
    "td",
    {
      dataset: {
        stage,
        row: String(row),
        value: v === null ? "" : String(v),
        ...(col === null ? {} : { col: String(col) }),
      },
    },
    shown(v),
  );

// The tile a cell belongs to: tiles run over query blocks, then key blocks within each (the order computed).
export const tileOf = (i, j, block, n) => Math.floor(i / block) * Math.ceil(n / block) + Math.floor(j / block);

/**
 * The scores cut into tiles: the tiles stepped so far, the current one, the skipped ones, and where a slip
 * first parts (`first`, a tile's index, or null).
 * @param {{ scores: number[][], hidden: boolean[][], tiles: any[], block: number, done: number, first: number | null }} grid
 */
export function tileGrid({ scores, hidden, tiles, block, done, first }) {
  const n = scores.length;
  const caption = t(
    "Scores S = QKᵀ/√d (a row per query q, a column per key k), cut into {block} × {block} tiles: {done} of {all} stepped",
    { block, done, all: tiles.length },
  );
  const keys = scores[0].map((_, j) =>
    el(
      "th",
      { scope: "col", class: j % block === 0 ? "t-left" : "", title: t("key {key}", { key: j + 1 }) },
      "k",
      el("sub", { text: String(j + 1) }),
    ),
  );
  const rows = scores.map((row, i) => {
    const label = el(
      "th",
      { scope: "row", class: i % block === 0 ? "t-top" : "", title: t("query {query}", { query: i + 1 }) },
      "q",
      el("sub", { text: String(i + 1) }),
    );
    return el("tr", {}, label, ...row.map((s, j) => scoreCell({ s, i, j, n, block, tiles, done, first, hidden })));
  });
  const corner = el("th", { scope: "col" }, el("span", { class: "visually-hidden", text: t("query") }));
  const table = el(
    "table",
    { class: "matrix os-grid", dataset: { stage: "tiles" } },
    el("caption", { text: caption }),
    el("thead", {}, el("tr", {}, corner, ...keys)),
    el("tbody", {}, ...rows),
  );
  return scrollRegion(caption, table);
}

// One score's cell: its tile, the tile's status, whether stepped, current or where a slip parts.
function scoreCell({ s, i, j, n, block, tiles, done, first, hidden }) {
  const index = tileOf(i, j, block, n);
  const { status } = tiles[index];
  const classes = [
    status,
    index < done ? "done" : "",
    index === done - 1 ? "current" : "",
    first === index ? "first-difference" : "",
    i % block === 0 ? "t-top" : "",
    j % block === 0 ? "t-left" : "",
    hidden[i][j] ? "hidden" : "",
  ];
  const dataset = { row: String(i), col: String(j), tile: String(index), status, value: hidden[i][j] ? "" : String(s) };
  const title = hidden[i][j] ? t("hidden by the causal mask: −∞ before the softmax") : null;
  return el("td", { class: classes.filter(Boolean).join(" "), dataset, title }, hidden[i][j] ? "—" : fmt(s));
}

// The state a query block's rows are in before `index`: the last computed tile of the same block, or the start.
function before(tiles, index) {
  for (let k = index - 1; k >= 0 && tiles[k].query_block === tiles[index].query_block; k -= 1) {
    if (tiles[k].status !== "skipped") return tiles[k];
  }
  return null;
}

/**
 * What each row of tile `index` carries before and after it; `inside` says how the tile was computed, when not
 * as its status says. @param {any[]} tiles @param {number} index @param {string} [inside]
 */
export function runningView(tiles, index, inside = "") {
  const tile = tiles[index];
  const where = t("Tile {tile}: queries {q0}–{q1}, keys {k0}–{k1}", {
    tile: index + 1,
    q0: tile.rows[0] + 1,
    q1: tile.rows[1],
    k0: tile.keys[0] + 1,
    k1: tile.keys[1],
  });
  if (tile.status === "skipped") {
    const why = t(
      "Skipped: every key of this tile is hidden from every query of its block (the future, under the causal mask). Nothing is computed; what the rows carry does not change.",
    );
    return el(
      "div",
      { dataset: { stage: "running", status: "skipped" } },
      el("h3", { text: where }),
      el("p", { text: why }),
    );
  }
  const prior = before(tiles, index);
  inside ||=
    tile.status === "masked"
      ? t("On the diagonal: the causal mask is applied inside the tile.")
      : t("Every key of the tile is visible to every query of its block.");
  const caption = [`${where}.`, inside, t("α = exp(m before − m after) rescales what the row held.")].join(" ");
  const table = runningTable(tile, prior);
  table.prepend(el("caption", { text: caption }));
  return scrollRegion(caption, table);
}

// On a phone the running table is turned, a column per query and a row per value, so that no column is cut.
export const NARROW = window.matchMedia("(max-width: 40rem)");

// Each row's values before and after the tile: a column per value (a row per value when turned).
function runningTable(tile, prior) {
  const queries = Array.from({ length: tile.rows[1] - tile.rows[0] }, (_, r) => tile.rows[0] + r);
  const alpha = t("α = exp(m before − m after): what l and Õ are multiplied by before the tile is added");
  const carried = (r) => (tile.m_before ? tile.m_before[r] : prior ? prior.m[r] : null); // what was carried
  const values = [
    [() => [t("m before")], (r, row) => cell("m-before", row, carried(r))],
    [() => [t("m after")], (r, row) => cell("m", row, tile.m[r])],
    [() => ["α"], (r, row) => cell("alpha", row, tile.alpha[r]), alpha],
    [() => [t("l before")], (r, row) => cell("l-before", row, prior ? prior.l[r] : 0)],
    [() => [t("l after")], (r, row) => cell("l", row, tile.l[r])],
    ...tile.o_tilde[0].map((_, d) => [
      () => ["Õ", el("sub", { text: String(d + 1) })],
      (r, row) => cell("o_tilde", row, tile.o_tilde[r][d], d),
    ]),
  ];
  const head = (scope, [label, , title]) => el("th", { scope, title: title ?? null }, ...label());
  const query = (scope, row) => el("th", { scope, text: String(row + 1) });
  const turned = NARROW.matches;
  const [header, body] = turned
    ? [
        queries.map((row) => query("col", row)),
        values.map((v) => el("tr", {}, head("row", v), ...queries.map((row, r) => v[1](r, row)))),
      ]
    : [
        values.map((v) => head("col", v)),
        queries.map((row, r) =>
          el("tr", { dataset: { row: String(row) } }, query("row", row), ...values.map((v) => v[1](r, row))),
        ),
      ];
  return el(
    "table",
    { class: "matrix os-running-table", dataset: { stage: "running", status: tile.status, turned: String(turned) } },
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: t("query") }), ...header)),
    el("tbody", {}, ...body),
  );
}

// After the last tile: O = diag(l)⁻¹ Õ, row by row, beside the plain softmax's output of the same head.
export function finalView(head, plainOutput, lastL) {
  const caption = t("The final division: O = Õ / l, beside the plain softmax's output");
  const table = el(
    "table",
    { class: "matrix os-final", dataset: { stage: "final" } },
    el("caption", {}, math(caption)),
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        el("th", { scope: "col", text: t("query") }),
        el("th", { scope: "col", text: "l" }),
        ...head.output[0].map((_, d) => el("th", { scope: "col" }, "O", el("sub", { text: String(d + 1) }))),
        ...head.output[0].map((_, d) =>
          el("th", { scope: "col" }, t("plain"), " O", el("sub", { text: String(d + 1) })),
        ),
      ),
    ),
    el(
      "tbody",
      {},
      head.output.map((row, i) =>
        el(
          "tr",
          { dataset: { row: String(i) } },
          el("th", { scope: "row", text: String(i + 1) }),
          cell("l", i, lastL[i]),
          ...row.map((v, d) => cell("output", i, v, d)),
          ...plainOutput[i].map((v, d) => cell("plain", i, v, d)),
        ),
      ),
    ),
  );
  return scrollRegion(caption, table);
}

// Each row's l once every tile is done: from the last computed tile of its query block (and the sink, if any);
// 0 for a row no tile was computed for (the first block when its diagonal tile is skipped: it saw no key).
export function finalL(head) {
  const l = head.output.map(() => 0);
  for (const tile of head.tiles) {
    if (tile.status === "skipped") continue;
    tile.l.forEach((v, r) => {
      l[tile.rows[0] + r] = v;
    });
  }
  return l;
}

const NUMBER = /^(NaN|-?Infinity|-?\d+(\.\d+)?(e[+-]?\d+)?)$/;

/**
 * The learner's values at one tile, as the exercise's trace script writes them in the link it prints:
 * "TILE:skipped" (their loop skipped tile TILE, counted from 1) or "TILE:" then a row per query of the tile,
 * "m,α,l,Õ₁,…" (numbers as JavaScript writes them: NaN and ±Infinity included). Null when the text is not
 * that for `width` features a head, `block` rows at most, and `tiles` tiles.
 * @param {string} text @param {{ width: number, block: number, tiles: number }} shape
 */
export function readYours(text, { width, block, tiles }) {
  const found = /^(\d+):(.+)$/.exec(text);
  if (!found || Number(found[1]) < 1 || Number(found[1]) > tiles) return null;
  const tile = Number(found[1]);
  if (found[2] === "skipped") return { tile, rows: null };
  const texts = found[2].split(";").map((row) => row.split(","));
  const fits = (row) => row.length === 3 + width && row.every((v) => NUMBER.test(v));
  if (texts.length > block || !texts.every(fits)) return null;
  return { tile, rows: texts.map((row) => row.map(Number)) };
}

/**
 * The learner's own running values at their tile, drawn as the right loop's are, with what the right loop
 * carried into it (the two loops agree on every tile before the first that differs).
 * @param {any[]} tiles the right loop's @param {number} index @param {{ rows: number[][] | null }} yours
 */
export function yoursView(tiles, index, yours) {
  const tile = tiles[index];
  if (yours.rows === null) {
    const text = t("You skipped this tile: your loop computed nothing here, so its rows carry on what they held.");
    return el("div", { dataset: { stage: "running", status: "skipped" } }, el("p", { text }));
  }
  if (yours.rows.length !== tile.rows[1] - tile.rows[0]) {
    const text = t("Your trace's rows do not fit this tile: trace again with this page's link.");
    return el("p", { class: "note", text });
  }
  const column = (k) => yours.rows.map((row) => (row[k] === -Infinity ? null : row[k]));
  const mine = {
    ...tile,
    status: tile.status === "skipped" ? "computed" : tile.status,
    m: column(0),
    alpha: column(1),
    l: column(2),
    o_tilde: yours.rows.map((row) => row.slice(3)),
  };
  const copy = [...tiles];
  copy[index] = mine;
  const inside =
    tile.status === "skipped"
      ? t("You computed it; the right loop skips it: every key of this tile is in every query's future.")
      : "";
  return runningView(copy, index, inside);
}
