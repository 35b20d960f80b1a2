// The implement checkpoint, earned: the server issues random cases, the learner's own code answers
// them (the exercise's submit script with the challenge's link, or pasted JSON), the server checks
// them. An open challenge is kept on this device, so a reload comes back to it.

import { ApiError, getJSON, postJSON } from "../api.js";
import { command as commandLine } from "./command.js";
import { el } from "./dom.js";
import { fillNodes, locale, t } from "../i18n.js";

const POLL_MS = 2500;

// command(url): the exact submit command for the learner's language; exercise: whose cases.
export function challengePanel({ exercise, verification, onVerdict, command }) {
  const CHALLENGES = `/api/v1/exercises/${exercise}/challenges`;
  const KEPT = `exercise.open-challenge.${exercise}`;
  const status = el("p", { class: "verdict", role: "status", "aria-live": "polite" });
  const line = commandLine("challenge-command");
  const expires = el("span");
  const pasted = el("textarea", { id: "pasted-answers", spellcheck: "false" });
  const details = el(
    "div",
    { id: "challenge", hidden: true },
    el(
      "p",
      {},
      ...fillNodes(t("Run this in the unpacked folder, with your file in place of the starter (valid until {time}):"), {
        time: expires,
      }),
    ),
    line.node,
    el("p", {
      class: "hint",
      text: t(
        "From another language: GET that link (its cases), compute each case, and POST {body} to its answers_url; the exercise's README shows the request.",
        { body: '{"answers": [...]}' },
      ),
    }),
    el(
      "details",
      {},
      el("summary", { text: t("No terminal connection to this server? Paste the answers instead") }),
      el("p", { text: t("Add {flag} to the command above and paste the JSON it prints here.", { flag: "--print" }) }),
      el(
        "form",
        {
          onsubmit: (e) => {
            e.preventDefault();
            submitPasted();
          },
        },
        el("label", {
          for: "pasted-answers",
          text: t("Answers printed by the submit script with {flag}", { flag: "--print" }),
        }),
        pasted,
        el("p", {}, el("button", { type: "submit", text: t("Check pasted answers") })),
      ),
    ),
  );
  const button = el("button", {
    type: "button",
    id: "new-challenge",
    text: t("Get a challenge"),
    onclick: () => start(),
  });
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
      show(t("Verified: {message}", { message: result.message }), "correct");
      stop();
      forget();
    } else {
      show(
        result.mistakes.length
          ? t("Not yet ({mistakes}): {message} Fix it and run the command again.", {
              mistakes: result.mistakes.join(", "),
              message: result.message,
            })
          : t("Not yet: {message} Fix it and run the command again.", { message: result.message }),
        "wrong",
      );
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
    expires.textContent = new Date(body.expires_at).toLocaleTimeString(locale, { hour: "2-digit", minute: "2-digit" });
    details.hidden = false;
    button.textContent = t("Get new cases");
    timer = setInterval(poll, POLL_MS);
  }

  function redraw() {
    if (challenge) line.set(command(`${location.origin}${CHALLENGES}/${challenge.id}`));
  }

  async function start() {
    stop();
    show(t("Asking the server for fresh cases…"));
    try {
      open(await postJSON(CHALLENGES, {}));
    } catch (error) {
      show(
        error instanceof ApiError && error.status === 0
          ? t("The server is not reachable; a challenge needs it. Try again when it answers.")
          : t("Could not get a challenge: {reason}", { reason: error.message }),
        "wrong",
      );
      return;
    }
    show(t("Waiting for your answers…"));
  }

  // The challenge this device had open before a reload, if it can still be answered.
  async function resume() {
    let kept = null;
    try {
      kept = JSON.parse(localStorage.getItem(KEPT));
    } catch {
      return;
    }
    if (!kept?.id || new Date(kept.expires_at) <= new Date()) return forget();
    try {
      const body = await getJSON(`${CHALLENGES}/${kept.id}`);
      if (body.status !== "open") return forget();
      open(body);
      if (body.result) verdict({ ...body.result, completed: false });
      else show(t("Waiting for your answers…"));
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
        show(t("This challenge has expired; get a new one."), "wrong");
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
      show(
        t("That is not the JSON the command prints: copy all of it, from {open} to {close}.", {
          open: "{",
          close: "}",
        }),
        "wrong",
      );
      return;
    }
    if (body?.challenge && body.challenge !== challenge.id) {
      show(t("Those answers are for another challenge: run the command shown above."), "wrong");
      return;
    }
    try {
      const result = await postJSON(challenge.answers_url.replace(/^https?:\/\/[^/]+/, ""), { answers: body.answers });
      seen += 1;
      verdict(result);
    } catch (error) {
      show(t("The server refused the answers: {reason}", { reason: error.message }), "wrong");
    }
  }

  if (verification) {
    show(
      verification === "verified"
        ? t("Verified: your implementation passed a challenge.")
        : t("Completed: your course platform reported your passing tests."),
      "correct",
    );
  } else {
    resume();
  }
  const node = el(
    "div",
    { class: "challenge-panel" },
    el("p", {
      text: t(
        "The checkpoint completes when the numbers you send for random cases the server picks match its engine's: your code runs on your machine, only its numbers are sent. The server checks the numbers, not whose code made them; cases also sent to the API's own attention endpoint are recorded as such.",
      ),
    }),
    el("p", {}, button),
    details,
    status,
  );
  return { node, redraw };
}
