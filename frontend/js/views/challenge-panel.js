// The implement checkpoint, earned: the server issues random cases, the learner's own code answers
// them (`workbench exercise submit ... --challenge URL`, or pasted JSON), the server checks them.

import { ApiError, getJSON, postJSON } from "../api.js";
import { el } from "./dom.js";

const CHALLENGES = "/api/v1/exercises/multi-head-attention/challenges";
const POLL_MS = 2500;

export function challengePanel({ path, verification, onVerdict }) {
  const status = el("p", { class: "verdict", role: "status", "aria-live": "polite" });
  const command = el("code", { id: "challenge-command" });
  const expires = el("span");
  const pasted = el("textarea", { id: "pasted-answers", spellcheck: "false" });
  const details = el("div", { id: "challenge", hidden: true },
    el("p", {}, "Run this in the repository, with your file in place of the starter (valid until ", expires, "):"),
    el("div", { class: "command" }, command,
      el("button", { type: "button", class: "secondary", text: "Copy command", onclick: () => copy(command.textContent) })),
    el("details", {}, el("summary", { text: "No terminal connection to this server? Paste the answers instead" }),
      el("p", { text: "Add --print to the command above and paste the JSON it prints here." }),
      el("form", { onsubmit: (e) => { e.preventDefault(); submitPasted(); } },
        el("label", { for: "pasted-answers", text: "Answers printed by workbench exercise submit --print" }), pasted,
        el("p", {}, el("button", { type: "submit", text: "Check pasted answers" })))));
  const button = el("button", { type: "button", id: "new-challenge", text: "Get a challenge", onclick: () => start() });
  let challenge = null;
  let timer = null;
  let seen = 0;

  function show(text, kind = "") {
    status.className = `verdict ${kind}`.trim();
    status.textContent = text;
  }

  function verdict(result) {
    onVerdict(result);
    if (result.correct) {
      show(`Verified: ${result.message}`, "correct");
      stop();
    } else {
      const named = result.mistakes.length ? ` (${result.mistakes.join(", ")})` : "";
      show(`Not yet${named}: ${result.message} Fix it and run the command again.`, "wrong");
    }
  }

  async function start() {
    stop();
    show("Asking the server for fresh cases…");
    try {
      challenge = await postJSON(CHALLENGES, {});
    } catch (error) {
      show(error instanceof ApiError && error.status === 0
        ? "The server is not reachable; a challenge needs it. Try again when it answers."
        : `Could not get a challenge: ${error.message}`, "wrong");
      return;
    }
    seen = 0;
    command.textContent = `.venv/bin/workbench exercise submit ${path}/starter.py --challenge ${location.origin}${CHALLENGES}/${challenge.id}`;
    expires.textContent = new Date(challenge.expires_at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    details.hidden = false;
    button.textContent = "Get new cases";
    show("Waiting for your answers…");
    timer = setInterval(poll, POLL_MS);
  }

  function stop() {
    clearInterval(timer);
    timer = null;
  }

  async function poll() {
    if (!challenge) return;
    try {
      const now = await getJSON(`${CHALLENGES}/${challenge.id}`);
      if (now.attempts > seen && now.result) {
        seen = now.attempts;
        verdict({ ...now.result, completed: now.status === "solved" });
      }
      if (now.status === "expired") {
        show("This challenge has expired; get a new one.", "wrong");
        stop();
      }
    } catch {
      // offline for a moment: keep polling
    }
  }

  async function submitPasted() {
    if (!challenge) return;
    let body;
    try {
      body = JSON.parse(pasted.value);
    } catch {
      show("That is not the JSON the command prints: copy all of it, from { to }.", "wrong");
      return;
    }
    if (body && body.challenge && body.challenge !== challenge.id) {
      show("Those answers are for another challenge: run the command shown above.", "wrong");
      return;
    }
    try {
      const result = await postJSON(challenge.answers_url.replace(/^https?:\/\/[^/]+/, ""), { answers: body.answers });
      seen += 1;
      verdict(result);
    } catch (error) {
      show(`The server refused the answers: ${error.message}`, "wrong");
    }
  }

  if (verification) {
    show(verification === "verified"
      ? "Verified: your implementation passed a challenge."
      : "Completed: your course platform reported your passing tests.", "correct");
  }
  return el("div", { class: "challenge-panel" },
    el("h3", { text: "Prove it on fresh cases" }),
    el("p", { text: "The checkpoint completes when the server has checked your code's numbers on random cases it picks: " +
      "your code runs on your machine, only its numbers are sent." }),
    el("p", {}, button), details, status);
}

async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    const range = document.createRange();
    range.selectNodeContents(document.getElementById("challenge-command"));
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
}
