// @ts-check
// The implement checkpoint, earned: the server issues random cases, the learner's own code answers
// them (the exercise's submit script with the challenge's link, or pasted JSON), the server checks
// them. An open challenge is kept on this device, so a reload comes back to it.

import { ApiError, getJSON, postJSON } from "../api.js";
import { fillNodes, listed, locale, t } from "../i18n.js";
import { command as commandLine } from "./command.js";
import { el } from "./dom.js";

const POLL_MS = 2500;

/**
 * The panel: `command(url)` the exact submit command for the learner's language; `exercise` whose cases.
 * @param {{ exercise: string, verification: string | null, onVerdict: (result: any) => void, command: (url: string) => string }} options
 */
export function challengePanel(options) {
  const panel = new ChallengePanel(options);
  return { node: panel.node, redraw: () => panel.redraw() };
}

class ChallengePanel {
  constructor({ exercise, verification, onVerdict, command }) {
    this.challenges = `/api/v1/exercises/${exercise}/challenges`;
    this.kept = `exercise.open-challenge.${exercise}`;
    this.onVerdict = onVerdict;
    this.command = command;
    this.status = el("p", { class: "verdict", role: "status", "aria-live": "polite" });
    this.line = commandLine("challenge-command");
    this.expires = el("span");
    this.pasted = el("textarea", { id: "pasted-answers", spellcheck: "false" });
    this.details = this.detailsNode();
    this.button = el("button", {
      type: "button",
      id: "new-challenge",
      text: t("Get a challenge"),
      onclick: () => this.start(),
    });
    /** @type {any} the open challenge */
    this.challenge = null;
    this.timer = null;
    this.seen = 0; // the attempts already shown
    if (verification) {
      const said =
        verification === "verified"
          ? t("Verified: your implementation passed a challenge.")
          : t("Completed: your course platform reported your passing tests.");
      this.show(said, "correct");
    } else {
      this.resume();
    }
    const promise = t(
      "The checkpoint completes when the numbers you send for random cases the server picks match its engine's: your code runs on your machine, only its numbers are sent. The server checks the numbers, not whose code made them; cases also sent to the API's own attention endpoint are recorded as such.",
    );
    this.node = el(
      "div",
      { class: "challenge-panel" },
      el("p", { text: promise }),
      el("p", {}, this.button),
      this.details,
      this.status,
    );
  }

  // How to answer an open challenge: the command, another language's way, or pasted answers.
  detailsNode() {
    const run = t("Run this in the unpacked folder, with your file in place of the starter (valid until {time}):");
    const other = t(
      "From another language: GET that link (its cases), compute each case, and POST {body} to its answers_url; the exercise's README shows the request.",
      { body: '{"answers": [...]}' },
    );
    const submit = (e) => {
      e.preventDefault();
      this.submitPasted();
    };
    const label = t("Answers printed by the submit script with {flag}", { flag: "--print" });
    return el(
      "div",
      { id: "challenge", hidden: true },
      el("p", {}, ...fillNodes(run, { time: this.expires })),
      this.line.node,
      el("p", { class: "hint", text: other }),
      el(
        "details",
        {},
        el("summary", { text: t("No terminal connection to this server? Paste the answers instead") }),
        el("p", { text: t("Add {flag} to the command above and paste the JSON it prints here.", { flag: "--print" }) }),
        el(
          "form",
          { onsubmit: submit },
          el("label", { for: "pasted-answers", text: label }),
          this.pasted,
          el("p", {}, el("button", { type: "submit", text: t("Check pasted answers") })),
        ),
      ),
    );
  }

  show(text, kind = "") {
    this.status.className = `verdict ${kind}`.trim();
    this.status.textContent = text;
  }

  verdict(result) {
    this.onVerdict(result);
    if (result.correct) {
      this.show(t("Verified: {message}", { message: result.message }), "correct");
      this.stop();
      this.forget();
      return;
    }
    const said = result.mistakes.length
      ? t("Not yet ({mistakes}): {message} Fix it and run the command again.", {
          mistakes: listed(result.mistakes),
          message: result.message,
        })
      : t("Not yet: {message} Fix it and run the command again.", { message: result.message });
    this.show(said, "wrong");
  }

  open(body) {
    this.challenge = body;
    this.seen = body.attempts;
    try {
      localStorage.setItem(this.kept, JSON.stringify({ id: body.id, expires_at: body.expires_at }));
    } catch {
      // private mode: the challenge lasts for this page
    }
    this.redraw();
    const time = new Date(body.expires_at).toLocaleTimeString(locale, { hour: "2-digit", minute: "2-digit" });
    this.expires.textContent = time;
    this.details.hidden = false;
    this.button.textContent = t("Get new cases");
    this.timer = setInterval(() => this.poll(), POLL_MS);
  }

  redraw() {
    if (this.challenge) this.line.set(this.command(`${location.origin}${this.challenges}/${this.challenge.id}`));
  }

  async start() {
    this.stop();
    this.show(t("Asking the server for fresh cases…"));
    try {
      this.open(await postJSON(this.challenges, {}));
    } catch (error) {
      const said =
        error instanceof ApiError && error.status === 0
          ? t("The server is not reachable; a challenge needs it. Try again when it answers.")
          : t("Could not get a challenge: {reason}", { reason: error.message });
      this.show(said, "wrong");
      return;
    }
    this.show(t("Waiting for your answers…"));
  }

  // The challenge this device had open before a reload, if it can still be answered.
  async resume() {
    let kept = null;
    try {
      kept = JSON.parse(localStorage.getItem(this.kept));
    } catch {
      return;
    }
    if (!kept?.id || new Date(kept.expires_at) <= new Date()) return this.forget();
    try {
      const body = await getJSON(`${this.challenges}/${kept.id}`);
      if (body.status !== "open") return this.forget();
      this.open(body);
      if (body.result) this.verdict({ ...body.result, completed: false });
      else this.show(t("Waiting for your answers…"));
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) this.forget();
    }
  }

  forget() {
    try {
      localStorage.removeItem(this.kept);
    } catch {
      // nothing kept
    }
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
  }

  async poll() {
    if (!this.challenge) return;
    try {
      const now = await getJSON(`${this.challenges}/${this.challenge.id}`);
      if (now.attempts > this.seen && now.result) {
        this.seen = now.attempts;
        this.verdict({ ...now.result, completed: now.status === "solved" });
      }
      if (now.status === "expired") {
        this.show(t("This challenge has expired; get a new one."), "wrong");
        this.stop();
        this.forget();
      }
    } catch {
      // offline for a moment: keep polling
    }
  }

  async submitPasted() {
    if (!this.challenge) return;
    let body;
    try {
      body = JSON.parse(this.pasted.value);
    } catch {
      const said = t("That is not the JSON the command prints: copy all of it, from {open} to {close}.", {
        open: "{",
        close: "}",
      });
      this.show(said, "wrong");
      return;
    }
    if (body?.challenge && body.challenge !== this.challenge.id) {
      this.show(t("Those answers are for another challenge: run the command shown above."), "wrong");
      return;
    }
    try {
      const path = this.challenge.answers_url.replace(/^https?:\/\/[^/]+/, "");
      const result = await postJSON(path, { answers: body.answers });
      this.seen += 1;
      this.verdict(result);
    } catch (error) {
      this.show(t("The server refused the answers: {reason}", { reason: error.message }), "wrong");
    }
  }
}
