// The workbench's whole configuration lives in the URL hash, so a link reproduces the view.
// Embedded in a lesson (whose iframe URL has no hash) it is also kept on this device, so a
// reload of the lesson comes back to the learner's last configuration.

const KEPT = "workbench.embedded-state";

export const DEFAULT_TOKENS = [
  [1.0, 0.5, -0.5, 1.0],
  [0.2, 1.0, 1.5, -0.3],
  [-1.0, 0.3, 0.8, 0.6],
];
export const HEAD_CHOICES = [1, 2, 4]; // the divisors of d_model = 4
export const ROPE_STYLES = ["half", "interleaved"];
export const PROJECTIONS = ["identity", "learned"];

export function defaults() {
  return {
    tokens: DEFAULT_TOKENS.map((row) => [...row]),
    causal: true,
    reuse: false,
    compare: "",
    heads: 2,
    kv: 2, // key/value heads (grouped-query attention when fewer than heads)
    rope: "", // "" (off), "half" or "interleaved"
    base: 10000,
    qkv: "identity", // W_Q, W_K, W_V
    wo: "identity", // W_O
    cell: null, // the replayed weight: [head, query, key], 0-based
    yours: null, // a learner's own outputs beside the engine's (exercise trace): {stage: numbers}
  };
}

// d_head must stay even for RoPE and divide by the key/value heads; anything else falls back.
export function consistent(state) {
  if (!HEAD_CHOICES.includes(state.heads)) state.heads = 2;
  if (!(state.kv >= 1 && state.heads % state.kv === 0)) state.kv = state.heads;
  if (state.rope && (4 / state.heads) % 2) state.rope = "";
  if (!ROPE_STYLES.includes(state.rope)) state.rope = "";
  if (!(Number.isFinite(state.base) && state.base > 1 && state.base <= 1e12)) state.base = 10000;
  if (!PROJECTIONS.includes(state.qkv)) state.qkv = "identity";
  if (!PROJECTIONS.includes(state.wo)) state.wo = "identity";
  if (state.cell && !(state.cell.every(Number.isInteger) && state.cell[0] < state.heads && state.cell.slice(1).every((v) => v >= 0 && v < 3))) {
    state.cell = null;
  }
  return state;
}

function numbers(text, count) {
  const values = (text || "").split(",").map(Number);
  return values.length === count && values.every(Number.isFinite) ? values : null;
}

export function fromHash(hash = location.hash, restore = false) {
  if (!hash.replace(/^#/, "") && restore) hash = kept();
  const state = defaults();
  const params = new URLSearchParams(hash.replace(/^#/, ""));
  const rows = (params.get("t") || "").split(";").map((row) => numbers(row, 4));
  if (rows.length === 3 && rows.every(Boolean)) state.tokens = rows;
  if (params.has("causal")) state.causal = params.get("causal") !== "0";
  if (params.has("reuse")) state.reuse = params.get("reuse") === "1";
  if (params.has("compare")) state.compare = params.get("compare");
  if (params.has("heads")) state.heads = Number(params.get("heads"));
  state.kv = params.has("kv") ? Number(params.get("kv")) : state.heads;
  if (params.has("rope")) state.rope = params.get("rope");
  if (params.has("base")) state.base = Number(params.get("base"));
  if (params.has("qkv")) state.qkv = params.get("qkv");
  if (params.has("wo")) state.wo = params.get("wo");
  if (params.has("cell")) state.cell = numbers(params.get("cell"), 3);
  if (params.has("yours")) state.yours = yours(params.get("yours"));
  return consistent(state);
}

function yours(text) {
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

export function toHash(state) {
  const params = new URLSearchParams();
  params.set("t", state.tokens.map((row) => row.join(",")).join(";"));
  params.set("causal", state.causal ? "1" : "0");
  params.set("reuse", state.reuse ? "1" : "0");
  if (state.compare) params.set("compare", state.compare);
  if (state.heads !== 2) params.set("heads", String(state.heads));
  if (state.kv !== state.heads) params.set("kv", String(state.kv));
  if (state.rope) params.set("rope", state.rope);
  if (state.rope && state.base !== 10000) params.set("base", String(state.base));
  if (state.qkv !== "identity") params.set("qkv", state.qkv);
  if (state.wo !== "identity") params.set("wo", state.wo);
  if (state.cell) params.set("cell", state.cell.join(","));
  if (state.yours) params.set("yours", JSON.stringify(state.yours));
  return "#" + params.toString();
}

// The API request the configuration describes (`learned`: the preset's W_Q, W_K, W_V, W_O).
export function requestBody(state, learned) {
  const body = { tokens: state.tokens, heads: state.heads, causal: state.causal };
  if (state.kv !== state.heads) body.kv_heads = state.kv;
  if (state.rope) body.rope = { style: state.rope, base: state.base };
  const kvWidth = (4 / state.heads) * state.kv;
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
  return state.heads === 2 && state.kv === 2 && state.qkv === "identity" && !state.reuse;
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
