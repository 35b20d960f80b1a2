// The implement checkpoint, earned: the server issues random cases, the learner's own code answers
// them (the exercise's submit script with the challenge's link, or pasted JSON), the server checks
// them. An open challenge is kept on this device, so a reload comes back to it.

import { ApiError, getJSON, postJSON } from "../api.js";
import { command as commandLine } from "./command.js";
import { el } from "./dom.js";

const CHALLENGES = "/api/v1/exercises/multi-head-attention/challenges";
const KEPT = "exercise.open-challenge";
const POLL_MS = 2500;

// command(url): the exact submit command for the learner's language.
export function challengePanel({ verification, onVerdict, command }) {
  const status = el("p", { class: "verdict", role: "status", "aria-live": "polite" });
  const line = commandLine("challenge-command");
  const expires = el("span");
  const pasted = el("textarea", { id: "pasted-answers", spellcheck: "false" });
  const details = el("div", { id: "challenge", hidden: true },
    el("p", {}, "Run this in the unpacked folder, with your file in place of the starter (valid until ", expires, "):"),
    line.node,
    el("p", { class: "hint", text: "From another language: GET that link (its cases), compute each case, and POST " +
      "{\"answers\": [...]} to its answers_url; the exercise's README shows the request." }),
    el("details", {}, el("summary", { text: "No terminal connection to this server? Paste the answers instead" }),
      el("p", { text: "Add --print to the command above and paste the JSON it prints here." }),
      el("form", { onsubmit: (e) => { e.preventDefault(); submitPasted(); } },
        el("label", { for: "pasted-answers", text: "Answers printed by the submit script with --print" }), pasted,
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
      forget();
    } else {
      const named = result.mistakes.length ? ` (${result.mistakes.join(", ")})` : "";
      show(`Not yet${named}: ${result.message} Fix it and run the command again.`, "wrong");
    }
  }

  function open(body) {
    challenge = body;
    seen = body.attempts;
    try {
      localStorage.setItem(KEPT, JSON.stringify({ id: body.id, expires_at: body.expires_at }));
    } catch {
      // private mode: the challenge lasts for this page
    }
    redraw();
    expires.textContent = new Date(body.expires_at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    details.hidden = false;
    button.textContent = "Get new cases";
    timer = setInterval(poll, POLL_MS);
  }

  function redraw() {
    if (challenge) line.set(command(`${location.origin}${CHALLENGES}/${challenge.id}`));
  }

  async function start() {
    stop();
    show("Asking the server for fresh cases…");
    try {
      open(await postJSON(CHALLENGES, {}));
    } catch (error) {
      show(error instanceof ApiError && error.status === 0
        ? "The server is not reachable; a challenge needs it. Try again when it answers."
        : `Could not get a challenge: ${error.message}`, "wrong");
      return;
    }
    show("Waiting for your answers…");
  }

  // The challenge this device had open before a reload, if it can still be answered.
  async function resume() {
    let kept = null;
    try {
      kept = JSON.parse(localStorage.getItem(KEPT));
    } catch {
      return;
    }
    if (!kept || !kept.id || new Date(kept.expires_at) <= new Date()) return forget();
    try {
      const body = await getJSON(`${CHALLENGES}/${kept.id}`);
      if (body.status !== "open") return forget();
      open(body);
      if (body.result) verdict({ ...body.result, completed: false });
      else show("Waiting for your answers…");
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) forget();
    }
  }

  function forget() {
    try {
      localStorage.removeItem(KEPT);
    } catch {
      // nothing kept
    }
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
        forget();
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
  } else {
    resume();
  }
  const node = el("div", { class: "challenge-panel" },
    el("p", { text: "The checkpoint completes when the numbers you send for random cases the server picks match its " +
      "engine's: your code runs on your machine, only its numbers are sent. The server checks the numbers, not whose code " +
      "made them; cases also sent to the API's own attention endpoint are recorded as such." }),
    el("p", {}, button), details, status);
  return { node, redraw };
}
