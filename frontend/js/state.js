// The workbench's whole configuration lives in the URL hash, so a link reproduces the view.
// Embedded in a lesson (whose iframe URL has no hash) it is also kept on this device, so a
// reload of the lesson comes back to the learner's last configuration.

const KEPT = "workbench.embedded-state";

export const DEFAULT_TOKENS = [
  [1.0, 0.5, -0.5, 1.0],
  [0.2, 1.0, 1.5, -0.3],
  [-1.0, 0.3, 0.8, 0.6],
];

export function defaults() {
  return { tokens: DEFAULT_TOKENS.map((row) => [...row]), causal: true, reuse: false, compare: "" };
}

export function fromHash(hash = location.hash, restore = false) {
  if (!hash.replace(/^#/, "") && restore) hash = kept();
  const state = defaults();
  const params = new URLSearchParams(hash.replace(/^#/, ""));
  const tokens = params.get("t");
  if (tokens) {
    const rows = tokens.split(";").map((row) => row.split(",").map(Number));
    if (rows.length === 3 && rows.every((r) => r.length === 4 && r.every(Number.isFinite))) state.tokens = rows;
  }
  if (params.has("causal")) state.causal = params.get("causal") !== "0";
  if (params.has("reuse")) state.reuse = params.get("reuse") === "1";
  if (params.has("compare")) state.compare = params.get("compare");
  return state;
}

export function toHash(state) {
  const params = new URLSearchParams();
  params.set("t", state.tokens.map((row) => row.join(",")).join(";"));
  params.set("causal", state.causal ? "1" : "0");
  params.set("reuse", state.reuse ? "1" : "0");
  if (state.compare) params.set("compare", state.compare);
  return "#" + params.toString();
}

export function save(state) {
  history.replaceState(null, "", toHash(state));
}

export function remember(state) {
  try {
    localStorage.setItem(KEPT, toHash(state));
  } catch {
    // storage denied (some third-party iframes): the state lives for this page only
  }
}

function kept() {
  try {
    return localStorage.getItem(KEPT) || "";
  } catch {
    return "";
  }
}
