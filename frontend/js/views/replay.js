// @ts-check
// One weight's whole story, step by step, with the engine's numbers: q_i·k_j feature by feature,
// their sum, ÷ √d_head, the mask, the softmax over the row, the weight times V, the head's
// output, its place in the concatenation, W_O's mixing and the residual add. The products and
// their sum are the engine's Q and K multiplied here; every other number is the API's.

import { el, fmt } from "./dom.js";
import { separator, t } from "../i18n.js";

const vec = (v) => `[${v.map((x) => fmt(x)).join(separator)}]`;

// Every step of one weight's story, each with its title, its text and its value (the engine's numbers).
function steps({ response, h, i, j, causal, wo, tokens }) {
  const head = response.heads[h];
  const d = response.shape.d_head;
  const q = head.query[i],
    k = head.key[j];
  const products = q.map((qv, c) => qv * k[c]);
  const dot = products.reduce((a, b) => a + b, 0);
  const scaled = head.scores[i][j];
  const masked = causal && j > i;
  const weight = head.weights[i][j];
  const mix = head.value[j].map((v) => weight * v);
  const start = h * d,
    end = start + d;
  const part = response.concat[i].slice(start, end);
  const fromHead = wo[0].map((_, c) => part.reduce((sum, x, r) => sum + x * wo[start + r][c], 0));
  const row = head.masked_scores[i];
  const c = {
    h,
    i,
    j,
    d,
    q,
    k,
    products,
    dot,
    scaled,
    masked,
    causal,
    weight,
    mix,
    head,
    row,
    response,
    start,
    end,
    fromHead,
    tokens,
  };
  return [...scoreSteps(c), ...mixSteps(c), ...outputSteps(c)];
}

// q·k feature by feature, their sum, ÷ √d_head, the mask.
function scoreSteps({ i, j, d, q, k, products, dot, scaled, masked, causal }) {
  return [
    ...products.map((p, c) => ({
      step: "product",
      dim: c,
      value: p,
      title: t("Feature {feature}: q{query} × k{key}", { feature: c + 1, query: i + 1, key: j + 1 }),
      text: `${fmt(q[c])} × ${fmt(k[c])} = ${fmt(p, 3)}`,
    })),
    {
      step: "dot",
      value: dot,
      title: t("Their sum: the dot product q·k"),
      text: `${products.map((p) => fmt(p, 3)).join(" + ")} = ${fmt(dot, 3)}`,
    },
    {
      step: "scaled",
      value: scaled,
      title: t("Scaled: ÷ √d_head = ÷ √{d}", { d }),
      text: t("{dot} ÷ {root} = {score} (the engine's score)", {
        dot: fmt(dot, 3),
        root: fmt(Math.sqrt(d), 3),
        score: fmt(scaled, 3),
      }),
    },
    {
      step: "mask",
      value: masked ? "-Infinity" : scaled,
      title: masked ? t("Masked: a future key") : t("Not masked"),
      text: masked
        ? t(
            "key {key} comes after query {query}: the score becomes −∞ before the softmax, so its weight is exactly 0.",
            { key: j + 1, query: i + 1 },
          )
        : causal
          ? t("key {key} is not after query {query}: the score stays {score}.", {
              key: j + 1,
              query: i + 1,
              score: fmt(scaled, 3),
            })
          : t("The causal mask is off: every key is visible."),
    },
  ];
}

// The softmax over the row, the weight, the weight times V, the head's output.
function mixSteps({ h, i, j, weight, mix, head, row }) {
  return [
    {
      step: "softmax",
      value: weight,
      title: t("Softmax over row {row}", { row: i + 1 }),
      text: t("scores {scores} → weights {weights}: exp(s − max) ÷ Σ exp(s − max), so the row sums to 1.", {
        scores: `[${row.map((v) => (v === null ? "−∞" : fmt(v))).join(separator)}]`,
        weights: vec(head.weights[i]),
      }),
    },
    {
      step: "weight",
      value: weight,
      title: t("The weight: head {head}, query {query}, key {key}", { head: h + 1, query: i + 1, key: j + 1 }),
      text: `A = ${fmt(weight, 4)}`,
    },
    {
      step: "mix",
      value: JSON.stringify(mix),
      title: t("The weight times V{key}", { key: j + 1 }),
      text: `${fmt(weight)} × ${vec(head.value[j])} = ${vec(mix)}`,
    },
    {
      step: "head-output",
      value: JSON.stringify(head.output[i]),
      title: t("Head {head}'s output for query {query}", { head: h + 1, query: i + 1 }),
      text: t("Σ over keys of weight × V = {output} (this key's share: {share})", {
        output: vec(head.output[i]),
        share: vec(mix),
      }),
    },
  ];
}

// Its place in the concatenation, W_O's mixing, the residual add.
function outputSteps({ h, i, response, start, end, fromHead, tokens }) {
  return [
    {
      step: "concat",
      value: JSON.stringify(response.concat[i]),
      title: t("Its place in the concatenation"),
      text: t("features {first}–{last} of row {row}: {values}", {
        first: start + 1,
        last: end,
        row: i + 1,
        values: vec(response.concat[i]),
      }),
    },
    {
      step: "wo",
      value: JSON.stringify(response.output[i]),
      title: t("W_O mixes every head's features"),
      text: t("head {head}'s part × its rows of W_O = {part}; with every head, Y = {output}", {
        head: h + 1,
        part: vec(fromHead),
        output: vec(response.output[i]),
      }),
    },
    {
      step: "residual",
      value: JSON.stringify(response.residual[i]),
      title: t("⊕ the residual add"),
      text: `X${i + 1} + Y${i + 1} = ${vec(tokens[i])} + ${vec(response.output[i])} = ${vec(response.residual[i])}`,
    },
  ];
}

// cell: [h, i, j]; at: the step shown last (every step up to it is shown); onStep(k), onClose().
export function replay({ response, cell, causal, wo, tokens, at, onStep, onClose }) {
  const [h, i, j] = cell;
  const list = steps({ response, h, i, j, causal, wo, tokens });
  const last = Math.min(at, list.length - 1);
  const items = list.map((s, k) =>
    el(
      "li",
      {
        class: k === last ? "current" : "",
        hidden: k > last,
        "aria-current": k === last ? "step" : false,
        dataset: { step: s.step, value: String(s.value), ...(s.dim === undefined ? {} : { dim: String(s.dim) }) },
      },
      el("span", { class: "step-title", text: s.title }),
      el("span", { class: "step-text", text: s.text }),
    ),
  );
  const go = (k) => onStep(Math.max(0, Math.min(list.length - 1, k)));
  const moves = { ArrowRight: last + 1, ArrowDown: last + 1, ArrowLeft: last - 1, ArrowUp: last - 1, Home: 0 };
  const onkeydown = (e) => {
    const to = e.key === "End" ? list.length - 1 : moves[e.key];
    if (to !== undefined && !e.target.closest("select, input")) {
      e.preventDefault();
      go(to);
    }
    if (e.key === "Escape") onClose();
  };
  const where = { head: h + 1, query: i + 1, key: j + 1 };
  return el(
    "section",
    {
      class: "replay",
      tabindex: "-1",
      "aria-labelledby": "replay-title",
      dataset: { replay: "", head: String(h), row: String(i), col: String(j) },
      onkeydown,
    },
    el("h2", { id: "replay-title", text: t("Replay: head {head}, query {query}, key {key}", where) }),
    el("p", {
      class: "note",
      text: t("Step through with Next and Back (or the arrow keys). Choose another weight to replay it."),
    }),
    el("ol", { class: "replay-steps" }, items),
    navigation(last, list.length, go, onClose),
  );
}

// Back, the count, Next, every step at once, and closing the replay.
function navigation(last, count, go, onClose) {
  const button = (text, onclick, attrs = {}) => el("button", { type: "button", text, onclick, ...attrs });
  return el(
    "div",
    { class: "replay-nav" },
    button(t("Back"), () => go(last - 1), { class: "secondary", disabled: last === 0 }),
    el("span", { class: "replay-count", text: t("step {step} of {steps}", { step: last + 1, steps: count }) }),
    button(t("Next"), () => go(last + 1), { disabled: last === count - 1 }),
    button(t("All steps"), () => go(count - 1), { class: "secondary" }),
    button(t("Close replay"), onClose, { class: "secondary" }),
  );
}
