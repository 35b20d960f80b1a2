// @ts-check
// Making SVG elements (the charts, the workbench's glyphs and diagram marks).

const SVG = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== "" && v !== null && v !== undefined) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
