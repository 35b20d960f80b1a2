// @ts-check
// The workbench's whole configuration, declared once (hash-state.js): it lives in the URL hash, so
// a link reproduces the view. Embedded in a lesson (whose iframe URL has no hash) it is also kept on
// this device, so a reload of the lesson comes back to the learner's last configuration. The tokens'
// shape is the preset's (GET /api/v1/presets/workbench, written into the page by the server).

import { HashState } from "./hash-state.js";

const KEPT = "workbench.embedded-state";
export const DEFAULT_TOKENS = JSON.parse(
  /** @type {HTMLElement} */ (document.querySelector("[data-preset-tokens]")).dataset.presetTokens,
);
export const N = DEFAULT_TOKENS.length;
export const D_MODEL = DEFAULT_TOKENS[0].length;
export const HEAD_CHOICES = Array.from({ length: D_MODEL }, (_, i) => i + 1).filter((h) => D_MODEL % h === 0 && h <= 4);
export const ROPE_STYLES = ["half", "interleaved"];
export const PROJECTIONS = ["identity", "learned"];
const TEACHING_HEADS = 2;

export const STATE = new HashState([
  {
    name: "tokens",
    key: "t",
    type: "matrix",
    default: DEFAULT_TOKENS,
    kept: true,
    check: (rows) => rows.length === N && rows[0].length === D_MODEL,
  },
  { name: "causal", type: "boolean", default: true, kept: true },
  { name: "reuse", type: "boolean", default: false, kept: true },
  { name: "compare", type: "string", default: "" },
  { name: "heads", type: "integer", default: TEACHING_HEADS, values: HEAD_CHOICES },
  // key/value heads: grouped-query attention when fewer than heads
  { name: "kv", type: "integer", default: (s) => s.heads, check: (v, s) => v >= 1 && s.heads % v === 0 },
  // "" (off), "half" or "interleaved"; d_head must be even to turn pairs
  {
    name: "rope",
    type: "string",
    default: "",
    check: (v, s) => v === "" || (ROPE_STYLES.includes(v) && (D_MODEL / s.heads) % 2 === 0),
  },
  { name: "base", type: "number", default: 10000, check: (v) => v > 1 && v <= 1e12 },
  { name: "qkv", type: "string", default: "identity", values: PROJECTIONS }, // W_Q, W_K, W_V
  { name: "wo", type: "string", default: "identity", values: PROJECTIONS }, // W_O
  // the replayed weight: [head, query, key], 0-based
  {
    name: "cell",
    type: "numbers",
    default: null,
    check: (c, s) =>
      c.length === 3 && c.every(Number.isInteger) && c[0] < s.heads && c.slice(1).every((v) => v >= 0 && v < N),
  },
  // a learner's own outputs beside the engine's (the exercise's trace): {stage: numbers}
  { name: "yours", type: "object", default: null },
  // the lesson a link came from (the exercise's trace says so): the page offers a way back to it
  { name: "lesson", type: "string", default: "", check: (v) => v === "" || /^[a-z0-9-]{1,64}$/.test(v) },
]);

export const defaults = () => STATE.defaults();
export const consistent = (state) => STATE.settle(state);
export const toHash = (state) => STATE.write(state);

// The page's state; embedded (`restore`) with nothing in its hash, the one last kept on this device.
export function loadState(restore = false) {
  return restore && STATE.empty() && kept() ? STATE.read(kept()) : STATE.load();
}

// The API request the configuration describes (`learned`: the preset's W_Q, W_K, W_V, W_O).
export function requestBody(state, learned) {
  const body = { tokens: state.tokens, heads: state.heads, causal: state.causal };
  if (state.kv !== state.heads) body.kv_heads = state.kv;
  if (state.rope) body.rope = { style: state.rope, base: state.base };
  const kvWidth = (D_MODEL / state.heads) * state.kv;
  const projections = {};
  if (state.qkv === "learned" && learned) {
    projections.query = learned.query;
    projections.key = learned.key.map((row) => row.slice(0, kvWidth));
    projections.value = learned.value.map((row) => row.slice(0, kvWidth));
  }
  if (state.wo === "learned" && learned) projections.output = learned.output;
  if (Object.keys(projections).length) body.projections = projections;
  if (state.reuse) body.failure_mode = "reuse_first_slice";
  return body;
}

// The lesson's teaching case: two heads reading raw coordinates (identity Q/K/V, one K/V per head).
export function teachingCase(state) {
  return state.heads === TEACHING_HEADS && state.kv === TEACHING_HEADS && state.qkv === "identity" && !state.reuse;
}

export const save = (state) => STATE.save(state);

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
