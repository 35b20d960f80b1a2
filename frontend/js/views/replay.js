// One weight's whole story, step by step, with the engine's numbers: q_i·k_j feature by feature,
// their sum, ÷ √d_head, the mask, the softmax over the row, the weight times V, the head's
// output, its place in the concatenation, W_O's mixing and the residual add. The products and
// their sum are the engine's Q and K multiplied here; every other number is the API's.

import { el, fmt } from "./dom.js";

const vec = (v) => `[${v.map((x) => fmt(x)).join(", ")}]`;

function steps({ response, h, i, j, causal, wo, tokens }) {
  const head = response.heads[h];
  const d = response.shape.d_head;
  const q = head.query[i], k = head.key[j];
  const products = q.map((qv, c) => qv * k[c]);
  const dot = products.reduce((a, b) => a + b, 0);
  const scaled = head.scores[i][j];
  const masked = causal && j > i;
  const weight = head.weights[i][j];
  const mix = head.value[j].map((v) => weight * v);
  const start = h * d, end = start + d;
  const part = response.concat[i].slice(start, end);
  const fromHead = wo[0].map((_, c) => part.reduce((sum, x, r) => sum + x * wo[start + r][c], 0));
  const row = head.masked_scores[i];
  return [
    ...products.map((p, c) => ({ step: "product", dim: c, value: p, title: `Feature ${c + 1}: q${i + 1} × k${j + 1}`,
      text: `${fmt(q[c])} × ${fmt(k[c])} = ${fmt(p, 3)}` })),
    { step: "dot", value: dot, title: "Their sum: the dot product q·k", text: `${products.map((p) => fmt(p, 3)).join(" + ")} = ${fmt(dot, 3)}` },
    { step: "scaled", value: scaled, title: `Scaled: ÷ √d_head = ÷ √${d}`,
      text: `${fmt(dot, 3)} ÷ ${fmt(Math.sqrt(d), 3)} = ${fmt(scaled, 3)} (the engine's score)` },
    { step: "mask", value: masked ? "-Infinity" : scaled, title: masked ? "Masked: a future key" : "Not masked",
      text: masked ? `key ${j + 1} comes after query ${i + 1}: the score becomes −∞ before the softmax, so its weight is exactly 0.`
        : causal ? `key ${j + 1} is not after query ${i + 1}: the score stays ${fmt(scaled, 3)}.` : "The causal mask is off: every key is visible." },
    { step: "softmax", value: weight, title: `Softmax over row ${i + 1}`,
      text: `scores [${row.map((v) => (v === null ? "−∞" : fmt(v))).join(", ")}] → ` +
        `weights ${vec(head.weights[i])}: exp(s − max) ÷ Σ exp(s − max), so the row sums to 1.` },
    { step: "weight", value: weight, title: `The weight: head ${h + 1}, query ${i + 1}, key ${j + 1}`, text: `A = ${fmt(weight, 4)}` },
    { step: "mix", value: JSON.stringify(mix), title: `The weight times V${j + 1}`, text: `${fmt(weight)} × ${vec(head.value[j])} = ${vec(mix)}` },
    { step: "head-output", value: JSON.stringify(head.output[i]), title: `Head ${h + 1}'s output for query ${i + 1}`,
      text: `Σ over keys of weight × V = ${vec(head.output[i])} (this key's share: ${vec(mix)})` },
    { step: "concat", value: JSON.stringify(response.concat[i]), title: "Its place in the concatenation",
      text: `features ${start + 1}–${end} of row ${i + 1}: ${vec(response.concat[i])}` },
    { step: "wo", value: JSON.stringify(response.output[i]), title: "W_O mixes every head's features",
      text: `head ${h + 1}'s part × its rows of W_O = ${vec(fromHead)}; with every head, Y = ${vec(response.output[i])}` },
    { step: "residual", value: JSON.stringify(response.residual[i]), title: "⊕ the residual add",
      text: `X${i + 1} + Y${i + 1} = ${vec(tokens[i])} + ${vec(response.output[i])} = ${vec(response.residual[i])}` },
  ];
}

// cell: [h, i, j]; at: the step shown last (every step up to it is shown); onStep(k), onClose().
export function replay({ response, cell, causal, wo, tokens, at, onStep, onClose }) {
  const [h, i, j] = cell;
  const list = steps({ response, h, i, j, causal, wo, tokens });
  const last = Math.min(at, list.length - 1);
  const items = list.map((s, k) => el("li", { class: k === last ? "current" : "", hidden: k > last,
    "aria-current": k === last ? "step" : false,
    dataset: { step: s.step, value: String(s.value), ...(s.dim === undefined ? {} : { dim: String(s.dim) }) } },
  el("span", { class: "step-title", text: s.title }), el("span", { class: "step-text", text: s.text })));
  const go = (k) => onStep(Math.max(0, Math.min(list.length - 1, k)));
  const section = el("section", { class: "replay", tabindex: "-1", "aria-labelledby": "replay-title",
    dataset: { replay: "", head: String(h), row: String(i), col: String(j) },
    onkeydown: (e) => {
      const moves = { ArrowRight: last + 1, ArrowDown: last + 1, ArrowLeft: last - 1, ArrowUp: last - 1, Home: 0, End: list.length - 1 };
      if (e.key in moves && !e.target.closest("select, input")) { e.preventDefault(); go(moves[e.key]); }
      if (e.key === "Escape") onClose();
    } },
  el("h2", { id: "replay-title", text: `Replay: head ${h + 1}, query ${i + 1}, key ${j + 1}` }),
  el("p", { class: "note", text: "Step through with Next and Back (or the arrow keys). Choose another weight to replay it." }),
  el("ol", { class: "replay-steps" }, items),
  el("div", { class: "replay-nav" },
    el("button", { type: "button", class: "secondary", text: "Back", disabled: last === 0, onclick: () => go(last - 1) }),
    el("span", { class: "replay-count", text: `step ${last + 1} of ${list.length}` }),
    el("button", { type: "button", text: "Next", disabled: last === list.length - 1, onclick: () => go(last + 1) }),
    el("button", { type: "button", class: "secondary", text: "All steps", onclick: () => go(list.length - 1) }),
    el("button", { type: "button", class: "secondary", text: "Close replay", onclick: onClose })));
  return section;
}
