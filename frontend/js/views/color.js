// @ts-check
// A colour-blind-safe sequential scale (viridis) with readable text on every cell.

const STOPS = [
  [68, 1, 84],
  [72, 40, 120],
  [62, 73, 137],
  [49, 104, 142],
  [38, 130, 142],
  [31, 158, 137],
  [53, 183, 121],
  [110, 206, 88],
  [181, 222, 43],
  [253, 231, 37],
];

export function viridis(value) {
  const v = Math.min(1, Math.max(0, Number.isFinite(value) ? value : 0)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(v));
  const t = v - i;
  return STOPS[i].map((c, k) => Math.round(c + (STOPS[i + 1][k] - c) * t));
}

// A colour-blind-safe diverging scale (ColorBrewer PuOr): -1 purple, 0 near white, +1 orange.
const DIVERGING = [
  [84, 39, 136],
  [153, 142, 195],
  [216, 218, 235],
  [247, 247, 247],
  [254, 224, 182],
  [241, 163, 64],
  [179, 88, 6],
];

export function diverging(t) {
  const v = ((Math.min(1, Math.max(-1, Number.isFinite(t) ? t : 0)) + 1) / 2) * (DIVERGING.length - 1);
  const i = Math.min(DIVERGING.length - 2, Math.floor(v));
  return DIVERGING[i].map((c, k) => Math.round(c + (DIVERGING[i + 1][k] - c) * (v - i)));
}

// WCAG relative luminance; the text colour is whichever of near-black and white contrasts more.
function luminance(rgb) {
  const [r, g, b] = rgb.map((c) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

export function paint(cell, value) {
  fill(cell, viridis(value));
}

/** A cell's background `rgb`, and whichever text colour contrasts more with it. */
export function fill(cell, rgb) {
  cell.style.backgroundColor = `rgb(${rgb.join(", ")})`;
  const bg = luminance(rgb);
  const onDark = 1.05 / (bg + 0.05);
  const onLight = (bg + 0.05) / 0.05; // against black
  cell.style.color = onLight >= onDark ? "#000" : "#fff";
}
