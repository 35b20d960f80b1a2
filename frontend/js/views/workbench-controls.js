// @ts-check
// The workbench's controls (frontend/pages/workbench.html): drawn from the state, and each wired to the
// page's one `update` (the state changed, reported, computed and drawn).

import { t } from "../i18n.js";
import { $ } from "../shell.js";
import { el } from "./dom.js";
import { tokenEditor } from "./token-editor.js";

/** The stages a "show every number" opens: the shared ones, then each head's. @param {number} heads */
export const everyStage = (heads) => [
  "projections",
  "concat",
  "wo",
  "output",
  "residual",
  ...Array.from({ length: heads }, (_, h) => ["q", "k", "v", "scores", "head-output"].map((s) => `${s}:${h}`)).flat(),
];

/**
 * The controls as the state says, the tokens' editor included (its edits go through `update`).
 * @param {{ state: any, open: Set<string> }} page @param {(change: (s: any) => void, parameter: string, data: object) => void} update
 */
export function drawControls(page, update) {
  const state = page.state;
  $("tokens").replaceChildren(
    tokenEditor(state.tokens, (k, d, v) =>
      update(
        (s) => {
          s.tokens[k][d] = v;
        },
        "token",
        { token: k + 1, dimension: d + 1, value: v },
      ),
    ),
  );
  $("causal").checked = state.causal;
  $("reuse").checked = state.reuse;
  $("compare").value = state.compare;
  $("heads").value = String(state.heads);
  $("kv").replaceChildren(...[1, 2, 4].filter((k) => state.heads % k === 0).map((k) => kvOption(k, state.heads)));
  $("kv").value = String(state.kv);
  $("rope").value = state.rope;
  $("rope").disabled = state.heads === 4;
  $("base").value = String(state.base);
  $("base").disabled = !state.rope;
  $("qkv").value = state.qkv;
  $("wo").value = state.wo;
  $("open-all").setAttribute("aria-pressed", String(everyStage(state.heads).every((k) => page.open.has(k))));
  $("controls-note").textContent = controlsNote(state);
}

function kvOption(k, heads) {
  const text =
    k === heads
      ? t("{count} (one per head)", { count: k })
      : k === 1
        ? t("1 (multi-query)")
        : t("{count} (grouped-query)", { count: k });
  return el("option", { value: String(k), text });
}

// What the controls' settings mean here, in a sentence each.
function controlsNote(state) {
  return [
    state.heads === 4 ? t("RoPE needs an even d_head: with 4 heads d_head is 1.") : "",
    state.rope === "half" ? t("Half: each coordinate pairs with the one d_head/2 after it (rotate half).") : "",
    state.rope === "interleaved" ? t("Interleaved: adjacent coordinates pair up (1 with 2, 3 with 4).") : "",
    state.kv < state.heads
      ? t("{count} heads share each K/V head: each lane says whose keys and values it reads.", {
          count: state.heads / state.kv,
        })
      : "",
    state.rope && state.heads === 2
      ? t(
          "With d_head 2 each head has one pair, rotated by position × 1 radian whatever the base: choose 1 head to see the base and the two pairings differ.",
        )
      : "",
  ]
    .filter(Boolean)
    .join(" ");
}

// A control's change: its value into the state (`change`), reported as `parameter`, the controls redrawn.
function on(id, parameter, change, update, redraw) {
  $(id).addEventListener("change", () => {
    const control = $(id);
    const value = control.type === "checkbox" ? control.checked : control.value;
    update((s) => change(s, value), parameter, { value });
    redraw();
  });
}

/**
 * Each control wired: its change goes through `update` (state, events, render), then `redraw` draws the controls.
 * @param {(change: (s: any) => void, parameter: string, data: object) => void} update @param {() => void} redraw
 */
export function wireControls(update, redraw) {
  const when = (id, parameter, change) => on(id, parameter, change, update, redraw);
  when("causal", "causal", (s, v) => {
    s.causal = v;
  });
  when("reuse", "reuse_first_slice", (s, v) => {
    s.reuse = v;
    if (s.reuse) s.compare = "";
  });
  $("compare").addEventListener("change", () => {
    const value = $("compare").value;
    update(
      (s) => {
        s.compare = value;
        if (s.compare) s.reuse = false;
      },
      "failure_mode",
      { value: value || null },
    );
    redraw();
  });
  when("heads", "heads", (s, v) => {
    s.heads = Number(v);
    s.kv = s.heads;
    s.cell = null;
  });
  when("kv", "kv_heads", (s, v) => {
    s.kv = Number(v);
  });
  when("rope", "rope", (s, v) => {
    s.rope = v;
  });
  when("qkv", "projections", (s, v) => {
    s.qkv = v;
  });
  when("wo", "output_projection", (s, v) => {
    s.wo = v;
  });
  $("base").addEventListener("change", () => {
    const base = Number($("base").value);
    if (Number.isFinite(base) && base > 1) update((s) => Object.assign(s, { base }), "rope_base", { value: base });
  });
}
