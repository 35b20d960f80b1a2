// @ts-check
// The diagram's connectors, SVG paths over the block in the data's order: the stream into W_Q/W_K/W_V,
// a bus into each lane, through it, every head into the concatenation, W_O, Y and the ⊕. Measured from
// the laid-out boxes; on a phone (one column) the text's arrows join them instead. Decorative (aria-hidden).

import { svg } from "./svg.js";

const GAP = 3; // px between a wire's end and the box it enters

// A box relative to the layer: {left, right, top, bottom, cx, cy}.
function box(node, origin) {
  const r = node.getBoundingClientRect();
  const left = r.left - origin.left,
    top = r.top - origin.top;
  return { left, top, right: left + r.width, bottom: top + r.height, cx: left + r.width / 2, cy: top + r.height / 2 };
}

// The vertical line a glyph (the stage's picture) sits on, so wires meet the drawn matrix, not a caption.
function glyphBox(stageNode, origin) {
  const glyph = stageNode.querySelector(".glyph, .heatmap") || stageNode;
  return box(glyph, origin);
}

function path(d, from, to) {
  return svg("path", { d, class: "wire", "marker-end": "url(#wire-head)", "data-from": from, "data-to": to });
}

// A clean run from box a to b in the data's direction: rightwards at a height both share (`y`), or
// down; else no wire (the text's arrows still join them; a wire drawn backwards would mislead).
const rightwards = (a, b, y) =>
  b.left - a.right > 2 * GAP && y >= Math.max(a.top, b.top) && y <= Math.min(a.bottom, b.bottom);
const downwards = (a, b) => b.top - a.bottom > 2 * GAP;
// A lane wrapped onto two rows (the lesson's ~1,200 px): down from a, along the gap below the first
// row (its bottom `row`), down into b; never through a box.
const wrapped = (a, b, row, across = b.top - 4 * GAP) =>
  across - row > GAP ? `M${a.cx},${a.bottom + GAP} V${across} H${b.cx} V${b.top - GAP}` : null;

// Every wire as [d, from, to], in the data's order; a wire the layout cannot draw cleanly is left out.
function routes(body, origin) {
  const q = (sel) => body.querySelector(sel);
  const branch = box(q(".branch"), origin);
  const x = box(q(".stream-x"), origin);
  const proj = box(q(".projections"), origin);
  const gutter = branch.left - 9; // the stream's way up runs left of the block
  const out = [
    proj.left - GAP > gutter && x.left > gutter
      ? [`M${x.cx},${x.top - GAP} V${x.top - 10} H${gutter} V${proj.cy} H${proj.left - GAP}`, "x", "projections"]
      : null,
  ];
  const lanes = [...body.querySelectorAll(".lane")];
  const concatNode = q('[data-stage="concat"]');
  const concat = glyphBox(concatNode, origin);
  const intoConcat = concat.left - 12;
  const into = {
    busX: box(q(".lanes"), origin).left + 6, // inside the block, left of the lanes
    proj,
    concat,
    intoConcat,
    // the way down into the concatenation runs right of every lane, or no head's wire takes it
    clear: intoConcat - Math.max(...lanes.map((l) => box(l, origin).right)) > GAP,
  };
  for (const laneNode of lanes) out.push(...laneWires(laneNode, origin, into));
  out.push(...mergeWires(body, concatNode, concat, origin));
  return out.filter(Boolean);
}

// One lane's wires: from the bus into Q K V, along its stages, out into the concatenation.
function laneWires(laneNode, origin, { busX, proj, concat, intoConcat, clear }) {
  const h = laneNode.dataset.head;
  // Q K V, then each stage after the arrow that names its operation (QKᵀ ÷ √d, softmax, A·V).
  const steps = [
    laneNode.querySelector(".qkv-group"),
    ...["scores", "weights", "head-output"].map((s) => laneNode.querySelector(`[data-stage="${s}"]`)),
  ];
  const names = ["qkv", "scores", "weights", "head-output"];
  const first = glyphBox(steps[0], origin);
  const firstStage = box(steps[0], origin);
  const out = [
    firstStage.left - GAP > busX && downwards(proj, first)
      ? [`M${busX},${proj.bottom + GAP} V${first.cy} H${firstStage.left - GAP}`, "projections", `lane:${h}`]
      : null,
  ];
  for (let i = 1; i < steps.length; i++) {
    const d = stepWire(steps, i, origin);
    out.push(d ? [d, `${names[i - 1]}:${h}`, `${names[i]}:${h}`] : null);
  }
  const o = glyphBox(steps[3], origin);
  const oStage = box(steps[3], origin);
  out.push(
    clear && intoConcat - oStage.right > 2 * GAP
      ? [
          `M${oStage.right + GAP},${o.cy} H${intoConcat} V${concat.cy} H${concat.left - GAP}`,
          `head-output:${h}`,
          "concat",
        ]
      : null,
  );
  return out;
}

// From a lane's stage i - 1 to stage i: rightwards at the height of the operation's name, or wrapped below.
function stepWire(steps, i, origin) {
  const a = box(steps[i - 1], origin);
  const b = box(steps[i], origin);
  const label = steps[i].previousElementSibling;
  const named = label && box(label, origin); // the operation's name
  const y = named ? named.bottom - 8 : b.top + 12;
  const row = Math.max(
    ...steps.slice(0, i).map((s) => box(s, origin).bottom),
    named && named.bottom <= b.top ? named.bottom : 0,
  );
  if (rightwards(a, b, y)) return `M${a.right + GAP},${y} H${b.left - GAP}`;
  return b.top > row ? wrapped(a, b, row) : null;
}

// The concatenation down to W_O, W_O to Y, Y to the ⊕.
function mergeWires(body, concatNode, concat, origin) {
  const concatStage = box(concatNode, origin);
  const [woNode, yNode] = ["wo", "output"].map((s) => body.querySelector(`[data-stage="${s}"]`));
  const wo = glyphBox(woNode, origin);
  const y = glyphBox(yNode, origin);
  const woStage = box(woNode, origin);
  const plus = box(body.querySelector(".plus"), origin);
  const yStage = box(yNode, origin);
  return [
    downwards(concatStage, wo) ? [`M${concat.cx},${concatStage.bottom + GAP} V${wo.top - GAP}`, "concat", "wo"] : null,
    downwards(woStage, y) ? [`M${wo.cx},${woStage.bottom + GAP} V${y.top - GAP}`, "wo", "output"] : null,
    plus.top - 12 > yStage.bottom + GAP
      ? [`M${y.cx},${yStage.bottom + GAP} V${plus.top - 12} H${plus.cx} V${plus.top - GAP}`, "output", "plus"]
      : null,
  ];
}

// Draws (or redraws) the wires of `body` (the .diagram-body) into its own layer, when it is laid
// out as columns (the merge column beside the lanes); clears them otherwise.
export function connect(body) {
  let layer = body.querySelector(":scope > svg.wires");
  const merge = body.querySelector(".merge-row");
  const wide = merge && getComputedStyle(merge).flexDirection === "column";
  body.classList.toggle("wired", Boolean(wide));
  if (!wide) {
    layer?.remove();
    return;
  }
  if (!layer) {
    layer = svg("svg", { class: "wires", "aria-hidden": "true", focusable: "false" });
    body.prepend(layer);
  }
  const origin = body.getBoundingClientRect();
  layer.setAttribute("viewBox", `0 0 ${origin.width} ${origin.height}`);
  layer.setAttribute("width", origin.width);
  layer.setAttribute("height", origin.height);
  const head = svg("marker", {
    id: "wire-head",
    viewBox: "0 0 8 8",
    refX: 7,
    refY: 4,
    markerWidth: 7,
    markerHeight: 7,
    orient: "auto-start-reverse",
  });
  head.append(svg("path", { d: "M0,0 L8,4 L0,8 z", class: "wire-head" }));
  const defs = svg("defs");
  defs.append(head);
  layer.replaceChildren(defs, ...routes(body, origin).map(([d, from, to]) => path(d, from, to)));
}
