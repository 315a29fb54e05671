// The overview's "Automation" section: the daemon's schedules and its newest runs (of
// schedules and webhooks), from GET /api/automation, asked for every few seconds while
// the overview is on screen. Whatever the daemon says is text, and may be anything:
// a field missing or of another type shows nothing rather than breaking the page.

import { api } from "./api.js";
import { ago, h, replace, visible, when } from "./dom.js";

/** How often the section is asked for while the overview is on screen (ms). */
const POLL_MS = 5000;
/** Characters of a schedule's message shown (the rest is in `schedule list`). */
const MESSAGE_CHARS = 200;

function isObject(value) {
  return Boolean(value) && typeof value === "object" && !Array.isArray(value);
}

function text(value) {
  return typeof value === "string" ? value : "";
}

/** A number of milliseconds, or null (not NaN: the section's rows compare as JSON). */
function finite(ms) {
  return Number.isFinite(ms) ? ms : null;
}

function list(value) {
  return Array.isArray(value) ? value.filter(isObject) : [];
}

/** A run as the section shows it (every field a string; "" when unknown). */
export function describeRun(run) {
  const source = text(run.source);
  const name = text(run.name);
  return {
    label: source && name ? `${source}:${name}` : source || name,
    agent: text(run.agent_id),
    result: text(run.result),
    at: finite(when(run.ended_at)) ?? finite(when(run.started_at)),
    reason: text(run.reason),
  };
}

/** A schedule as the section shows it. */
export function describeSchedule(info) {
  const spec = isObject(info.spec) ? info.spec : {};
  const target = isObject(spec.target) ? spec.target : {};
  const fresh = isObject(target.new) ? target.new : null;
  let goesTo = text(target.agent_id);
  if (!goesTo && fresh) {
    const kind = text(fresh.agent);
    goesTo = `new ${kind ? `${kind} ` : ""}agent`;
    if (text(fresh.agent_id)) goesTo += ` (${text(fresh.agent_id)}-…)`;
  }
  const last = isObject(info.last) ? describeRun(info.last) : null;
  return {
    name: text(spec.name),
    cron: text(spec.cron),
    tz: text(spec.tz),
    target: goesTo,
    agent: text(target.agent_id),
    message: text(spec.message),
    running: info.running === true,
    last,
    next: finite(when(info.next_at)),
  };
}

/** The answer of GET /api/automation as the section shows it; null for garbage. */
export function describeAutomation(data) {
  if (!isObject(data)) return null;
  return {
    daemon: data.daemon !== false,
    schedules: list(data.schedules).map(describeSchedule),
    runs: list(data.runs).map(describeRun),
  };
}

/** The link to an agent's view (its key is its id: the daemon is this home's). */
function agentLink(id) {
  return h("a", { href: `#/agent/${encodeURIComponent(id)}`, class: "run-agent" }, id);
}

function moment(ms, now) {
  return h("span", { class: "when", title: new Date(ms).toISOString() }, ago(ms, now));
}

function result(value) {
  return value ? h("span", { class: `badge result-${value.replace(/\W/g, "")}` }, value) : null;
}

function scheduleRow(s, now) {
  const cron = s.tz ? `${s.cron} (${s.tz})` : s.cron;
  const message =
    s.message.length > MESSAGE_CHARS ? `${s.message.slice(0, MESSAGE_CHARS)}…` : s.message;
  return h(
    "li",
    { class: "schedule", dataset: { name: s.name } },
    h(
      "div",
      { class: "line1" },
      h("span", { class: "name" }, s.name),
      s.running ? result("running") : null,
      cron ? h("code", { class: "cron" }, cron) : null
    ),
    h(
      "div",
      { class: "line2 muted" },
      s.target
        ? h(
            "span",
            { class: "target" },
            h("span", { class: "key" }, "to "),
            s.agent ? agentLink(s.agent) : s.target
          )
        : null,
      s.last
        ? h(
            "span",
            { class: "last" },
            h("span", { class: "key" }, "last "),
            result(s.last.result),
            Number.isFinite(s.last.at) ? [" ", moment(s.last.at, now)] : null
          )
        : null,
      Number.isFinite(s.next)
        ? h(
            "span",
            { class: "next", title: new Date(s.next).toISOString() },
            h("span", { class: "key" }, "next "),
            new Date(s.next).toLocaleString()
          )
        : null
    ),
    message ? h("div", { class: "line3 message" }, visible(message)) : null
  );
}

function runRow(r, now) {
  return h(
    "li",
    { class: "run", dataset: { result: r.result } },
    h(
      "div",
      { class: "line1" },
      h("span", { class: "name" }, r.label),
      r.agent ? agentLink(r.agent) : null,
      result(r.result),
      Number.isFinite(r.at) ? moment(r.at, now) : null
    ),
    r.reason ? h("div", { class: "line2 muted reason" }, visible(r.reason)) : null
  );
}

/**
 * The section (hidden while there is nothing to show) and its polling, until close().
 * A daemon that stopped keeps what it last said on screen, with a note saying so.
 */
export function showAutomation() {
  const note = h(
    "p",
    { class: "muted", id: "automation-down", hidden: true },
    "The daemon is not running: no schedule runs until it starts (",
    h("code", {}, "agenthost daemon"),
    ")."
  );
  const schedules = h("ul", { class: "schedules", id: "schedules" });
  const runs = h("ul", { class: "runs", id: "runs" });
  const schedulesHead = h("h3", {}, "Schedules");
  const runsHead = h("h3", {}, "Latest runs");
  const section = h(
    "section",
    { class: "automation", id: "automation", hidden: true },
    h("h2", {}, "Automation"),
    note,
    schedulesHead,
    schedules,
    runsHead,
    runs
  );
  let shown = { daemon: true, schedules: [], runs: [] };
  let timer = null;
  let closed = false;

  function render() {
    const now = Date.now();
    const { schedules: s, runs: r } = shown;
    section.hidden = s.length === 0 && r.length === 0;
    note.hidden = shown.daemon;
    schedulesHead.hidden = s.length === 0;
    runsHead.hidden = r.length === 0;
    replace(schedules, s.map((row) => scheduleRow(row, now)));
    replace(runs, r.map((row) => runRow(row, now)));
  }

  async function poll() {
    timer = null;
    let data = null;
    try {
      data = describeAutomation(await api("GET", "/api/automation"));
    } catch (err) {
      // the next poll tries again; a 401 has sent the page to the login already
    }
    if (closed) return;
    if (data) {
      shown = data.daemon ? data : { ...shown, daemon: false };
      render();
    }
    timer = setTimeout(poll, POLL_MS);
  }

  poll();
  return {
    section,
    close() {
      closed = true;
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
  };
}
