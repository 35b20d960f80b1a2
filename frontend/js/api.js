// @ts-check
// Talking to the API: JSON fetch helpers, the browser session, and an offline event queue
// kept in localStorage that re-sends with the same event ids until the server acknowledges.
// The queue announces itself: "workbench:queue" (detail: {pending}) whenever it changes, here or
// in another page of this origin (the lesson and its embedded workbench share it), and
// "workbench:events-sent" (detail: {ids, status}) when the server has answered for a batch.

import { t } from "./i18n.js";

const QUEUE_KEY = "workbench.outbox";
const BATCH = 50;
let flushing = null;

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

export async function request(method, url, body, headers = {}) {
  /** @type {RequestInit & { headers: Record<string, string> }} */
  const options = { method, headers: { Accept: "application/json", ...headers }, credentials: "same-origin" };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, options);
  } catch {
    throw new ApiError(0, { detail: t("the server is not reachable") }); // fetch's own "Failed to fetch" says less
  }
  const type = response.headers.get("Content-Type") || "";
  const data = type.includes("json") ? await response.json().catch(() => null) : null;
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export const getJSON = (url, headers) => request("GET", url, undefined, headers);
export const postJSON = (url, body, headers) => request("POST", url, body, headers);

export async function ensureSession() {
  const session = await postJSON("/api/v1/session");
  return session.learner;
}

export function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 15) | 64;
  b[8] = (b[8] & 63) | 128;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// localStorage survives reloads and going offline; where a host page's context denies it
// (some third-party iframes) the queue lives in memory for the page's lifetime.
let memoryQueue = [];

function storage() {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
}

function readQueue() {
  const store = storage();
  if (!store) return memoryQueue;
  try {
    return JSON.parse(store.getItem(QUEUE_KEY) || "[]");
  } catch {
    return [];
  }
}

function writeQueue(queue) {
  const store = storage();
  if (store) store.setItem(QUEUE_KEY, JSON.stringify(queue));
  else memoryQueue = queue;
  announce();
}

function announce() {
  document.dispatchEvent(new CustomEvent("workbench:queue", { detail: { pending: readQueue().length } }));
}

export function pendingEvents() {
  return readQueue().length;
}

// The queued events (oldest first): what this device holds that the server has not acknowledged.
export function queued() {
  return readQueue();
}

export function isPending(id) {
  return readQueue().some((e) => e.id === id);
}

// Queue one event (id and time fixed now, so a re-send is an identical replay) and try to send.
export function queueEvent(fields) {
  const event = { id: uuid(), occurred_at: new Date().toISOString(), data: {}, ...fields };
  writeQueue([...readQueue(), event]);
  flush();
  return event;
}

// Send queued events in batches; keep them on network errors, 429 and 5xx; drop the ones the
// server will never accept (422) or already holds differently (409).
export function flush() {
  if (!flushing)
    flushing = sendQueued().finally(() => {
      flushing = null;
    });
  return flushing;
}

async function sendQueued() {
  for (;;) {
    const batch = readQueue().slice(0, BATCH);
    if (!batch.length) return true;
    let status;
    try {
      const response = await fetch("/api/v1/events", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ events: batch }),
      });
      status = response.status;
    } catch {
      return false; // offline: keep everything, try again later
    }
    if (status === 401) {
      await ensureSession().catch(() => null);
      return false;
    }
    if (status === 429 || status >= 500) return false;
    const sent = new Set(batch.map((e) => e.id));
    writeQueue(readQueue().filter((e) => !sent.has(e.id)));
    document.dispatchEvent(new CustomEvent("workbench:events-sent", { detail: { status, ids: [...sent] } }));
  }
}

let started = false;

// Keep trying while anything is queued: every few seconds, when the browser is back online, and
// when another page of this origin changes the queue. Pages that record events call this once.
export function startOutbox(intervalMs = 3000) {
  if (started) return;
  started = true;
  window.addEventListener("online", () => flush());
  window.addEventListener("storage", (e) => {
    if (e.key === QUEUE_KEY) announce();
  });
  setInterval(() => {
    if (pendingEvents()) flush();
  }, intervalMs);
  if (pendingEvents()) flush();
}
