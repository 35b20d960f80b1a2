// @ts-check
// Items: questions with known answers, asked before the workbench and after it. An answer is an
// event the server scores; what the learner sees afterwards comes from their progress, so a reload
// shows it again, and an answer still waiting on this device says so. The right answer of a question
// asked again after the workbench is shown only then.

import { el, math } from "./dom.js";
import { exact, fillNodes, locale, t } from "../i18n.js";

// One question's form. `answered`: {response, correct?, misconception?, answer?} from progress, or
// {response, pending: true} for an answer still on this device.
export function itemForm({ item, phase, position, onAnswer }) {
  const name = `item-${phase}-${item.id}`;
  const inputs =
    item.kind === "choice"
      ? item.choices.map((c) =>
          el("input", { type: "radio", name, value: c.id, id: `${name}-${c.id}`, required: true }),
        )
      : [el("input", { type: "number", step: "any", id: name, name, required: true, inputmode: "decimal" })];
  const options =
    item.kind === "choice"
      ? el(
          "ul",
          { class: "item-choices" },
          item.choices.map((c, i) =>
            el("li", {}, el("label", { for: inputs[i].id }, inputs[i], el("span", {}, math(c.text)))),
          ),
        )
      : el("p", {}, el("label", { for: name, text: t("Your answer") }), " ", inputs[0]);
  const feedback = el("p", { class: "item-feedback", role: "status" });
  const button = el("button", { type: "submit", text: t("Record answer") });
  const submit = (e) => {
    e.preventDefault();
    const response = responseOf(item, inputs);
    if (response === undefined || (typeof response === "number" && !Number.isFinite(response))) {
      inputs[0].focus();
      return;
    }
    onAnswer(response);
  };
  const form = el(
    "form",
    { class: "item-form", dataset: { item: item.id, phase }, onsubmit: submit },
    el("fieldset", {}, el("legend", {}, `${position}. `, math(item.prompt)), options),
    el("p", {}, button),
    feedback,
  );
  // `locked`: why the question cannot be answered yet (the after questions wait for the before ones
  // and the experiment), or null.
  form.show = (answered, locked = null) => showAnswer({ form, item, inputs, button, feedback }, answered, locked);
  return form;
}

// What the learner chose or typed: a choice's id, a number (NaN when empty), or undefined (nothing chosen).
function responseOf(item, inputs) {
  if (item.kind === "choice") return inputs.find((i) => i.checked)?.value;
  return inputs[0].value.trim() === "" ? NaN : Number(inputs[0].value);
}

function showAnswer({ form, item, inputs, button, feedback }, answered, locked) {
  const fieldset = form.querySelector("fieldset");
  fieldset.disabled = Boolean(locked) && !answered;
  button.hidden = Boolean(locked) && !answered;
  form.dataset.locked = locked && !answered ? "true" : "false";
  if (!answered) {
    // An answer drawn before and gone now (erased elsewhere): the question is open again, empty.
    if (form.dataset.answered === "true") {
      for (const input of inputs) {
        input.disabled = false;
        input.checked = false;
        if (item.kind !== "choice") input.value = "";
      }
      feedback.className = "item-feedback";
      feedback.replaceChildren();
    }
    form.dataset.answered = "false";
    return;
  }
  form.dataset.answered = "true";
  for (const input of inputs) {
    if (answered.skipped) input.checked = false;
    else if (item.kind === "choice") input.checked = input.value === answered.response;
    else input.value = String(answered.response);
    input.disabled = true; // one answer per phase: the score stands for what was first understood
  }
  button.hidden = true;
  const verdict = answered.pending
    ? "queued"
    : answered.correct === true
      ? "correct"
      : answered.correct === false
        ? "wrong"
        : "";
  feedback.className = `item-feedback ${verdict}`;
  feedback.replaceChildren(...feedbackFor(item, answered));
}

function answerText(item, answer) {
  if (item.kind === "choice") return (item.choices.find((c) => c.id === answer) || { text: answer }).text;
  return answer.tolerance
    ? t("{value} (give or take {tolerance})", { value: exact(answer.value), tolerance: exact(answer.tolerance) })
    : exact(answer.value); // "17", not "17.0000"
}

function feedbackFor(item, answered) {
  if (answered.skipped) return [t("Skipped: this question comes back after the workbench.")];
  if (answered.pending) return [t("Saved on this device; it is scored when it reaches the server.")];
  if (answered.correct === undefined)
    return [t("Recorded. This question comes back after the workbench, and its answer is shown then.")];
  // Sentences follow one another with a space, except after a full-width stop (Chinese)
  const space = locale.startsWith("zh") ? "" : " ";
  // a number answer's working (how it is reached), after the verdict, right or wrong
  const working = answered.working ? [space, el("span", { class: "item-working" }, math(answered.working))] : [];
  if (answered.correct) return [el("strong", { text: t("Correct.") }), ...working];
  const answer = el("span", { class: "item-answer" }, math(answerText(item, answered.answer)));
  const parts = fillNodes(t("{verdict} The answer: {answer}."), {
    verdict: el("strong", { text: t("Not quite.") }),
    answer,
  });
  parts.push(...working);
  if (answered.misconception)
    parts.push(space, t("Your answer suggests this idea: {idea}.", { idea: answered.misconception }));
  return parts;
}

// Before and after on the same questions, once every question of both phases is answered and scored.
export function gainLine(items, answers) {
  const again = items.filter((i) => i.phase === "both");
  const score = (phase) => again.filter((i) => answers.get(`${i.id}:${phase}`)?.correct === true).length;
  const complete =
    again.length &&
    again.every((i) => ["pre", "post"].every((p) => answers.get(`${i.id}:${p}`)?.correct !== undefined));
  if (!complete) return null;
  return el("p", {
    class: "item-gain",
    role: "status",
    text: t(
      "On the questions asked twice you had {before} of {all} right before the workbench and {after} of {all} after.",
      { before: score("pre"), after: score("post"), all: again.length },
    ),
  });
}

const HEADS = () => ({
  "head-1": t("only Head 1's weights"),
  "head-2": t("only Head 2's weights"),
  both: t("both heads' weights"),
  neither: t("neither head's weights"),
});

// The predict checkpoint's own question: which head's weights move when only the last two features
// of one token change. The engine answers it later, on the learner's own edit in the workbench.
export function predictionChoice(saved) {
  const labels = { "head-1": t("Head 1"), "head-2": t("Head 2"), both: t("Both heads"), neither: t("Neither") };
  const inputs = Object.keys(labels).map((id) =>
    el("input", { type: "radio", name: "prediction-choice", value: id, id: `prediction-${id}`, checked: saved === id }),
  );
  const node = el(
    "fieldset",
    { class: "prediction-choice" },
    el("legend", { text: t("If you change only the last two features of one token, whose attention weights change?") }),
    inputs.map((input) => el("label", { for: input.id }, input, el("span", { text: labels[input.value] }))),
  );
  return { node, value: () => inputs.find((i) => i.checked)?.value };
}

// What the engine said of the learner's own edit, and whether their prediction held.
export function predictionVerdict(node, prediction) {
  node.hidden = !prediction?.observed;
  if (node.hidden) return null;
  const moved = HEADS()[prediction.observed];
  const text =
    prediction.held === true
      ? t("Your prediction held: your own edit in the workbench changed {moved}.", { moved })
      : prediction.held === false
        ? t("Your prediction did not hold: your own edit in the workbench changed {moved}.", { moved })
        : t("Your own edit in the workbench changed {moved}.", { moved });
  node.className = `prediction-verdict verdict ${prediction.held === false ? "wrong" : "correct"}`;
  node.textContent = text;
  return text;
}
