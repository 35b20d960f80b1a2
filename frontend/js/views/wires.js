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

// Every wire as [d, from, to], in the data's order; a wire the layout cannot draw cleanly is null.
function routes(body, origin) {
  const q = (sel, root = body) => root.querySelector(sel);
  const branch = box(q(".branch"), origin);
  const x = box(q(".stream-x"), origin),
    proj = box(q(".projections"), origin);
  const gutter = branch.left - 9; // the stream's way up runs left of the block
  const out = [
    proj.left - GAP > gutter && x.left > gutter
      ? [`M${x.cx},${x.top - GAP} V${x.top - 10} H${gutter} V${proj.cy} H${proj.left - GAP}`, "x", "projections"]
      : null,
  ];
  const lanes = [...body.querySelectorAll(".lane")];
  const busX = box(q(".lanes"), origin).left + 6; // inside the block, left of the lanes
  const concatNode = q('[data-stage="concat"]');
  const concat = glyphBox(concatNode, origin);
  const intoConcat = concat.left - 12;
  // the way down into the concatenation runs right of every lane, or no head's wire takes it
  const clearOfLanes = intoConcat - Math.max(...lanes.map((l) => box(l, origin).right)) > GAP;
  for (const laneNode of lanes) {
    const h = laneNode.dataset.head;
    // Q K V, then each stage after the arrow that names its operation (QKᵀ ÷ √d, softmax, A·V).
    const steps = [
      q(".qkv-group", laneNode),
      ...["scores", "weights", "head-output"].map((s) => q(`[data-stage="${s}"]`, laneNode)),
    ];
    const names = ["qkv", "scores", "weights", "head-output"];
    const first = glyphBox(steps[0], origin),
      firstStage = box(steps[0], origin);
    out.push(
      firstStage.left - GAP > busX && downwards(proj, first)
        ? [`M${busX},${proj.bottom + GAP} V${first.cy} H${firstStage.left - GAP}`, "projections", `lane:${h}`]
        : null,
    );
    for (let i = 1; i < steps.length; i++) {
      const a = box(steps[i - 1], origin),
        b = box(steps[i], origin);
      const label = steps[i].previousElementSibling,
        named = label && box(label, origin); // the operation's name
      const y = named ? named.bottom - 8 : b.top + 12;
      const row = Math.max(
        ...steps.slice(0, i).map((s) => box(s, origin).bottom),
        named && named.bottom <= b.top ? named.bottom : 0,
      );
      const d = rightwards(a, b, y)
        ? `M${a.right + GAP},${y} H${b.left - GAP}`
        : b.top > row
          ? wrapped(a, b, row)
          : null;
      out.push(d ? [d, `${names[i - 1]}:${h}`, `${names[i]}:${h}`] : null);
    }
    const o = glyphBox(steps[3], origin),
      oStage = box(steps[3], origin);
    out.push(
      clearOfLanes && intoConcat - oStage.right > 2 * GAP
        ? [
            `M${oStage.right + GAP},${o.cy} H${intoConcat} V${concat.cy} H${concat.left - GAP}`,
            `head-output:${h}`,
            "concat",
          ]
        : null,
    );
  }
  const concatStage = box(concatNode, origin);
  const [woNode, yNode] = ["wo", "output"].map((s) => q(`[data-stage="${s}"]`));
  const wo = glyphBox(woNode, origin),
    y = glyphBox(yNode, origin),
    woStage = box(woNode, origin);
  out.push(
    downwards(concatStage, wo) ? [`M${concat.cx},${concatStage.bottom + GAP} V${wo.top - GAP}`, "concat", "wo"] : null,
  );
  out.push(downwards(woStage, y) ? [`M${wo.cx},${woStage.bottom + GAP} V${y.top - GAP}`, "wo", "output"] : null);
  const plus = box(q(".plus"), origin),
    yStage = box(yNode, origin);
  out.push(
    plus.top - 12 > yStage.bottom + GAP
      ? [`M${y.cx},${yStage.bottom + GAP} V${plus.top - 12} H${plus.cx} V${plus.top - GAP}`, "output", "plus"]
      : null,
  );
  return out.filter(Boolean);
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
