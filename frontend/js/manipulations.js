// @ts-check
// The lesson's four manipulations: which one a change is, if any. The `experiment` checkpoint
// lists them in the lesson's front matter and completes on the server when all four are reported.

import { N_ } from "./i18n.js";
import { teachingCase } from "./state.js";

export const MANIPULATIONS = [
  { id: "last-two", text: N_("Change only dimension 3 or 4 of one token: only head 2's weights move.") },
  { id: "first-two", text: N_("Change only dimension 1 or 2 of one token: only head 1's weights move.") },
  { id: "causal-mask", text: N_("Toggle the causal mask: future columns appear above the diagonal.") },
  {
    id: "broken-reuse",
    text: N_("Enable “Reuse head 1 features for both heads (broken)”: both heads become identical."),
  },
];

// `change`: {parameter, dimension?, value?}; `before`: the state the change was made in.
// Token edits count in the lesson's teaching case only (two heads on raw coordinates), where
// the lesson's claim holds: another configuration mixes coordinates across heads.
export function manipulationOf(change, before) {
  if (change.parameter === "token") {
    if (!teachingCase(before)) return null;
    return change.dimension >= 3 ? "last-two" : "first-two";
  }
  if (change.parameter === "causal") return "causal-mask";
  if (change.parameter === "reuse_first_slice" && change.value === true && before.heads > 1) return "broken-reuse";
  return null;
}
