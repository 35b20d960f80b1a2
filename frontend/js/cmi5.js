// @ts-check
// A lesson launched by an LMS as a cmi5 assignable unit (docs/cmi5.md). The LMS opens the page with
// five parameters; the unit fetches its token once (kept in this module's memory only), reads the
// launch data and the learner's preferences, then sends the statements the service builds from the
// learner's record (POST /api/v1/cmi5/statements) to the LMS's store, one at a time and in order,
// again after a refusal until the store takes each (a statement's id is fixed: sent twice, it is one).

import { ApiError, postJSON, request } from "./api.js";
import { t, tn } from "./i18n.js";

const SESSION_ID = "https://w3id.org/xapi/cmi5/context/extensions/sessionid";
const XAPI = { "X-Experience-API-Version": "1.0.3" };
const LAUNCH_MODES = ["Normal", "Browse", "Review"];
const LONGEST_WAIT = 30_000; // between tries, once the store has refused a few times

/** A refusal the learner is told about (`told`), with what to do. */
class UnitError extends Error {
  told = true;
}

// The learner's languages, best first, as the locales the lessons are written in.
export function preferredLocale(preferences, offered) {
  for (const tag of String(preferences?.languagePreference || "").split(",")) {
    const [language, region] = tag.trim().split("-");
    const found =
      offered.find((o) => o === `${language}-${region}`) || offered.find((o) => o.split("-")[0] === language);
    if (found) return found;
  }
  return null;
}

// ISO 8601, in seconds to the hundredth (cmi5's durations).
const duration = (ms) => `PT${(Math.max(0, Math.round(ms / 10)) / 100).toFixed(2)}S`;

export class Unit {
  /** @param {Record<string, string>} launch the five parameters, checked by the server @param {string} lesson @param {(text: string) => void} say */
  constructor(launch, lesson, say) {
    this.launch = launch;
    this.lesson = lesson;
    this.say = say;
    this.endpoint = launch.endpoint.endsWith("/") ? launch.endpoint : `${launch.endpoint}/`;
    this.headers = {}; // the token, once fetched: in memory only
    this.data = null; // LMS.LaunchData
    this.preferences = null; // cmi5LearnerPreferences
    this.initialized = null; // the session's start, as the service first answered it
    this.terminatedDraft = null; // the last statement, stamped when the learner leaves
    this.queue = []; // statements waiting for the store, in order
    this.known = new Set(); // ids queued once in this session
    this.sent = 0;
    this.wait = 1000;
    this.draining = null;
    this.asked = Promise.resolve();
    this.ended = false;
  }

  /** The token (one POST, never two), then the launch data and the preferences: before any statement. */
  async start() {
    let answer;
    try {
      answer = await request("POST", this.launch.fetch);
    } catch (error) {
      answer = error instanceof ApiError ? error.problem : null;
      if (!answer?.["error-code"]) throw new UnitError(t("Your course system did not give this lesson its key."));
    }
    if (answer?.["error-code"] || !answer?.["auth-token"]) {
      const code = answer?.["error-code"] ?? "?";
      throw new UnitError(t("Your course system refused this launch (error {code}).", { code }));
    }
    this.headers = { ...XAPI, Authorization: `Basic ${answer["auth-token"]}` };
    const agent = encodeURIComponent(this.launch.actor);
    const about = `activityId=${encodeURIComponent(this.launch.activityId)}&agent=${agent}`;
    const registration = `registration=${encodeURIComponent(this.launch.registration)}`;
    [this.data, this.preferences] = await Promise.all([
      this.#read(`activities/state?${about}&${registration}&stateId=LMS.LaunchData`, true),
      this.#read(`agents/profile?agent=${agent}&profileId=cmi5LearnerPreferences`, false),
    ]);
    const template = this.data?.contextTemplate;
    if (!template || typeof template !== "object" || !LAUNCH_MODES.includes(this.data.launchMode))
      throw new UnitError(t("Your course system's launch data is incomplete."));
  }

  async #read(path, needed) {
    try {
      return await request("GET", this.endpoint + path, undefined, this.headers);
    } catch (error) {
      if (!needed && error instanceof ApiError && error.status === 404) return null;
      throw new UnitError(t("Your course system's record store did not answer."));
    }
  }

  get mode() {
    return this.data.launchMode;
  }

  /** Asks the service what is due now and queues what is new; `initialized` the first time. One ask at a
   * time: the first answer fixes the session's start, which every later ask sends back. */
  sync() {
    const next = this.asked.then(() => this.#ask());
    this.asked = next.catch(() => {});
    return next;
  }

  async #ask() {
    if (this.ended) return;
    const answer = await postJSON("/api/v1/cmi5/statements", {
      lesson: this.lesson,
      actor: JSON.parse(this.launch.actor),
      registration: this.launch.registration,
      activityId: this.launch.activityId,
      session: this.data.contextTemplate.extensions?.[SESSION_ID] || this.launch.registration,
      contextTemplate: this.data.contextTemplate,
      launchMode: this.data.launchMode,
      masteryScore: typeof this.data.masteryScore === "number" ? this.data.masteryScore : null,
      moveOn: this.data.moveOn || "NotApplicable",
      initialized: this.initialized,
    });
    if (this.ended) return;
    this.initialized = answer.initialized;
    this.terminatedDraft = answer.terminated;
    this.#queue(answer.statements);
  }

  #queue(statements) {
    for (const statement of statements)
      if (!this.known.has(statement.id)) {
        this.known.add(statement.id);
        this.queue.push(statement);
      }
    this.draining ??= this.#drain().finally(() => {
      this.draining = null;
    });
  }

  async #drain() {
    while (this.queue.length) {
      const statement = this.queue[0];
      const url = `${this.endpoint}statements?statementId=${encodeURIComponent(statement.id)}`;
      try {
        await request("PUT", url, statement, this.headers);
      } catch (error) {
        const status = error instanceof ApiError ? error.status : 0;
        if (status === 401 || status === 403) {
          this.say(t("Your course system no longer accepts this lesson's records: close it and launch it again."));
          return;
        }
        if (status !== 409) {
          // 409: the store holds this id already (sent before): it is done
          const waiting = this.queue.length;
          this.say(
            tn(
              "Your course's record store did not answer: {count} record waits and is sent again.",
              "Your course's record store did not answer: {count} records wait and are sent again.",
              waiting,
            ),
          );
          await new Promise((resolve) => setTimeout(resolve, this.wait));
          this.wait = Math.min(this.wait * 2, LONGEST_WAIT);
          continue;
        }
      }
      this.queue.shift();
      this.sent += 1;
      this.wait = 1000;
      this.say(
        tn(
          "Connected to your course: {count} record sent.",
          "Connected to your course: {count} records sent.",
          this.sent,
        ),
      );
    }
  }

  #terminated() {
    this.ended = true;
    const now = new Date();
    const statement = structuredClone(this.terminatedDraft);
    statement.timestamp = now.toISOString();
    statement.result.duration = duration(now.getTime() - Date.parse(this.initialized));
    return statement;
  }

  /** `terminated` last, after everything queued; then back to the LMS (its returnURL) when it gave one. */
  async exit() {
    if (this.ended) return;
    await this.sync().catch(() => {}); // what the learner did last, if the service can say
    this.#queue([this.#terminated()]);
    await this.draining;
    if (this.queue.length) return;
    const back = URL.canParse(this.data.returnURL) && new URL(this.data.returnURL);
    if (back && ["http:", "https:"].includes(back.protocol)) location.assign(back);
    else this.say(t("Your course has this lesson's records: you may close this window."));
  }

  /** The tab is closing: `terminated`, if the browser lets the request outlive the page. */
  leaving() {
    if (this.ended || !this.terminatedDraft) return;
    const statement = this.#terminated();
    const url = `${this.endpoint}statements?statementId=${encodeURIComponent(statement.id)}`;
    const headers = { ...this.headers, "Content-Type": "application/json" };
    fetch(url, { method: "PUT", body: JSON.stringify(statement), headers, keepalive: true }).catch(() => {});
  }
}
