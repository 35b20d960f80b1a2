// @ts-check
// The implement checkpoint wherever the learner is: choose Python or TypeScript, download the whole
// exercise (README, starter, tests, submit and trace scripts), run its tests, trace your code beside
// the engine, then prove it on fresh cases. Every command is the exact one for the chosen language.

import { challengePanel } from "./challenge-panel.js";
import { command } from "./command.js";
import { el } from "./dom.js";
import { fillNodes, t } from "../i18n.js";

const CHOSEN = "exercise.language";
// What differs between the two tracks; the tests, the messages and the server's checks are shared.
export const TRACKS = {
  python: {
    name: "Python",
    needs: t("Python 3.10+ with numpy (and pytest for the tests)"),
    file: "starter.py",
    setup: null,
    test: (block) => block.python,
    trace: (path, file, link) => `python ${path}/trace.py ${path}/${file} '${link}'`,
    submit: (path, file, url) => `python ${path}/submit.py ${path}/${file} --challenge ${url}`,
  },
  typescript: {
    name: "TypeScript",
    needs: t("Node 20 and pnpm 12 ({command})", { command: "npm install -g pnpm@12.4.2" }),
    file: "starter.ts",
    setup: "pnpm install",
    test: (block) => block.command,
    trace: (path, file, link) => `${script(path, "trace")} ${path}/${file} '${link}'`,
    submit: (path, file, url) => `${script(path, "submit")} ${path}/${file} --challenge ${url}`,
  },
};

// The TypeScript track runs the first exercise's scripts by name (package.json), the others' by path.
const script = (path, name) =>
  path.endsWith("/multi-head-attention") ? `pnpm run ${name} --` : `pnpm exec tsx ${path}/${name}.ts`;

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

/**
 * The exercise: its download in the learner's language, the commands to test and trace it, and the challenge.
 * `workbenchLink()`: the embedded workbench's (or explorable's) current configuration as a link.
 * @param {{ block: any, verification: string | null, onVerdict: (result: any) => void, workbenchLink: () => string }} options
 */
export function exercisePanel({ block, verification, onVerdict, workbenchLink }) {
  let track = chosenTrack();
  const path = block.path;
  const exercise = path.split("/").pop();
  const commandFor = (name, value) => TRACKS[track][name](path, TRACKS[track].file, value);
  const parts = {
    needs: el("span"),
    download: el("a", { id: "exercise-download", download: "" }),
    setup: el("li"),
    test: command("exercise-test"),
    trace: command("exercise-trace"),
  };
  const challenge = challengePanel({ exercise, verification, onVerdict, command: (url) => commandFor("submit", url) });
  const draw = () => {
    const chosen = TRACKS[track];
    parts.needs.textContent = chosen.needs;
    parts.download.href = `/api/v1/exercises/${exercise}/${track}.zip`;
    parts.download.textContent = `${exercise}-${track}.zip`;
    parts.setup.hidden = !chosen.setup;
    const install = t("In the unpacked folder, install the test runner once: {command}");
    parts.setup.replaceChildren(...fillNodes(install, { command: el("code", { text: chosen.setup || "" }) }));
    parts.test.set(chosen.test(block));
    parts.trace.set(commandFor("trace", workbenchLink()));
    challenge.redraw();
  };
  const choice = trackChoice(track, (id) => {
    track = id;
    keep(id);
    draw();
  });
  draw();
  const node = el("div", { class: "exercise-panel" }, choice, steps(parts, path), challenge.node);
  // refresh(): the workbench changed, so the trace command's link follows it.
  return { node, refresh: () => parts.trace.set(commandFor("trace", workbenchLink())) };
}

// The learner's programming language, one radio button a track.
function trackChoice(track, choose) {
  const options = Object.entries(TRACKS).map(([id, one]) =>
    el(
      "label",
      {},
      el("input", { type: "radio", name: "track", value: id, checked: id === track, onchange: () => choose(id) }),
      ` ${one.name}`,
    ),
  );
  return el("fieldset", { class: "track-choice" }, el("legend", { text: t("Your programming language") }), ...options);
}

// The exercise's steps: download, set up, test, trace, prove.
function steps(parts, path) {
  const download = t(
    "Download the whole exercise: {file} (README, starter, tests, and the submit and trace scripts; needs {needs}). In a clone of this repository it is {folder}.",
  );
  const folder = el("code", { text: `${path}/` });
  return el(
    "ol",
    { class: "exercise-steps" },
    el("li", {}, ...fillNodes(download, { file: parts.download, needs: parts.needs, folder })),
    parts.setup,
    el(
      "li",
      {},
      t("Run the tests from the unpacked folder and fix the starter until they pass; each failure names the mistake:"),
      parts.test.node,
    ),
    el(
      "li",
      {},
      // what each exercise's trace script really prints (issue 65, C3): the workbench draws the learner's own
      // numbers; the online softmax's names the tile where the loop first parts and links the slip it shows
      path.endsWith("/multi-head-attention")
        ? t(
            "See your numbers beside the engine's in the explorable above (the link is its current state; the script prints a link that draws yours beside the correct ones):",
          )
        : t(
            "Find where your loop first parts from the right one (the link is the explorable's current state; the script names the tile and the value that differ, and prints a link to the explorable drawing your values there beside the right loop's):",
          ),
      parts.trace.node,
    ),
    el("li", {}, t("Prove it on fresh cases the server picks:")),
  );
}
