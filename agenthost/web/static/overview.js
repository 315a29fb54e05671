// Every agent at a glance, live from GET /api/events (event "agents": the objects of
// `agenthost list --json` with "key" and "machine").

import { api, Stream } from "./api.js";
import { stateClass } from "./conversation.js";
import { ago, dollars, h, replace, when } from "./dom.js";

/** States under which no host runs the agent now (the daemon's statuses). */
const NO_HOST = new Set(["lost", "unreachable", "restarting", "spawning", "failed", "stopped"]);

function isObject(value) {
  return Boolean(value) && typeof value === "object" && !Array.isArray(value);
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
  const times = [
    agent && agent.started_at,
    agent && agent.ended_at,
    item.host && item.host.started_at,
    daemon && daemon.updated_at,
    daemon && daemon.ended_at,
  ]
    .map(when)
    .filter(Number.isFinite);
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
    last: times.length ? Math.max(...times) : NaN,
    task: text(agent?.task, agent?.description, spec.task),
    backend: text(agent?.backend, spec.agent),
    project: text(agent?.project, spec.project),
    error: text(item.error, agent?.last_error),
  };
}

/** The overview; returns the view (close() stops its stream). */
export function showOverview(page) {
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
  replace(page.app, h("h1", { class: "title" }, "Agents"), loading, empty, list);

  // When the page saw each agent change: a later activity than the list's own times.
  const seen = new Map();
  let items = null;

  function render() {
    if (items === null) return; // nothing received yet
    const now = Date.now();
    const rows = items.map(describe);
    rows.sort((a, b) => Number(b.needsYou) - Number(a.needsYou) || a.key.localeCompare(b.key));
    const needing = rows.filter((r) => r.needsYou).length;
    document.title = needing ? `(${needing}) agenthost` : "agenthost";
    loading.hidden = true;
    empty.hidden = rows.length > 0;
    replace(list, rows.map((row) => card(row, now)));
  }

  function card(row, now) {
    const last = Math.max(row.last || 0, seen.get(row.key)?.at || 0) || NaN;
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
          row.task ? h("span", { class: "task" }, row.task) : null,
          row.backend ? h("span", {}, row.backend) : null,
          row.project ? h("span", {}, row.project) : null,
          dollars(row.cost) ? h("span", { class: "cost" }, dollars(row.cost)) : null,
          Number.isFinite(last) ? h("span", { class: "last" }, ago(last, now)) : null
        ),
        row.error && row.state !== "idle" ? h("div", { class: "line3 error" }, row.error) : null
      )
    );
  }

  function update(event) {
    let data;
    try {
      data = JSON.parse(event.data);
    } catch (err) {
      return;
    }
    if (!Array.isArray(data)) return;
    // An agent is an object with a key (or at least an id) to open it by.
    const fresh = data.filter(
      (item) =>
        item &&
        typeof item === "object" &&
        !Array.isArray(item) &&
        (typeof item.key === "string" || typeof item.agent_id === "string")
    );
    const now = Date.now();
    for (const item of fresh) {
      const row = describe(item);
      const sig = `${row.state}|${row.pending}|${row.cost}`;
      const before = seen.get(row.key);
      if (!before) seen.set(row.key, { sig, at: 0 });
      else if (before.sig !== sig) seen.set(row.key, { sig, at: now });
    }
    items = fresh;
    render();
  }

  const stream = new Stream({
    url: () => "/api/events",
    handlers: { agents: update },
    status: (live) => page.connection(live),
    check: async () => {
      await api("GET", "/api/me");
      return true;
    },
  });
  // "5 min ago" stays true without a new list.
  const ticker = setInterval(render, 30000);
  return {
    close() {
      stream.close();
      clearInterval(ticker);
      document.title = "agenthost";
    },
  };
}
