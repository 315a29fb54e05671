// Every agent at a glance, live from GET /api/events (event "agents": the objects of
// `agenthost list --json` with "key" and "machine"). One list for the whole page: the
// overview shows it, the top bar counts who needs the user, whatever view is open.

import { api, Stream } from "./api.js";
import { showAutomation } from "./automation.js";
import { stateClass } from "./conversation.js";
import { ago, dollars, h, replace, when } from "./dom.js";
import { hooksSection } from "./hooks.js";

/** States under which no host runs the agent now (the daemon's statuses). */
const NO_HOST = new Set(["lost", "unreachable", "restarting", "spawning", "failed", "stopped"]);

function isObject(value) {
  return Boolean(value) && typeof value === "object" && !Array.isArray(value);
}

/** The latest of RFC 3339 times (milliseconds); NaN when none is one. */
function newest(...times) {
  const found = times.map(when).filter(Number.isFinite);
  return found.length ? Math.max(...found) : NaN;
}

/**
 * Where an agent was forked from (`agenthost fork`), as its host or the daemon says
 * it: `forked_from` is the parent's id, or an object with `from_agent` and
 * `from_offset`. {id, offset}; id "" when it was not forked.
 */
function forkOf(...sources) {
  for (const source of sources) {
    const value = source ? source.forked_from : undefined;
    if (typeof value === "string" && value) return { id: value, offset: null };
    if (isObject(value) && typeof value.from_agent === "string" && value.from_agent) {
      const offset = Number.isInteger(value.from_offset) ? value.from_offset : null;
      return { id: value.from_agent, offset };
    }
  }
  return { id: "", offset: null };
}

/** What one list item says, in the page's terms. */
export function describe(item) {
  const agent = isObject(item.agent) ? item.agent : null;
  const daemon = isObject(item.daemon) ? item.daemon : null;
  const key = typeof item.key === "string" ? item.key : String(item.agent_id);
  let state;
  if (agent && typeof agent.state === "string") state = agent.state;
  else if (item.reachable === false && item.socket_path) {
    state = item.alive ? "unreachable" : "stale"; // a host on disk that does not answer
  }
  else if (daemon && typeof daemon.status === "string") state = daemon.status;
  else state = "unknown";
  const pending = agent && Number.isInteger(agent.pending_requests) ? agent.pending_requests : 0;
  // The newest moment known of the agent, and what happened then: the host's time of
  // its newest event (the daemon's own times say when the daemon looked, not when
  // the agent did something), else when it started; an agent that ended since says so.
  const started = newest(agent?.started_at, isObject(item.host) ? item.host.started_at : null);
  const active = when(agent?.last_event_at);
  const ended = newest(agent?.ended_at, daemon?.ended_at);
  let last = Number.isFinite(started) ? { at: started, what: "started" } : { at: NaN, what: "" };
  if (Number.isFinite(active) && !(active <= started)) last = { at: active, what: "active" };
  if (Number.isFinite(ended) && !(ended < started)) {
    last = { at: Number.isFinite(last.at) ? Math.max(ended, last.at) : ended, what: "ended" };
  }
  const spec = daemon && isObject(daemon.spec) ? daemon.spec : {};
  const text = (...values) => values.find((v) => typeof v === "string" && v) || "";
  return {
    key,
    id: String(item.agent_id ?? key),
    machine: typeof item.machine === "string" ? item.machine : null,
    state,
    gone: !agent || (daemon !== null && NO_HOST.has(daemon.status)),
    needsYou: state === "waiting" || pending > 0,
    pending,
    cost: agent ? agent.cost_usd : undefined,
    last,
    /** Whether the agent's host reports its last activity (older hosts do not). */
    reportsActivity: Number.isFinite(active),
    task: text(agent?.task, agent?.description, spec.task),
    backend: text(agent?.backend, spec.agent),
    project: text(agent?.project, spec.project),
    sandbox: text(agent?.sandbox, spec.sandbox),
    error: text(item.error, agent?.last_error),
    forkedFrom: forkOf(agent, daemon),
  };
}

/** How often the list is asked for while the overview is not on screen (ms). */
const POLL_MS = 5000;

/**
 * The agents as the gateway lists them, kept up to date while the user is logged in:
 * live from the /api/events stream while the overview is on screen, else asked for
 * every few seconds (GET /api/agents). A browser opens few connections to one server
 * (six over HTTP/1.1, for all its tabs together) and each open stream holds one: the
 * page holds one stream at a time. `subscribe(fn)` calls fn(rows) with each new list
 * (rows: describe()d, those who need the user first) and returns the way to
 * unsubscribe.
 */
export class AgentList {
  constructor(page) {
    this.page = page;
    this.rows = null; // nothing received yet
    this.listeners = new Set();
    // When the page saw each agent change (state, pending requests, cost): its last
    // activity as far as the page knows, for hosts that do not report their own.
    this.seen = new Map();
    this.stream = null;
    this.timer = null;
  }

  /** Live (a stream) or polled (`live` false). */
  watch(live) {
    if (live) {
      if (this.timer !== null) clearInterval(this.timer);
      this.timer = null;
      if (this.stream) return;
      this.stream = new Stream({
        url: () => "/api/events",
        handlers: { agents: (event) => this.update(event) },
        status: (up) => this.page.connection("agents", up),
        check: async () => {
          await api("GET", "/api/me");
          return true;
        },
      });
    } else {
      if (this.stream) this.stream.close();
      this.stream = null;
      this.page.connection("agents", true);
      if (this.timer !== null) return;
      this.poll();
      this.timer = setInterval(() => this.poll(), POLL_MS);
    }
  }

  async poll() {
    try {
      this.apply(await api("GET", "/api/agents"));
    } catch (err) {
      // the next poll tries again; a 401 has sent the page to the login already
    }
  }

  subscribe(fn) {
    this.listeners.add(fn);
    if (this.rows !== null) fn(this.rows);
    return () => this.listeners.delete(fn);
  }

  close() {
    if (this.stream) this.stream.close();
    if (this.timer !== null) clearInterval(this.timer);
    this.stream = null;
    this.timer = null;
    this.listeners.clear();
  }

  update(event) {
    let data;
    try {
      data = JSON.parse(event.data);
    } catch (err) {
      return;
    }
    this.apply(data);
  }

  apply(data) {
    if (!Array.isArray(data)) return;
    // An agent is an object with a key (or at least an id) to open it by.
    const items = data.filter(
      (item) =>
        isObject(item) && (typeof item.key === "string" || typeof item.agent_id === "string")
    );
    const now = Date.now();
    const rows = items.map(describe);
    for (const row of rows) {
      const sig = `${row.state}|${row.pending}|${row.cost}`;
      const before = this.seen.get(row.key);
      if (!before) this.seen.set(row.key, { sig, at: 0 });
      else if (before.sig !== sig) this.seen.set(row.key, { sig, at: now });
      const changed = this.seen.get(row.key).at;
      if (changed && !row.reportsActivity && !(changed <= row.last.at)) {
        row.last = { at: changed, what: "active" };
      }
    }
    rows.sort((a, b) => Number(b.needsYou) - Number(a.needsYou) || a.key.localeCompare(b.key));
    this.rows = rows;
    for (const fn of this.listeners) fn(rows);
  }
}

/** The overview of `agents` (an AgentList); returns the view (close() leaves it). */
export function showOverview(page, agents) {
  const list = h("ul", { class: "agents", id: "agents" });
  const empty = h(
    "p",
    { class: "empty", id: "no-agents", hidden: true },
    "No agents yet. Start one with ",
    h("code", {}, "agenthost demo"),
    " or ",
    h("code", {}, "agenthost run"),
    "."
  );
  const loading = h("p", { class: "muted", id: "loading" }, "Loading…");
  const automation = showAutomation();
  replace(
    page.app,
    h("h1", { class: "title" }, "Agents"),
    loading,
    empty,
    list,
    automation.section
  );
  let rows = null;

  function render() {
    if (rows === null) return;
    const now = Date.now();
    loading.hidden = true;
    empty.hidden = rows.length > 0;
    replace(list, rows.map((row) => card(row, now)));
  }

  const unsubscribe = agents.subscribe((fresh) => {
    rows = fresh;
    render();
  });
  // "5 min ago" stays true without a new list.
  const ticker = setInterval(render, 30000);
  const hooks = hooksSection(page.app);
  return {
    close() {
      unsubscribe();
      clearInterval(ticker);
      automation.close();
      hooks.close();
    },
  };
}

/** A value of the card's second line with its name, as `agenthost list` heads it. */
function field(kind, name, value) {
  return h("span", { class: kind }, h("span", { class: "key" }, `${name} `), value);
}

function card(row, now) {
  const href = `#/agent/${encodeURIComponent(row.key)}`;
  return h(
    "li",
    {
      class: ["agent", stateClass(row.state), row.needsYou && "needs-you", row.gone && "gone"]
        .filter(Boolean)
        .join(" "),
      dataset: { key: row.key, state: row.state },
    },
    h(
      "a",
      { href, class: "agent-link" },
      h(
        "div",
        { class: "line1" },
        h("span", { class: "name" }, row.id),
        row.needsYou
          ? h(
              "span",
              { class: "needs", title: "waiting for you" },
              row.pending > 1 ? `needs you (${row.pending})` : "needs you"
            )
          : null,
        h("span", { class: `badge ${stateClass(row.state)}` }, row.state)
      ),
      h(
        "div",
        { class: "line2 muted" },
        row.machine ? h("span", { class: "machine" }, `@ ${row.machine}`) : null,
        row.forkedFrom.id
          ? h(
              "span",
              {
                class: "forked",
                title:
                  row.forkedFrom.offset === null ? null : `at offset ${row.forkedFrom.offset}`,
              },
              h("span", { class: "key" }, "forked from "),
              row.forkedFrom.id
            )
          : null,
        row.task ? field("task", "task", row.task) : null,
        row.backend ? field("backend", "backend", row.backend) : null,
        row.project ? field("project", "project", row.project) : null,
        row.sandbox ? field("sandbox", "sandbox", row.sandbox) : null,
        dollars(row.cost) ? h("span", { class: "cost" }, dollars(row.cost)) : null,
        Number.isFinite(row.last.at)
          ? h(
              "span",
              { class: "last", title: new Date(row.last.at).toISOString() },
              `${row.last.what} ${ago(row.last.at, now)}`
            )
          : null
      ),
      row.error && row.state !== "idle" ? h("div", { class: "line3 error" }, row.error) : null
    )
  );
}
