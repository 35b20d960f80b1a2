// @ts-check
// "Save as a test": the workbench's current case as a pytest and a vitest test, holding its tokens,
// flags and the engine's weights and output, ready to paste into the exercise's test file (which
// already imports run, np / allClose and fail).

import { command } from "./command.js";
import { el } from "./dom.js";
import { locale, t } from "../i18n.js";

// Why the case is beyond the exercise's function, or "" when it can be a test.
export function notATest(state) {
  const reasons = [];
  if (state.rope) reasons.push(t("RoPE is on"));
  if (state.kv !== state.heads) reasons.push(t("there are fewer K/V heads than heads"));
  if (state.qkv !== "identity") reasons.push(t("Q, K and V are learned projections"));
  return reasons.length
    ? t("The exercise's function computes Q = K = V = the tokens, one K/V head per head, no RoPE; here {reasons}.", {
        reasons: new Intl.ListFormat(locale).format(reasons),
      })
    : "";
}

const list = (value) => JSON.stringify(value);

// A short stable name for the case, so two saved cases do not collide.
function caseId(text) {
  let h = 2166136261;
  for (const c of text) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return h.toString(16).padStart(8, "0");
}

// wo: the W_O matrix, or null for the identity; correct: the engine's response for the case.
export function savedTests({ tokens, heads, causal, wo }, correct) {
  const weights = correct.heads.map((h) => h.weights);
  const output = correct.output;
  const about =
    `${tokens.length} tokens, ${heads} head${heads === 1 ? "" : "s"}, ${causal ? "causal mask" : "no mask"}, ` +
    `${wo ? "learned-looking" : "identity"} W_O`;
  const id = caseId(list([tokens, heads, causal, wo]));
  const python = [
    `def test_workbench_case_${id}(mha):`,
    `    """From the workbench: ${about}; the numbers are the engine's."""`,
    `    tokens = ${list(tokens)}`,
    `    output_projection = ${wo ? list(wo) : "None"}`,
    `    expected_weights = ${list(weights)}`,
    `    expected_output = ${list(output)}`,
    `    result = run(mha, tokens, ${heads}, causal=${causal ? "True" : "False"}, output_projection=output_projection)`,
    '    assert np.allclose(result["weights"], expected_weights, atol=1e-9), "the weights differ from the workbench\'s"',
    '    assert np.allclose(result["output"], expected_output, atol=1e-9), "the output differs from the workbench\'s"',
  ].join("\n");
  const typescript = [
    `test("workbench case ${id}: ${about}", () => {`,
    `  const tokens = ${list(tokens)};`,
    `  const outputProjection = ${wo ? list(wo) : "undefined"};`,
    `  const expectedWeights = ${list(weights)};`,
    `  const expectedOutput = ${list(output)};`,
    `  const result = run(mha, tokens, ${heads}, ${causal}, outputProjection);`,
    '  if (!allClose(result.weights, expectedWeights)) fail("the weights differ from the workbench\'s");',
    '  if (!allClose(result.output, expectedOutput)) fail("the output differs from the workbench\'s");',
    "});",
  ].join("\n");
  return { python, typescript };
}

export function savedTestsView(tests) {
  const python = command("saved-pytest");
  const typescript = command("saved-vitest");
  python.set(tests.python);
  typescript.set(tests.typescript);
  return el(
    "div",
    { class: "saved-tests" },
    el("h3", { text: t("pytest: paste at the end of {file}", { file: "tests/test_multi_head_attention.py" }) }),
    python.node,
    el("h3", { text: t("vitest: paste at the end of {file}", { file: "tests/multi-head-attention.test.ts" }) }),
    typescript.node,
  );
}
