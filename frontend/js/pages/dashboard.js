// The instructor dashboard: funnel, events over time, parameters changed, mistakes.

import { getJSON } from "../api.js";
import { barChart } from "../views/bars.js";
import { el } from "../views/dom.js";

const KEY = "workbench.analyticsKey";
const LESSON = "multi-head-attention";
const $ = (id) => document.getElementById(id);
const pct = (x) => (x === null || x === undefined ? "" : `${Math.round(x * 100)}% of the previous step`);

async function show(key) {
  const headers = { Authorization: `Bearer ${key}` };
  const base = "/api/v1/analytics";
  $("status").textContent = "Loading…";
  const [funnel, series, parameters, mistakes, durations] = await Promise.all([
    getJSON(`${base}/lessons/${LESSON}/funnel`, headers),
    getJSON(`${base}/events/timeseries?bucket=day&group_by=event&lesson=${LESSON}`, headers),
    getJSON(`${base}/lessons/${LESSON}/parameters`, headers),
    getJSON(`${base}/lessons/${LESSON}/mistakes`, headers),
    getJSON(`${base}/lessons/${LESSON}/durations`, headers),
  ]);
  const perDay = new Map();
  for (const row of series.rows) {
    // A day with any hidden group is hidden: a sum of the visible part would pass for the whole.
    const day = row.bucket.slice(0, 10);
    const sofar = perDay.has(day) ? perDay.get(day) : 0;
    perDay.set(day, sofar === null || row.events === null ? null : sofar + row.events);
  }
  const minutes = (s) => (s === null ? null : Math.round(s / 6) / 10);
  const k = funnel.k;
  $("charts").replaceChildren(
    exportButtons(headers),
    barChart({ k, id: "funnel", title: "Learners per checkpoint", valueLabel: "learners",
      rows: [{ label: "started", value: funnel.started }, ...funnel.steps.map((s) => ({ label: s.title, value: s.learners, note: pct(s.share_of_previous) }))] }),
    barChart({ k, id: "implement", title: "How the implement checkpoint was completed", valueLabel: "learners",
      rows: funnel.steps.filter((s) => "verified" in s).flatMap((s) => [
        { label: "verified by the server (challenge)", value: s.verified, note: s.title },
        { label: "reported by the platform", value: s.reported, note: s.title },
      ]) }),
    barChart({ k, id: "durations", title: "Median minutes to complete (from first event)", valueLabel: "minutes",
      rows: durations.checkpoints.map((c) => ({ label: c.checkpoint, value: minutes(c.median_seconds), note: c.p90_seconds === null ? "" : `p90 ${minutes(c.p90_seconds)} min` })) }),
    barChart({ k, id: "timeseries", title: "Events per day", valueLabel: "events",
      rows: [...perDay.entries()].slice(-14).map(([day, n]) => ({ label: day, value: n })) }),
    barChart({ k, id: "parameters", title: "Workbench parameters changed", valueLabel: "changes",
      rows: parameters.parameters.map((p) => ({ label: p.description, value: p.times, note: p.learners === null ? "" : `${p.learners} learners` })) }),
    barChart({ k, id: "mistakes", title: "Mistakes found by the exercise checker", valueLabel: "checks",
      rows: mistakes.mistakes.map((m) => ({ label: m.name || m.id, value: m.times, note: m.learners === null ? "" : `${m.learners} learners` })) }),
    el("p", { class: "note", text: `Groups of fewer than ${k} learners are hidden, never drawn as a number.` }),
  );
  $("status").textContent = "";
}

// Every event the key's platform holds, as the export endpoint streams it (the key is sent as a
// header, so the download goes through fetch and a Blob rather than a plain link).
function exportButtons(headers) {
  const status = el("span", { role: "status" });
  const download = async (format) => {
    status.textContent = `Preparing the ${format.toUpperCase()} export…`;
    try {
      const response = await fetch(`/api/v1/analytics/events/export?format=${format}`, { headers });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const link = el("a", { href: URL.createObjectURL(await response.blob()), download: `events.${format}` });
      document.body.append(link);
      link.click();
      link.remove();
      status.textContent = `Exported events.${format}.`;
    } catch (error) {
      status.textContent = `Could not export: ${error.message}`;
    }
  };
  return el("p", { class: "exports" }, "Export every event: ",
    el("button", { type: "button", class: "secondary", id: "export-csv", text: "CSV", onclick: () => download("csv") }), " ",
    el("button", { type: "button", class: "secondary", id: "export-ndjson", text: "NDJSON", onclick: () => download("ndjson") }),
    " ", status);
}

function init() {
  const stored = sessionStorage.getItem(KEY);
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const key = $("api-key").value.trim();
    sessionStorage.setItem(KEY, key);
    show(key).catch((error) => { $("status").textContent = `Could not load analytics: ${error.message}`; });
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    $("api-key").value = "";
    $("charts").replaceChildren();
  });
  if (stored) {
    $("api-key").value = stored;
    show(stored).catch((error) => { $("status").textContent = `Could not load analytics: ${error.message}`; });
  }
  document.body.dataset.ready = "true";
}

init();
