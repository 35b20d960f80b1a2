// @ts-check
// The RoPE scaling page's drawings, each with its numbers as a table (the accessible truth): a dial per
// pair (the angles it met in training against the angle back to the text's first token, as trained and
// as scaled), a released model's every pair by wavelength (kept, blended, divided), and YaRN's ramp as
// the paper and the code compute it. Every number is the API's (POST /attention, /rope/frequencies).

import { dataTable, numbers } from "./bars.js";
import { el, fmt } from "./dom.js";
import { svg } from "./svg.js";
import { gap, listed, locale, t } from "../i18n.js";

const TURN = 2 * Math.PI;
export const STATUS_WORDS = {
  kept: () => t("kept"),
  blended: () => t("blended"),
  divided: () => t("divided by the factor"),
  rescaled: () => t("rescaled by its own rule"),
};
const count = (n) => new Intl.NumberFormat(locale).format(Math.round(n));
const radians = (a) => t("{angle} rad", { angle: fmt(a) });

/** What pair `p` met in training: angles 0 to (L − 1)·θ, the whole circle once it has turned. */
function trainedArc(p, trained) {
  const reach = (trained - 1) * p.inv_freq;
  return { reach, whole: reach >= TURN, seen: (angle) => reach >= TURN || angle <= reach + 1e-9 };
}

/**
 * A dial per pair: the arc it met in training, and the angle `distance` · θ back to position 0, as trained
 * (hollow), as scaled (filled) and as a slip computes it (a cross).
 * @param {{ pairs: any[], scaled: any[] | null, broken: any[] | null, distance: number, trained: number }} view
 */
export function dials({ pairs, scaled, broken, distance, trained }) {
  const figures = pairs.map((p, i) => {
    const arc = trainedArc(p, trained);
    const at = (pair) => distance * pair.scaled_inv_freq;
    const picture = svg("svg", { viewBox: "0 0 100 100", class: "rs-dial", "aria-hidden": "true" });
    picture.append(svg("circle", { cx: 50, cy: 50, r: 36, class: "rs-dial-ring" }), trainedPath(arc));
    picture.append(dot(distance * p.inv_freq, "rs-dot trained", arc.seen(distance * p.inv_freq)));
    if (scaled) picture.append(dot(at(scaled[i]), `rs-dot scaled st-${scaled[i].status}`, true));
    if (broken) picture.append(cross(at(broken[i])));
    const seen = arc.seen(distance * p.inv_freq);
    return el(
      "figure",
      { class: "rs-pair", dataset: { pair: String(i), seen: String(seen) } },
      picture,
      el("figcaption", {}, el("strong", { text: t("pair {pair}", { pair: i }) }), " ", dialWords(p, arc, seen)),
    );
  });
  return el(
    "div",
    {},
    el("div", { class: "rs-dials" }, ...figures),
    dialTable({ pairs, scaled, broken, distance, trained }),
  );
}

function dialWords(p, arc, seen) {
  const wavelength = t("wavelength {wavelength}", { wavelength: count(p.wavelength) });
  const met = arc.whole
    ? t("met every angle in training")
    : t("met 0 to {angle} in training", { angle: radians(arc.reach) });
  return el(
    "span",
    {},
    t("{wavelength}; {met}.", { wavelength, met }).concat(gap),
    el("span", {
      class: seen ? "rs-seen" : "rs-unseen",
      text: seen ? t("As trained: an angle it knows.") : t("As trained: an angle never seen."),
    }),
  );
}

function trainedPath(arc) {
  if (arc.whole) return svg("circle", { cx: 50, cy: 50, r: 36, class: "rs-dial-trained" });
  const end = point(Math.max(arc.reach, 0.02));
  const large = arc.reach > Math.PI ? 1 : 0;
  return svg("path", { d: `M 86 50 A 36 36 0 ${large} 0 ${end.x} ${end.y}`, class: "rs-dial-trained" });
}

function point(angle, r = 36) {
  return { x: 50 + r * Math.cos(angle), y: 50 - r * Math.sin(angle) };
}

function dot(angle, cls, seen) {
  const { x, y } = point(angle);
  return svg("circle", { cx: x, cy: y, r: 6, class: `${cls}${seen ? "" : " unseen"}` });
}

function cross(angle) {
  const { x, y } = point(angle, 28);
  return svg("path", {
    d: `M ${x - 5} ${y - 5} L ${x + 5} ${y + 5} M ${x - 5} ${y + 5} L ${x + 5} ${y - 5}`,
    class: "rs-broken",
  });
}

function dialTable({ pairs, scaled, broken, distance, trained }) {
  const columns = [t("pair"), t("wavelength"), t("met in training"), t("as trained"), t("as scaled"), t("status")];
  if (broken) columns.push(t("as the slip computes it"));
  const rows = pairs.map((p, i) => {
    const arc = trainedArc(p, trained);
    const angle = distance * p.inv_freq;
    const seen = arc.seen(angle) ? t("seen") : t("never seen");
    const cells = [
      String(i),
      count(p.wavelength),
      arc.whole ? t("every angle") : t("0 to {angle}", { angle: radians(arc.reach) }),
      t("{angle} ({seen})", { angle: radians(angle), seen }),
      scaled ? radians(distance * scaled[i].scaled_inv_freq) : "–",
      scaled ? STATUS_WORDS[scaled[i].status]() : "–",
    ];
    if (broken) cells.push(radians(distance * broken[i].scaled_inv_freq));
    return cells;
  });
  const title = t("Each pair's angle back to position 0, at a distance of {distance}", { distance: count(distance) });
  const table = dataTable(title, columns, rows);
  table.dataset.stage = "pairs";
  return numbers(title, table);
}

/**
 * A released model's every pair: its wavelength as trained (hollow) and as scaled (filled, by what happened
 * to it), against the length it was trained on and the length it reads.
 * @param {{ table: any, name: string, trained: number, context: number }} model
 */
export function wavelengthChart({ table, name, trained, context }) {
  const pairs = table.pairs;
  const [width, height, left, bottom] = [360, 210, 44, 24];
  const top = Math.log10(Math.max(context, ...pairs.map((p) => p.scaled_wavelength))) + 0.3;
  const x = (i) => left + (i / Math.max(1, pairs.length - 1)) * (width - left - 8);
  const y = (wavelength) => 8 + (1 - Math.log10(wavelength) / top) * (height - bottom - 8);
  const counts = tally(pairs);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart rs-chart", role: "img" });
  chart.setAttribute("aria-label", t("{model}: {summary}", { model: name, summary: summaryOf(counts) }));
  for (let k = 1; k <= Math.floor(top); k += 1) {
    chart.append(svg("line", { x1: left, x2: width - 4, y1: y(10 ** k), y2: y(10 ** k), class: "grid" }));
    chart.append(svg("text", { x: 2, y: y(10 ** k) + 4 }, count(10 ** k)));
  }
  for (const [length, words, cls] of [
    [trained, t("trained: {n}", { n: count(trained) }), "rs-trained-line"],
    [context, t("read: {n}", { n: count(context) }), "rs-context-line"],
  ]) {
    chart.append(svg("line", { x1: left, x2: width - 4, y1: y(length), y2: y(length), class: cls }));
    chart.append(svg("text", { x: left + 4, y: y(length) - 3, class: "rs-line-label" }, words));
  }
  pairs.forEach((p, i) => {
    chart.append(svg("circle", { cx: x(i), cy: y(p.wavelength), r: 2.2, class: "rs-original" }));
    chart.append(svg("circle", { cx: x(i), cy: y(p.scaled_wavelength), r: 2.6, class: `st-${p.status}` }));
  });
  chart.append(svg("text", { x: left, y: height - 6 }, t("pair {pair}", { pair: 0 })));
  chart.append(
    svg("text", { x: width - 8, y: height - 6, "text-anchor": "end" }, t("pair {pair}", { pair: pairs.length - 1 })),
  );
  const title = t("{model}: every pair's wavelength, in positions", { model: name });
  const rows = pairs.map((p) => [
    String(p.pair),
    count(p.wavelength),
    count(p.scaled_wavelength),
    fmt(p.ratio, 4),
    STATUS_WORDS[p.status](),
  ]);
  const columns = [t("pair"), t("wavelength as trained"), t("as scaled"), t("frequency kept"), t("status")];
  return el(
    "figure",
    { class: "rs-figure", dataset: { stage: "wavelengths" } },
    chart,
    legend(counts),
    numbers(title, dataTable(title, columns, rows)),
  );
}

function tally(pairs) {
  const counts = { kept: 0, blended: 0, divided: 0, rescaled: 0 };
  for (const p of pairs) counts[p.status] += 1;
  return counts;
}

function summaryOf(counts) {
  const parts = Object.entries(counts)
    .filter(([, n]) => n)
    .map(([status, n]) => t("{count} {status}", { count: n, status: STATUS_WORDS[status]() }));
  return listed(parts);
}

function legend(counts) {
  const items = Object.entries(counts)
    .filter(([, n]) => n)
    .map(([status, n]) =>
      el(
        "li",
        { dataset: { status, count: String(n) } },
        el("span", { class: `rs-key st-${status}`, "aria-hidden": "true" }),
        t("{count} {status}", { count: n, status: STATUS_WORDS[status]() }),
      ),
    );
  return el(
    "ul",
    { class: "rs-legend" },
    el("li", {}, el("span", { class: "rs-key rs-original", "aria-hidden": "true" }), t("as trained")),
    ...items,
  );
}

/**
 * The share of each pair's frequency YaRN keeps (scaled / as trained), as the reference code ramps it (by pair index between its
 * floored and ceiled bounds) and as the paper does (by turns over L).
 * @param {{ code: any, paper: any, pair: number }} ramps
 */
export function rampChart({ code, paper, pair }) {
  const [width, height, left] = [360, 170, 34];
  const x = (i) => left + (i / (code.pairs.length - 1)) * (width - left - 8);
  const y = (share) => 10 + (1 - share) * (height - 40);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart rs-chart", role: "img" });
  const [low, high] = code.yarn_bounds;
  chart.setAttribute(
    "aria-label",
    t("The code keeps every pair below {low} and divides every pair above {high}; the paper ramps by turns over L.", {
      low,
      high,
    }),
  );
  for (const share of [0, 0.5, 1]) {
    chart.append(svg("line", { x1: left, x2: width - 4, y1: y(share), y2: y(share), class: "grid" }));
    chart.append(svg("text", { x: 2, y: y(share) + 4 }, fmt(share)));
  }
  for (const [table, cls] of [
    [code, "rs-ramp-code"],
    [paper, "rs-ramp-paper"],
  ]) {
    const points = table.pairs.map((p, i) => `${x(i)},${y(p.ratio)}`).join(" ");
    chart.append(svg("polyline", { points, class: cls }));
  }
  chart.append(svg("line", { x1: x(pair), x2: x(pair), y1: 8, y2: height - 28, class: "rs-pair-line" }));
  chart.append(svg("text", { x: x(pair) + 3, y: height - 16 }, t("pair {pair}", { pair })));
  const said = t("Pair {pair} keeps {code} of its frequency in the code, {paper} in the paper.", {
    pair,
    code: fmt(code.pairs[pair].ratio, 4),
    paper: fmt(paper.pairs[pair].ratio, 4),
  });
  const title = t("YaRN's frequency kept, pair by pair (scaled / as trained)");
  const rows = code.pairs.map((p, i) => [String(i), fmt(p.ratio, 4), fmt(paper.pairs[i].ratio, 4)]);
  return el(
    "figure",
    { class: "rs-figure", dataset: { stage: "ramps" } },
    chart,
    el(
      "ul",
      { class: "rs-legend" },
      el("li", {}, el("span", { class: "rs-key rs-ramp-code", "aria-hidden": "true" }), t("the code's ramp")),
      el("li", {}, el("span", { class: "rs-key rs-ramp-paper", "aria-hidden": "true" }), t("the paper's ramp")),
    ),
    el("figcaption", { dataset: { stage: "ramp-pair" }, text: said }),
    numbers(title, dataTable(title, [t("pair"), t("the code's"), t("the paper's")], rows)),
  );
}
