// @ts-check
// The speculative decoding page's drawings, each a table whose cells carry their numbers (the accessible
// truth): the rule per token as bars (p, q, what accepted drafts emit, what rejections add, the emitted
// distribution beside p, and a slip's), the tokens a target pass buys against γ, the trained model's rounds
// (each draft kept, rejected or never verified, the byte that ends the round, the cache before, during and
// after the rollback) and one round's verification block over the cache with its causal mask. Every number
// is the API's (POST /api/v1/speculative/acceptance, /api/v1/models/{id}/speculate).

import { dataTable, numbers } from "./bars.js";
import { el, fmt } from "./dom.js";
import { scrollRegion } from "./matrix.js";
import { svg } from "./svg.js";
import { t } from "../i18n.js";

/** A number and its bar (its width set through the CSSOM: the pages' CSP allows no style attribute). */
function bar(value, cls) {
  const drawn = el("span", { class: `sd-bar ${cls}` });
  drawn.style.width = `${Math.max(0, Math.min(1, value)) * 4}rem`;
  return el("span", { class: "sd-bar-cell" }, drawn, el("span", { class: "sd-num", text: fmt(value, 3) }));
}

/**
 * The rule per token: a row each, its numbers as bars.
 * @param {{ tokens: string[], rule: any }} view
 */
export function ruleTable({ tokens, rule }) {
  const rejected = 1 - rule.alpha;
  const columns = [
    ["p", t("p (target)"), (i) => rule.p[i]],
    ["q", t("q (draft)"), (i) => rule.q[i]],
    ["acceptance", t("kept: min(1, p/q)"), (i) => rule.acceptance[i]],
    ["accepted", t("from kept drafts: min(p, q)"), (i) => rule.accepted[i]],
    ["rejected", t("from rejections: (1 − α) × residual"), (i) => rejected * rule.residual[i]],
    ["emitted", t("emitted"), (i) => rule.emitted[i]],
  ];
  if (rule.broken) columns.push(["broken", t("emitted by the slip"), (i) => rule.broken.emitted[i]]);
  const head = el(
    "tr",
    {},
    el("th", { scope: "col", text: t("token") }),
    ...columns.map(([, words]) => el("th", { scope: "col", text: words })),
  );
  const rows = tokens.map((token, i) =>
    el(
      "tr",
      {},
      el("th", { scope: "row", text: token }),
      ...columns.map(([key, , value]) =>
        el("td", { dataset: { stage: key, value: String(value(i)) } }, bar(value(i), `sd-${key}`)),
      ),
    ),
  );
  const title = t("Per token: what the rule keeps, what a rejection draws, what comes out");
  const table = el(
    "table",
    { class: "data sd-rule-table" },
    el("caption", { text: title }),
    el("thead", {}, head),
    el("tbody", {}, ...rows),
  );
  return scrollRegion(title, table);
}

/**
 * Tokens per target pass against γ: (1 − α^(γ+1)) / (1 − α), the chosen γ marked.
 * @param {{ curve: any[], gamma: number, alpha: number }} view
 */
export function curveChart({ curve, gamma, alpha }) {
  const [width, height, left, bottom] = [360, 160, 34, 22];
  const top = Math.max(2, ...curve.map((c) => c.formula));
  const x = (g) => left + ((g - 1) / (curve.length - 1)) * (width - left - 8);
  const y = (v) => 8 + (1 - v / top) * (height - bottom - 8);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart sd-curve", role: "img" });
  const chosen = curve[gamma - 1];
  chart.setAttribute(
    "aria-label",
    t("At α = {alpha}, γ = {gamma} drafts give {tokens} tokens per target pass.", {
      alpha: fmt(alpha, 3),
      gamma,
      tokens: fmt(chosen.formula, 3),
    }),
  );
  for (let v = 1; v <= top; v += 1) {
    chart.append(svg("line", { x1: left, x2: width - 4, y1: y(v), y2: y(v), class: "grid" }));
    chart.append(svg("text", { x: 4, y: y(v) + 4 }, String(v)));
  }
  const path = curve.map((c, i) => `${i ? "L" : "M"} ${x(c.gamma)} ${y(c.formula)}`).join(" ");
  chart.append(svg("path", { d: path, class: "sd-curve-line" }));
  chart.append(svg("circle", { cx: x(gamma), cy: y(chosen.formula), r: 5, class: "sd-curve-dot" }));
  chart.append(svg("text", { x: width / 2, y: height - 4, class: "sd-axis" }, t("γ, drafts per round")));
  const rows = curve.map((c) => [String(c.gamma), fmt(c.formula, 4), fmt(c.enumerated, 4)]);
  const title = t("Tokens per target pass");
  const table = dataTable(title, [t("γ"), t("formula"), t("accept/reject tree")], rows);
  return el("figure", { class: "sd-figure", dataset: { stage: "curve" } }, chart, numbers(title, table));
}

/** A draft's state in a round: kept, rejected, or never verified (an earlier one was rejected). */
function draftBox(d) {
  const state = d.accepted === undefined ? "unverified" : d.accepted ? "kept" : "rejected";
  const words = {
    kept: t("kept: u {u} < {a}", { u: fmt(d.u ?? 0, 3), a: fmt(d.acceptance ?? 0, 3) }),
    rejected: t("rejected: u {u} ≥ {a}", { u: fmt(d.u ?? 0, 3), a: fmt(d.acceptance ?? 0, 3) }),
    unverified: t("never verified"),
  }[state];
  return el(
    "li",
    { class: `sd-byte sd-${state}`, dataset: { state, byte: String(d.byte) }, title: words },
    el("span", { class: "sd-glyph", text: d.text === " " ? "␣" : d.text }),
    el("span", { class: "visually-hidden", text: `${d.text}: ${words}` }),
  );
}

/**
 * Each round: its drafts, the byte that ends it, the cache's rows before, with the block, and after.
 * @param {{ rounds: any[], picked: number, pick: (index: number) => void }} view
 */
export function roundsList({ rounds, picked, pick }) {
  const items = rounds.map((r, index) => {
    const ending = el(
      "li",
      { class: `sd-byte sd-${r.ending.kind}`, dataset: { state: r.ending.kind, byte: String(r.ending.byte) } },
      el("span", { class: "sd-glyph", text: r.ending.text === " " ? "␣" : r.ending.text }),
      el("span", {
        class: "visually-hidden",
        text: r.ending.kind === "bonus" ? t("bonus byte from p") : t("resampled from the residual"),
      }),
    );
    const cache = t("cache {before} → {verified} → {after} rows", r.cache);
    return el(
      "li",
      { class: `sd-round${index === picked ? " picked" : ""}`, dataset: { round: String(index) } },
      el(
        "button",
        {
          type: "button",
          class: "sd-round-pick",
          "aria-pressed": String(index === picked),
          onclick: () => pick(index),
        },
        t("Round {round}", { round: index + 1 }),
      ),
      el("ol", { class: "sd-bytes" }, ...r.drafts.map(draftBox), ending),
      el("span", { class: "sd-cache", text: cache }),
    );
  });
  return el("ol", { class: "sd-rounds" }, ...items);
}

/**
 * One round's verification block: γ + 1 queries over the cache, each seeing every cached row and the block's
 * rows up to itself; the rows the rollback drops struck out.
 * @param {{ round: any, index: number }} view
 */
export function blockMask({ round, index }) {
  const size = round.cache.verified - round.cache.before;
  const kept = round.cache.after - round.cache.before;
  const keys = Array.from({ length: size }, (_, j) => round.start + j);
  const head = el(
    "tr",
    {},
    el("th", { scope: "col", text: t("query") }),
    el("th", { scope: "col", text: t("{rows} cached rows", { rows: round.cache.before }) }),
    ...keys.map((p, j) =>
      el("th", { scope: "col", class: j >= kept ? "sd-dropped" : "", text: t("pos {position}", { position: p }) }),
    ),
  );
  const rows = keys.map((p, i) =>
    el(
      "tr",
      {},
      el("th", { scope: "row", text: t("pos {position}", { position: p }) }),
      el("td", { class: "sd-seen", text: "✓" }),
      ...keys.map((_, j) =>
        el("td", {
          class: j <= i ? "sd-seen" : "sd-hidden",
          dataset: { seen: String(j <= i) },
          text: j <= i ? "✓" : "·",
        }),
      ),
    ),
  );
  const title = t("Round {round}'s verification block: {size} queries over the cache, causal inside the block", {
    round: index + 1,
    size,
  });
  const table = el(
    "table",
    { class: "heatmap sd-mask", dataset: { stage: "block" } },
    el("caption", { text: title }),
    el("thead", {}, head),
    el("tbody", {}, ...rows),
  );
  return scrollRegion(title, table);
}
