// One agent: its conversation live from GET /api/agents/KEY/events (SSE, the `id:` of
// each event is its stream offset), permission requests to answer, an input box,
// Interrupt and Stop.

import { agentPath, api, ApiError, Stream } from "./api.js";
import { Conversation, stateClass } from "./conversation.js";
import { dollars, h, replace } from "./dom.js";
import { showTerminal } from "./terminal.js";

/** Events the page asks for when it opens an agent (older ones stay in history). */
const TAIL = 500;
/** Chat entries one tap on "Earlier messages" adds at most. */
const EARLIER = 200;

/** The view of agent `key`; returns the view (close() stops its stream). */
export function showAgent(page, key) {
  let backend = "";
  let closed = false;
  let stream = null;
  /** The terminal's view, for a terminal agent (its status has `terminal`). */
  let terminal = null;
  let isTerminal = false;

  const name = h("span", { class: "name" }, key);
  const badge = h("span", { class: "badge", id: "agent-state" }, "…");
  const cost = h("span", { class: "cost muted", id: "agent-cost" });
  const machine = h("span", { class: "machine" });
  const task = h("div", { class: "agent-task", id: "agent-task" });
  const notice = h("p", { class: "error", id: "agent-error", role: "alert" });
  const input = h("textarea", {
    id: "input",
    rows: 1,
    placeholder: "Message the agent",
    title: "Enter sends, Shift+Enter starts a new line",
    "aria-label": "Message the agent",
    enterkeyhint: "send",
  });
  const sendButton = h("button", { type: "submit", class: "primary", id: "send" }, "Send");
  const form = h("form", { class: "composer", id: "composer" }, input, sendButton);
  const interruptButton = h(
    "button",
    { type: "button", id: "interrupt", onclick: interrupt },
    "Interrupt"
  );
  const stopButton = h(
    "button",
    { type: "button", id: "stop", class: "danger", onclick: () => (confirmRow.hidden = false) },
    "Stop"
  );
  const confirmRow = h(
    "div",
    { class: "confirm", id: "stop-confirm", hidden: true },
    h("span", {}, "Stop this agent? Its process ends."),
    h("button", { type: "button", class: "danger", id: "stop-yes", onclick: stop }, "Stop it"),
    h(
      "button",
      { type: "button", id: "stop-no", onclick: () => (confirmRow.hidden = true) },
      "Cancel"
    )
  );

  // The stream starts with the last events: the history has what came before, when
  // the first event shown is not the stream's first (or the oldest entries were trimmed).
  let noneEarlier = false;
  const earlier = h(
    "button",
    { type: "button", class: "quiet earlier", id: "earlier", hidden: true, onclick: showEarlier },
    "Earlier messages"
  );
  const empty = h(
    "p",
    { class: "empty conversation-empty", id: "no-messages", hidden: true },
    page.can("send")
      ? "No messages yet: write to the agent below " +
          "(Enter sends, Shift+Enter starts a new line)."
      : "No messages yet. This token may only read: " +
          "a token with the send scope can write to the agent."
  );
  const conversation = new Conversation(key, {
    canRespond: page.can("respond"),
    respond: (id, choice) => {
      const body = { request_id: id, decision: choice.decision };
      if (choice.option_id) body.option_id = choice.option_id;
      if (choice.remember) body.remember = choice.remember;
      return api("POST", agentPath(key, "/respond"), body);
    },
    onState: (state) => {
      setState(state);
      page.agentsChanged(); // the top bar's count may change with it
    },
    onResult: () => refreshStatus(),
    onAdd: () => {
      empty.hidden = true;
      showEarlierButton();
    },
    onFirst: () => showEarlierButton(),
    backend: () => backend,
  });

  replace(
    page.app,
    h(
      "div",
      { class: "agent-head" },
      h(
        "a",
        { href: "#/", class: "back", "aria-label": "All agents" },
        "‹",
        h("span", { class: "word" }, "Agents")
      ),
      h(
        "div",
        { class: "agent-title" },
        name,
        machine,
        h("span", { class: "spacer" }),
        cost,
        badge
      ),
      task
    ),
    earlier,
    empty,
    ...conversation.elements(),
    h(
      "div",
      { class: "dock" },
      conversation.jump,
      notice,
      confirmRow,
      form,
      h("div", { class: "actions" }, interruptButton, stopButton)
    )
  );

  // The newest entries stay in sight while the person is at the bottom, whatever grows.
  conversation.watch([page.app]);

  if (!page.can("send")) {
    for (const el of [input, sendButton, interruptButton]) {
      el.disabled = true;
      el.title = "this token may only read";
    }
  }
  if (!page.can("admin")) {
    stopButton.disabled = true;
    stopButton.title = "stopping needs an admin token";
  }

  function showEarlierButton() {
    earlier.hidden = noneEarlier || !conversation.hasEarlier();
  }

  function showNotice(text) {
    notice.textContent = text;
  }

  // ---- the agent's status (the head) ----------------------------------------------

  function setState(state) {
    badge.textContent = state;
    badge.className = `badge ${stateClass(state)}`;
    badge.dataset.state = state;
  }

  /** Ask for the agent's status and show it; false when there is no such agent. */
  async function refreshStatus() {
    let status;
    try {
      status = await api("GET", agentPath(key));
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        showNotice(`No agent "${key}" here.`);
        setState("unknown");
        return false;
      }
      return true; // the gateway is away: the stream will tell when it is back
    }
    if (closed || !status || typeof status !== "object") return true;
    const agent = status.agent && typeof status.agent === "object" ? status.agent : {};
    const text = (...values) => values.find((v) => typeof v === "string" && v) || "";
    if (typeof agent.backend === "string") backend = agent.backend;
    isTerminal = Boolean(agent.terminal && typeof agent.terminal === "object");
    name.textContent = text(agent.id, key);
    const at = key.indexOf("@");
    const where = text(status.machine, at >= 0 ? key.slice(at + 1) : "");
    machine.textContent = where ? `@ ${where}` : "";
    cost.textContent = dollars(agent.cost_usd);
    task.textContent = text(agent.task, agent.description);
    if (typeof agent.state === "string") setState(agent.state);
    return true;
  }

  // ---- actions --------------------------------------------------------------------

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value;
    if (!text.trim()) return;
    sendButton.disabled = true;
    showNotice("");
    // whoever sends reads the newest entries: the view goes (and stays) at the bottom
    conversation.followNext();
    try {
      await api("POST", agentPath(key, "/send"), { input: text });
      if (input.value === text) {
        input.value = "";
        fitInput();
      }
    } catch (err) {
      showNotice(`Not sent: ${err.message}`);
    } finally {
      sendButton.disabled = false;
      input.focus();
    }
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  /** The input box as tall as its text (up to 160 px: then it scrolls). */
  function fitInput() {
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, 160)}px`;
  }
  input.addEventListener("input", fitInput);

  async function interrupt() {
    showNotice("");
    try {
      await api("POST", agentPath(key, "/interrupt"));
    } catch (err) {
      showNotice(`Not interrupted: ${err.message}`);
    }
  }

  async function stop() {
    confirmRow.hidden = true;
    stopButton.disabled = true;
    showNotice("Stopping…");
    try {
      const result = await api("POST", agentPath(key, "/stop"));
      const state =
        result && typeof result.final_state === "string" ? result.final_state : "stopped";
      showNotice(`Stopped (${state}).`);
    } catch (err) {
      showNotice(`Not stopped: ${err.message}`);
    } finally {
      stopButton.disabled = false;
    }
  }

  async function showEarlier() {
    earlier.disabled = true;
    const shown = conversation.log.querySelectorAll(".msg, .tool-call, .tool-result").length;
    const limit = shown + EARLIER;
    try {
      const history = await api("GET", agentPath(key, `/history?limit=${limit}`));
      const entries = history && Array.isArray(history.entries) ? history.entries : [];
      const added = conversation.prepend(entries);
      // Fewer than asked for, or none older: the history has nothing older.
      if (entries.length < limit || !added) {
        noneEarlier = true;
        earlier.hidden = true;
      }
    } catch (err) {
      showNotice(`No earlier messages: ${err.message}`);
    } finally {
      earlier.disabled = false;
    }
  }

  // ---- the stream -----------------------------------------------------------------

  /** Say so when the agent's history holds no message yet (until one comes). */
  async function showIfEmpty() {
    let history;
    try {
      history = await api("GET", agentPath(key, "/history?limit=1"));
    } catch (err) {
      return;
    }
    const none = history && Array.isArray(history.entries) && !history.entries.length;
    if (!closed && none && !conversation.log.childElementCount) empty.hidden = false;
  }

  async function loadPending() {
    const before = conversation.openRequests();
    let body;
    try {
      body = await api("GET", agentPath(key, "/pending"));
    } catch (err) {
      return;
    }
    if (!closed && body && Array.isArray(body.requests)) {
      conversation.showPending(body.requests, before);
    }
  }

  function open() {
    return new Stream({
      // Each connection resumes after the last offset shown (the first: the tail).
      url: () => {
        const after = conversation.lastOffset;
        return agentPath(key, after > 0 ? `/events?after=${after}` : `/events?tail=${TAIL}`);
      },
      handlers: {
        message: (m) => conversation.onEvent(m),
        truncated: (m) => conversation.onTruncated(m),
      },
      status: (live) => {
        page.connection("agent", live);
        if (live) {
          loadPending();
          if (empty.hidden) showIfEmpty();
        }
      },
      check: async () => {
        try {
          await api("GET", agentPath(key));
        } catch (err) {
          if (err instanceof ApiError && err.status === 404) {
            showNotice(`No agent "${key}" here.`);
            return false;
          }
          if (err instanceof ApiError && err.status === 401) return false;
        }
        return true;
      },
    });
  }

  // The status first: which events are the conversation depends on the backend.
  refreshStatus().then((found) => {
    if (!found || closed) return;
    if (isTerminal) {
      conversation.unwatch();
      terminal = showTerminal(page, key, badge.dataset.state);
    } else {
      stream = open();
    }
  });

  return {
    close() {
      closed = true;
      conversation.unwatch();
      if (stream) stream.close();
      if (terminal) terminal.close();
    },
  };
}
