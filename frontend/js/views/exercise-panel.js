// The implement checkpoint wherever the learner is: choose Python or TypeScript, download the whole
// exercise (README, starter, tests, submit and trace scripts), run its tests, trace your code beside
// the engine, then prove it on fresh cases. Every command is the exact one for the chosen language.

import { challengePanel } from "./challenge-panel.js";
import { command } from "./command.js";
import { el } from "./dom.js";
import { fillNodes, t } from "../i18n.js";

const CHOSEN = "exercise.language";
// Identifiers stay code in every language: {name: text} -> {name: <code>text</code>}.
const codes = (names) => Object.fromEntries(Object.entries(names).map(([k, v]) => [k, el("code", { text: v })]));
const DOWNLOADS = "/api/v1/exercises/multi-head-attention";

// What differs between the two tracks; the tests, the messages and the server's checks are shared.
export const TRACKS = {
  python: {
    name: "Python",
    needs: t("Python 3.10+ with numpy (and pytest for the tests)"),
    contract: () => fillNodes(t("{signature} returns a dict of numpy arrays or nested lists: {weights} [H][n][n], {head_outputs} [H][n][d_head], {concatenated} and {output} [n][d_model]."),
      codes({ signature: "multi_head_attention(tokens, heads, causal=True, output_projection=None)", weights: "weights",
        head_outputs: "head_outputs", concatenated: "concatenated", output: "output" })),
    file: "starter.py",
    setup: null,
    test: (block) => block.python || "pytest exercises/multi-head-attention/tests",
    trace: (path, file, link) => `python ${path}/trace.py ${path}/${file} '${link}'`,
    submit: (path, file, url) => `python ${path}/submit.py ${path}/${file} --challenge ${url}`,
  },
  typescript: {
    name: "TypeScript",
    needs: t("Node 20 and pnpm 12 ({command})", { command: "npm install -g pnpm@12.4.2" }),
    contract: () => fillNodes(t("{signature} returns {result}, each a {three} or {two} in the same axes as the Python track."),
      codes({ signature: "multiHeadAttention(tokens, heads, { causal, outputProjection })",
        result: "{ weights, headOutputs, concatenated, output }", three: "number[][][]", two: "number[][]" })),
    file: "starter.ts",
    setup: "pnpm install",
    test: (block) => block.command,
    trace: (path, file, link) => `pnpm run trace -- ${path}/${file} '${link}'`,
    submit: (path, file, url) => `pnpm run submit -- ${path}/${file} --challenge ${url}`,
  },
};

export function chosenTrack() {
  try {
    const kept = localStorage.getItem(CHOSEN);
    return kept in TRACKS ? kept : "python";
  } catch {
    return "python";
  }
}

function keep(track) {
  try {
    localStorage.setItem(CHOSEN, track);
  } catch {
    // private mode: the choice lasts for this page
  }
}

// workbenchLink(): the workbench's current configuration as a link (the lesson's embedded one).
export function exercisePanel({ block, verification, onVerdict, workbenchLink }) {
  let track = chosenTrack();
  const path = block.path;
  const parts = {
    needs: el("span"), contract: el("p", { class: "track-contract" }),
    download: el("a", { id: "exercise-download", download: "" }),
    setup: el("li"), test: command("exercise-test"), trace: command("exercise-trace"),
  };
  const challenge = challengePanel({
    verification, onVerdict,
    command: (url) => TRACKS[track].submit(path, TRACKS[track].file, url),
  });

  const choice = el("fieldset", { class: "track-choice" }, el("legend", { text: t("Your programming language") }),
    ...Object.entries(TRACKS).map(([id, one]) => el("label", {},
      el("input", { type: "radio", name: "track", value: id, checked: id === track,
        onchange: () => { track = id; keep(id); draw(); } }), ` ${one.name}`)));

  function draw() {
    const chosen = TRACKS[track];
    parts.needs.textContent = chosen.needs;
    parts.contract.replaceChildren(...chosen.contract());
    parts.download.href = `${DOWNLOADS}/${track}.zip`;
    parts.download.textContent = `multi-head-attention-${track}.zip`;
    parts.setup.hidden = !chosen.setup;
    parts.setup.replaceChildren(...fillNodes(t("In the unpacked folder, install the test runner once: {command}"),
      { command: el("code", { text: chosen.setup || "" }) }));
    parts.test.set(chosen.test(block));
    parts.trace.set(chosen.trace(path, chosen.file, workbenchLink()));
    challenge.redraw();
  }

  const steps = el("ol", { class: "exercise-steps" },
    el("li", {}, ...fillNodes(t("Download the whole exercise: {file} (README, starter, tests, and the submit and trace scripts; needs {needs}). In a clone of this repository it is {folder}."),
      { file: parts.download, needs: parts.needs, folder: el("code", { text: `${path}/` }) })),
    parts.setup,
    el("li", {}, t("Run the tests from the unpacked folder and fix the starter until they pass; each failure names the mistake:"),
      parts.test.node),
    el("li", {}, t("See your numbers beside the engine's in the workbench above, stage by stage (the link is its current configuration; the script prints a link that draws yours beside the correct ones):"),
      parts.trace.node),
    el("li", {}, t("Prove it on fresh cases the server picks:")));
  draw();
  const node = el("div", { class: "exercise-panel" }, choice, parts.contract, steps, challenge.node);
  // refresh(): the workbench changed, so the trace command's link follows it.
  return { node, refresh: () => parts.trace.set(TRACKS[track].trace(path, TRACKS[track].file, workbenchLink())) };
}
