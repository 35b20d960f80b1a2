// @ts-check
// The KV cache page's views, each from one decode step of POST /api/v1/attention/decode (or one
// answer of POST /api/v1/kv-cache): the cache as it stands (data-stage="cache", a data-row per cached
// position), which key/value head each query head reads (lines), the new query's weights over the
// cache (data-stage="weights"), and a model's cache in bytes (bars with units). Every number drawn
// is the API's; cells carry data-row, data-col and data-value (0-based, unrounded).

import { paint } from "./color.js";
import { el, fmt } from "./dom.js";
import { scrollRegion } from "./matrix.js";
import { svg } from "./svg.js";
import { locale, sentences, t, tn } from "../i18n.js";

const grouped = new Intl.NumberFormat(locale);
export const whole = (x) => grouped.format(x);

function cells(values, row, variant = null, colour = false) {
  return values.map((v, j) => {
    const cell = el(
      "td",
      {
        dataset: {
          row: String(row),
          col: String(j),
          value: v === null ? "" : String(v),
          ...(variant ? { variant } : {}),
        },
      },
      v === null ? "—" : fmt(v),
    );
    if (colour && v !== null) paint(cell, v);
    return cell;
  });
}

// The cache after this step: per kv head its keys and values, or under MLA the latent and RoPE key;
// under a window slot by slot (the position each slot holds, and where RoPE turned its key).
export function cacheView(step, kind) {
  const held = step.cache_positions ?? step.heads[0].weights.map((_, j) => j); // slot s holds held[s]
  const slots = { held, turned: step.rope_positions?.keys ?? null, rolling: Boolean(step.cache_positions) };
  const size = tn(
    "{count} position × {per} numbers = {total} numbers in one layer's cache",
    "{count} positions × {per} numbers = {total} numbers in one layer's cache",
    held.length,
    { per: whole(step.cache_elements / held.length), total: whole(step.cache_elements) },
  );
  return el(
    "div",
    {},
    el("h3", { text: t("The cache") }),
    el("p", { class: "note", text: size }),
    ...cacheNotes(step, slots.rolling),
    ...cacheTables(step, kind, slots),
  );
}

// What a rolling cache and StreamingLLM's renumbering mean for the tables below.
function cacheNotes(step, rolling) {
  const turned = step.rope_positions;
  const notes = [];
  if (rolling) {
    const text = t(
      "A rolling cache: slot by slot, each holds the position written last into it (positions 1, 2, … counted from 1).",
    );
    notes.push(el("p", { class: "note", dataset: { stage: "slots" }, text }));
  }
  if (turned) {
    const text = t(
      "RoPE turned this step's query as position {query} and each cached key as the number in its “RoPE at” column (counting from 0, as RoPE does).",
      { query: turned.query },
    );
    notes.push(el("p", { class: "note", dataset: { stage: "rope-positions", query: String(turned.query) }, text }));
  }
  return notes;
}

// Per kv head its keys and values, or under MLA the latent and the RoPE key.
function cacheTables(step, kind, slots) {
  if (kind === "mla") {
    const { latent, rope_key: rope = null } = step.cache;
    const head = [...latent[0].map((_, j) => `c${j + 1}`), ...(rope ? rope[0].map((_, j) => `k_R${j + 1}`) : [])];
    const rows = latent.map((row, j) => [...row, ...(rope ? rope[j] : [])]);
    const caption = t("The latent C (and the RoPE key k_R): what the cache keeps");
    return [cacheTable(caption, head, rows, step.position, {}, slots)];
  }
  return step.cache.key.map((keys, g) => {
    const values = step.cache.value[g];
    const head = [...keys[0].map((_, j) => `k${j + 1}`), ...values[0].map((_, j) => `v${j + 1}`)];
    const rows = keys.map((row, j) => [...row, ...values[j]]);
    const caption = t("Key/value head {head}: keys and values", { head: g + 1 });
    return cacheTable(caption, head, rows, step.position, { head: String(g) }, slots);
  });
}

function cacheTable(caption, head, rows, newest, dataset, { held, turned, rolling }) {
  const label = (j) => {
    const p = held[j] + 1;
    const name = held[j] === newest ? t("{position} (new)", { position: p }) : String(p);
    return rolling ? t("slot {slot}: {position}", { slot: j + 1, position: name }) : name;
  };
  const table = el(
    "table",
    { class: "matrix kv-table", dataset: { stage: "cache", ...dataset } },
    el("caption", { text: caption }),
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        el("th", { scope: "col", text: rolling ? t("slot: position") : t("position") }),
        ...head.map((h) => el("th", { scope: "col", text: h })),
        turned ? el("th", { scope: "col", text: t("RoPE at") }) : null,
      ),
    ),
    el(
      "tbody",
      {},
      rows.map((row, j) =>
        el(
          "tr",
          { class: held[j] === newest ? "newest" : "", dataset: { row: String(held[j]), slot: String(j) } },
          el("th", { scope: "row", text: label(j) }),
          ...cells(row, held[j]),
          turned ? el("td", { dataset: { stage: "rope-at" }, text: String(turned[j]) }) : null,
        ),
      ),
    ),
  );
  return scrollRegion(caption, table);
}

// Which key/value head (or the latent) each query head reads: one line each.
export function mappingView(heads, kind) {
  const count = heads.length;
  const targets = kind === "mla" ? 1 : Math.max(...heads.map((h) => h.kv_head)) + 1;
  const rowHeight = 30,
    height = count * rowHeight + 10,
    width = 220;
  const y = (i, n) => 20 + (i + 0.5) * ((height - 20) / n) - rowHeight / 2 + 5;
  const drawing = svg("svg", {
    viewBox: `0 0 ${width} ${height + 10}`,
    class: "kv-lines",
    role: "img",
    "data-stage": "mapping",
    "aria-label":
      kind === "mla"
        ? t("Every query head reads the one latent")
        : heads
            .map((h) => t("query head {head} reads key/value head {kv}", { head: h.index + 1, kv: h.kv_head + 1 }))
            .join("; "),
  });
  heads.forEach((h, i) => {
    const target = kind === "mla" ? 0 : h.kv_head;
    drawing.append(
      svg("line", {
        x1: 44,
        y1: y(i, count) + 10,
        x2: width - 44,
        y2: y(target, targets) + 10,
        class: "kv-link",
        "data-query-head": String(h.index),
        "data-kv-head": String(target),
      }),
    );
    drawing.append(svg("text", { x: 4, y: y(i, count) + 14, class: "kv-node" }, `Q${h.index + 1}`));
  });
  for (let g = 0; g < targets; g++) {
    drawing.append(
      svg(
        "text",
        { x: width - 4, y: y(g, targets) + 14, class: "kv-node", "text-anchor": "end" },
        kind === "mla" ? "C" : `KV${g + 1}`,
      ),
    );
  }
  const axes = el(
    "p",
    { class: "kv-axes" },
    el("span", { text: t("query heads") }),
    el("span", { text: kind === "mla" ? t("latent") : t("key/value heads") }),
  );
  return el("div", {}, el("h3", { text: t("Which keys and values each head reads") }), axes, drawing);
}

// The new query's weights over every position so far, head by head (and the correct decode's beside a
// broken one; 0 where the step did not attend: in a window's past, or dropped from the cache); under a
// sink logit each row's sum, below one.
export function queryView(step, correct, sums = false) {
  const total = (head) =>
    el("td", {
      dataset: { stage: "row-sum", value: String(head.weights.reduce((a, b) => a + b, 0)) },
      text: fmt(head.weights.reduce((a, b) => a + b, 0)),
    });
  const rows = step.heads.map((head, h) => {
    const right = correct ? correct.heads[h] : null;
    const differs = right && head.weights.some((w, j) => Math.abs(w - right.weights[j]) > 1e-12);
    return el(
      "tbody",
      { dataset: { stage: "weights", head: String(h) } },
      el(
        "tr",
        {},
        el("th", { scope: "row", text: t("head {head}", { head: h + 1 }) }),
        ...cells(head.weights, step.position, correct ? "broken" : "main", true),
        sums ? total(head) : null,
      ),
      right
        ? el(
            "tr",
            { class: "correct-row" },
            el("th", { scope: "row", text: differs ? t("done right") : t("done right (identical)") }),
            ...cells(right.weights, step.position, "correct", true),
            sums ? total(right) : null,
          )
        : null,
    );
  });
  const positions = step.heads[0].weights.map((_, j) => el("th", { scope: "col", text: String(j + 1) }));
  if (sums) positions.push(el("th", { scope: "col", text: t("row sum") }));
  const caption = t("The new query (position {position}) weights every cached position", {
    position: step.position + 1,
  });
  return el(
    "div",
    {},
    el("h3", { text: t("The new query's weights") }),
    scrollRegion(
      caption,
      el(
        "table",
        { class: "matrix kv-table kv-weights" },
        el("caption", { text: caption }),
        el("thead", {}, el("tr", {}, el("th", { scope: "col", text: t("key position") }), ...positions)),
        ...rows,
      ),
    ),
  );
}

// Bytes as people read them: binary units (a KiB is 1,024 bytes).
export function bytes(value) {
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0,
    x = value;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  const word = t("bytes"); // outside the template literal: the extractor does not look inside one
  return i === 0 ? `${whole(x)} ${word}` : `${fmt(x, x >= 100 ? 0 : 1)} ${units[i]}`;
}

// A bar `percent` wide (set through the CSSOM: the CSP allows no inline style attribute).
function bar(className, percent, dataset) {
  const node = el("span", { class: className, dataset });
  node.style.width = `${percent}%`;
  return node;
}

// A model's cache for its context beside the MHA equivalent: two bars with units, and the numbers.
export function memoryView(answer, model, tokens) {
  const counted = tn("{count} token", "{count} tokens", tokens, { count: whole(tokens) }); // outside t(): extracted
  const cached =
    answer.positions_cached < tokens
      ? t(" (a sliding window keeps {window})", { window: whole(answer.positions_cached) })
      : "";
  // under a window a position costs what each kind of layer keeps of it (layerKinds): one figure a token would mislead
  const figures = answer.layers
    ? t("{tokens}: {total}, {ratio} % of the MHA equivalent.", {
        tokens: counted,
        total: bytes(answer.bytes_total),
        ratio: fmt(answer.ratio_to_mha * 100, 1),
      })
    : t(
        "{elements} numbers a token ({bytes} a token) over {layers} layers; {tokens}{cached}: {total}, {ratio} % of the MHA equivalent.",
        {
          elements: whole(answer.elements_per_token),
          bytes: bytes(answer.bytes_per_token),
          layers: model.request.layers,
          tokens: counted,
          cached,
          total: bytes(answer.bytes_total),
          ratio: fmt(answer.ratio_to_mha * 100, 1),
        },
      );
  // every layer windowed: how far back information can travel, L(W − 1) + 1 (issue 65, C10)
  const reach =
    answer.reach == null
      ? null
      : el("p", {
          class: "kv-figures",
          dataset: { stage: "reach" },
          text: t(
            "Reach: through {layers} windowed layers a token's output can draw on {reach} positions, its own included: L (W − 1) + 1.",
            { layers: model.request.layers, reach: whole(answer.reach) },
          ),
        });
  return el(
    "div",
    {},
    memoryBars(answer, model),
    layerKinds(answer),
    el("p", { class: "kv-figures" }, figures),
    reach,
    el("p", { class: "note" }, t("Source: {source}", { source: model.source })),
  );
}

// Two bars with units: the model's cache, and the same heads with keys and values of their own.
function memoryBars(answer, model) {
  const rows = [
    {
      label: t("{model}'s cache ({kind})", { model: model.name, kind: answer.kind.toUpperCase() }),
      value: answer.bytes_total,
      stage: "memory",
    },
    {
      label: t("the same heads with their own keys and values (MHA)"),
      value: answer.mha_equivalent.bytes_total,
      stage: "memory-mha",
    },
  ];
  const max = Math.max(...rows.map((r) => r.value));
  const row = (r, i) => {
    const length = Math.max(0.5, (r.value / max) * 100);
    const track = el(
      "span",
      { class: "kv-bar-track" },
      bar(i ? "kv-bar kv-bar-muted" : "kv-bar", length, { stage: r.stage, value: String(r.value) }),
      el("span", { class: "kv-bar-value", text: bytes(r.value) }),
    );
    return el(
      "div",
      { class: "kv-bar-row", "aria-hidden": "true" },
      el("span", { class: "kv-bar-label", text: r.label }),
      track,
    );
  };
  const label = rows.map((r) => `${r.label}: ${bytes(r.value)}`).join("; ");
  return el("div", { class: "kv-bars", role: "img", "aria-label": label }, ...rows.map(row));
}

// A windowed model's layers by kind (the kinds it has): each kind's bytes a token times the positions it keeps.
function layerKinds(answer) {
  const { local, global } = answer.layers ?? {};
  if (!local || !global) return null;
  const of = (layers) => ({
    layers: layers.layers,
    perToken: bytes(layers.bytes_per_token),
    positions: whole(layers.positions_cached),
    total: bytes(layers.bytes),
  });
  const parts = [
    local.layers ? t("{layers} local layers: {perToken} a token × {positions} positions = {total}.", of(local)) : "",
    global.layers ? t("{layers} global layers: {perToken} a token × {positions} positions = {total}.", of(global)) : "",
    global.layers && local.layers
      ? t("Were every layer global: {all}.", { all: bytes(answer.bytes_if_every_layer_global) })
      : "",
  ];
  return el("p", { class: "kv-figures", dataset: { stage: "memory-kinds" } }, sentences(...parts));
}
