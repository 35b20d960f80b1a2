// @ts-check
// A matrix drawn as its shape: one small square per number, coloured by value. Weights use the
// sequential scale (0..1); every other matrix the diverging one, scaled to its largest magnitude.
// The numbers themselves are in the stage's table: the glyph is decoration for the eye.

import { diverging, viridis } from "./color.js";
import { svg } from "./svg.js";

// rows: [r][c] numbers; masked: [r][c] booleans or null; owners: per column (or per row, `byRow`) a head index.
export function glyph({ rows, masked = null, probability = false, owners = null, byRow = false, cell = 10 }) {
  const height = rows.length,
    width = rows[0].length;
  const scale = probability ? 1 : Math.max(1e-12, ...rows.flat().map(Math.abs));
  const node = svg("svg", {
    class: "glyph",
    viewBox: `0 0 ${width * cell} ${height * cell}`,
    width: width * cell,
    height: height * cell,
    "aria-hidden": "true",
    focusable: "false",
  });
  rows.forEach((row, i) => {
    row.forEach((value, j) => {
      const hidden = masked?.[i][j];
      const rgb = hidden ? [236, 236, 240] : probability ? viridis(value) : diverging(value / scale);
      const owner = owners ? owners[byRow ? i : j] : null;
      node.append(
        svg("rect", {
          x: j * cell,
          y: i * cell,
          width: cell - 1,
          height: cell - 1,
          fill: `rgb(${rgb.join(",")})`,
          class: hidden ? "masked" : "",
          ...(owner === null || owner === undefined ? {} : { "data-owner": String(owner) }),
        }),
      );
    });
  });
  return node;
}
