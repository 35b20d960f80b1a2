// @ts-check
// One URL-hash codec for every page, as tensorflow/playground's State.PROPS: a page declares its
// properties (the key in the URL, a type, a default, and what is valid), reads its state from the
// hash and writes it back, so any configuration is a shareable link. A value the hash does not hold,
// or holds wrongly, is the default; writing leaves out what equals the default unless it is `kept`.
// This module is the only reader and writer of a URL hash: a page loads, saves and follows its own
// (load, save, onChange), and a host page changes an embedded page's state through it (send, link).

// Each type says how a value looks in the URL and whether one read from it is valid.
export const Types = {
  number: { read: (text) => (text.trim() === "" ? null : Number(text)), write: String, valid: Number.isFinite },
  integer: { read: (text) => (/^-?\d+$/.test(text) ? Number(text) : null), write: String, valid: Number.isInteger },
  boolean: {
    read: (text) => (text === "1" ? true : text === "0" ? false : null),
    write: (v) => (v ? "1" : "0"),
    valid: (v) => typeof v === "boolean",
  },
  string: { read: (text) => text, write: String, valid: (v) => typeof v === "string" },
  // Numbers separated by commas: "1,2,3".
  numbers: {
    read: (text) => text.split(",").map((v) => (v.trim() === "" ? NaN : Number(v))),
    write: (v) => v.join(","),
    valid: (v) => Array.isArray(v) && v.every(Number.isFinite),
  },
  // Rows of numbers: "1,2;3,4".
  matrix: {
    read: (text) => text.split(";").map((row) => Types.numbers.read(row)),
    write: (v) => v.map((row) => row.join(",")).join(";"),
    valid: (v) =>
      Array.isArray(v) && v.length > 0 && v.every((row) => Types.numbers.valid(row) && row.length === v[0].length),
  },
  // Any JSON object: {"a": 1}.
  object: {
    read: (text) => {
      try {
        return JSON.parse(text);
      } catch {
        return null;
      }
    },
    write: JSON.stringify,
    valid: (v) => v !== null && typeof v === "object" && !Array.isArray(v),
  },
};

// A property: {name, key?, type, default, values? (the only valid values), check? (value, state) -> valid,
// kept? (written even when it is the default)}. `default` may be a function of the state read so far.
export class HashState {
  /**
   * @param {any[]} props
   * @param {{ keep?: string }} [options] `keep`: embedded in a lesson, the page keeps its last state on this
   *   device under this name and gets it back when it loads again with nothing in its hash (as the workbench)
   */
  constructor(props, { keep = "" } = {}) {
    this.props = props.map((p) => ({ key: p.name, ...p, type: Types[p.type] }));
    for (const p of this.props) if (!p.type) throw new Error(`unknown type for ${p.name}`);
    const lesson = new URLSearchParams(location.search).get("lesson") || ""; // one kept state per embedding lesson
    this.keep = keep && window.parent !== window ? `kept-state:${keep}:${lesson}` : "";
  }

  defaults() {
    const state = {};
    for (const p of this.props) state[p.name] = fallback(p, state);
    return state;
  }

  // The state a hash describes, property by property in the declared order (a check may read earlier ones).
  read(hash) {
    const params = new URLSearchParams(String(hash).replace(/^#/, ""));
    const state = {};
    for (const p of this.props) {
      const value = params.has(p.key) ? p.type.read(params.get(p.key)) : null;
      state[p.name] = this.accepts(p, value, state) ? value : fallback(p, state);
    }
    return state;
  }

  // Whether `value` is valid for `p`, given the state so far (every property before it).
  accepts(p, value, state) {
    if (value === null || value === undefined || !p.type.valid(value)) return false;
    if (p.values && !p.values.includes(value)) return false;
    return !p.check || p.check(value, state);
  }

  // Correct a state in place (each property checked against the ones before it) and return it.
  settle(state) {
    for (const p of this.props) if (!this.accepts(p, state[p.name], state)) state[p.name] = fallback(p, state);
    return state;
  }

  // Only the properties `hash` holds, valid, by name (what a link sets and nothing else).
  partial(hash) {
    const params = new URLSearchParams(String(hash).replace(/^#/, ""));
    const found = {};
    const state = this.defaults();
    for (const p of this.props) {
      const value = params.has(p.key) ? p.type.read(params.get(p.key)) : null;
      if (this.accepts(p, value, state)) found[p.name] = state[p.name] = value;
    }
    return found;
  }

  // The state in a window's hash (this page's by default; a same-origin iframe's for its host); an embedded
  // page that keeps its state, loaded with an empty hash, gets back the one it kept.
  load(win = window) {
    const kept = win === window && this.keep && this.empty() ? stored(this.keep) : "";
    return this.read(kept || win.location.hash);
  }

  // Whether this page's URL has no hash at all (an embedded page may then restore what it kept).
  empty() {
    return !location.hash.replace(/^#/, "");
  }

  // Keep `state` as this page's hash, without a history entry or a hashchange (and on this device, embedded).
  save(state) {
    const hash = this.write(state);
    history.replaceState(null, "", hash);
    if (this.keep) stored(this.keep, hash);
  }

  // Give a loaded same-origin frame's page `state`: its hashchange redraws it.
  send(state, win) {
    win.location.hash = this.write(state);
  }

  // A URL (without its hash) with `state` as its hash: a link, or a frame's src before it loads.
  link(state, url) {
    return String(url).split("#")[0] + this.write(state);
  }

  // Call `then(state)` whenever this page's hash changes (a link followed, a host's send, the back button).
  onChange(then) {
    window.addEventListener("hashchange", () => then(this.load()));
  }

  write(state) {
    const params = new URLSearchParams();
    for (const p of this.props) {
      const value = state[p.name];
      if (value === null || value === undefined) continue;
      const text = p.type.write(value);
      const base = fallback(p, state);
      if (p.kept || base === null || base === undefined || text !== p.type.write(base)) params.set(p.key, text);
    }
    // Commas and semicolons are safe in a fragment: a link people can read.
    return `#${params.toString().replace(/%2C/gi, ",").replace(/%3B/gi, ";")}`;
  }
}

// This page's hash as it is, for a host page that follows an embedded page's state (events.js).
export const currentHash = () => location.hash;

// Give a loaded same-origin frame a link's hash as it is: for a page whose properties the host does
// not declare (the KV cache explorable), which reads it and keeps only its own keys.
export function forward(hash, win) {
  win.location.hash = hash;
}

function fallback(p, state) {
  const value = typeof p.default === "function" ? p.default(state) : p.default;
  return Array.isArray(value) ? structuredClone(value) : value;
}

// A kept state read (or, with `hash`, written) on this device; storage denied (a third-party frame): none.
function stored(name, hash = null) {
  try {
    if (hash !== null) localStorage.setItem(name, hash);
    return localStorage.getItem(name) || "";
  } catch {
    return "";
  }
}
