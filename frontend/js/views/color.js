// A colour-blind-safe sequential scale (viridis) with readable text on every cell.

const STOPS = [
  [68, 1, 84], [72, 40, 120], [62, 73, 137], [49, 104, 142], [38, 130, 142],
  [31, 158, 137], [53, 183, 121], [110, 206, 88], [181, 222, 43], [253, 231, 37],
];

export function viridis(value) {
  const v = Math.min(1, Math.max(0, Number.isFinite(value) ? value : 0)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(v));
  const t = v - i;
  return STOPS[i].map((c, k) => Math.round(c + (STOPS[i + 1][k] - c) * t));
}

export function paint(cell, value) {
  const [r, g, b] = viridis(value);
  cell.style.backgroundColor = `rgb(${r}, ${g}, ${b})`;
  const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  cell.style.color = luminance > 140 ? "#111" : "#fff";
}
