// One agent: its conversation live from GET /api/agents/KEY/events (SSE, the `id:` of
// each event is its stream offset), permission requests to answer, an input box,
// Interrupt and Stop.

import { agentPath, api, ApiError, Stream } from "./api.js";
import { clock, dollars, h, replace } from "./dom.js";

/** Events the page asks for when it opens an agent (older ones stay in history). */
const TAIL = 500;
/** Entries the page keeps on screen; older ones leave it (history keeps them all). */
const MAX_ENTRIES = 1000;
/** A tool result longer than this many lines is folded (a tap unfolds it). */
const FOLD_LINES = 12;

/** A permission request the page can answer: an object with a request id. */
function isRequest(request) {
  return Boolean(request) && typeof request === "object" && typeof request.request_id === "string" && request.request_id !== "";
}

/** A state as a class name (agent data never becomes more than a word there). */
export function stateClass(state) {
  return `state-${String(state).replace(/[^a-z0-9_-]/gi, "")}`;
}

/** The view of agent `key`; returns the view (close() stops its stream). */
export function showAgent(page, key) {
  let lastOffset = 0;
  let backend = "";
  let closed = false;

  const name = h("span", { class: "name" }, key);
  const badge = h("span", { class: "badge", id: "agent-state" }, "…");
  const cost = h("span", { class: "cost muted", id: "agent-cost" });
  const machine = h("span", { class: "machine" });
  const task = h("div", { class: "agent-task", id: "agent-task" });
  const log = h("ol", { class: "log", id: "log" });
  const trimmed = h(
    "p",
    { class: "muted trimmed", id: "trimmed", hidden: true },
    `Only the last ${MAX_ENTRIES} entries are shown; `,
    h("code", {}, `agenthost history ${key}`),
    " has them all."
  );
  const pendingArea = h("div", { class: "pending-area", id: "pending" });
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
  const interruptButton = h(
    "button",
    { type: "button", id: "interrupt", onclick: interrupt },
    "Interrupt"
  );
  const stopButton = h("button", { type: "button", id: "stop", class: "danger", onclick: askStop }, "Stop");
  const confirmRow = h(
    "div",
    { class: "confirm", id: "stop-confirm", hidden: true },
    h("span", {}, "Stop this agent? Its process ends."),
    h("button", { type: "button", class: "danger", id: "stop-yes", onclick: stop }, "Stop it"),
    h("button", { type: "button", id: "stop-no", onclick: () => (confirmRow.hidden = true) }, "Cancel")
  );
  const form = h(
    "form",
    { class: "composer", id: "composer" },
    input,
    sendButton
  );
  const actions = h("div", { class: "actions" }, interruptButton, stopButton);

  replace(
    page.app,
    h(
      "div",
      { class: "agent-head" },
      h("a", { href: "#/", class: "back", "aria-label": "All agents" }, "‹ Agents"),
      h("div", { class: "agent-title" }, name, machine, h("span", { class: "spacer" }), cost, badge),
      task
    ),
    trimmed,
    log,
    pendingArea,
    h("div", { class: "dock" }, notice, confirmRow, form, actions)
  );

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

  // ---- the agent's status (header) -------------------------------------------------

  function setState(state) {
    if (typeof state !== "string") return;
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
      return true;
    }
    if (closed || !status || typeof status !== "object") return;
    const agent = status.agent && typeof status.agent === "object" ? status.agent : {};
    if (typeof agent.backend === "string") backend = agent.backend;
    if (typeof agent.id === "string") name.textContent = agent.id;
    const m = typeof status.machine === "string" ? status.machine : key.includes("@") ? key.slice(key.indexOf("@") + 1) : "";
    machine.textContent = m ? `@ ${m}` : "";
    cost.textContent = dollars(agent.cost_usd);
    task.textContent = [agent.task, agent.description].find((t) => typeof t === "string" && t) || "";
    setState(agent.state);
    return true;
  }

  // ---- the conversation ----------------------------------------------------------

  function atBottom() {
    const el = document.scrollingElement;
    return el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  }

  let follow = true;
  let scrollQueued = false;
  function add(node) {
    if (!scrollQueued) follow = atBottom();
    log.appendChild(node);
    if (log.childElementCount > MAX_ENTRIES) {
      log.firstElementChild.remove();
      trimmed.hidden = false;
    }
    if (follow && !scrollQueued) {
      scrollQueued = true;
      requestAnimationFrame(() => {
        scrollQueued = false;
        document.scrollingElement.scrollTop = document.scrollingElement.scrollHeight;
      });
    }
  }

  // An entry shows its time when it differs from the one above (a turn is one minute).
  let lastClock = "";
  function stamp(time) {
    const text = clock(time);
    if (!text || text === lastClock) return null;
    lastClock = text;
    return h("time", { class: "when", datetime: time, title: time }, text);
  }

  function entry(offset, kind, time, ...children) {
    return h("li", { class: `entry ${kind}`, dataset: { offset } }, ...children, stamp(time));
  }

  function block(text) {
    const value = typeof text === "string" ? text : JSON.stringify(text);
    const lines = value.split("\n");
    if (lines.length <= FOLD_LINES) return h("pre", { class: "out" }, value);
    return h(
      "details",
      { class: "fold" },
      h("summary", {}, `${lines.slice(0, 2).join("\n")}… (${lines.length} lines)`),
      h("pre", { class: "out" }, value)
    );
  }

  function chatEntry(offset, event) {
    const e = event.chat_entry;
    if (!e || typeof e !== "object") return null;
    const time = e.timestamp || event.timestamp;
    const str = (v) => (typeof v === "string" ? v : v == null ? "" : JSON.stringify(v));
    if (e.tool_result !== undefined && e.tool_result !== null) {
      const failed = e.is_error === true;
      return entry(
        offset,
        `tool-result${failed ? " failed" : ""}`,
        time,
        h("div", { class: "label" }, `${str(e.tool_name) || "tool"} ${failed ? "failed" : "result"}`),
        block(str(e.tool_result))
      );
    }
    if (e.tool_name !== undefined && e.tool_name !== null) {
      const node = entry(
        offset,
        "tool-call",
        time,
        h("div", { class: "label" }, str(e.tool_name)),
        h("code", { class: "tool-input" }, str(e.tool_input))
      );
      if (typeof e.tool_use_id === "string") node.dataset.toolUseId = e.tool_use_id;
      return node;
    }
    const role = typeof e.role === "string" ? e.role : "other";
    const who = role === "user" ? "you" : role;
    return entry(
      offset,
      `msg role-${role.replace(/[^a-z0-9_-]/gi, "")}`,
      time,
      h("div", { class: "label" }, who),
      h("div", { class: "text" }, str(e.content))
    );
  }

  function requestCard(offset, request, time) {
    const id = String(request.request_id ?? "");
    const buttons = h("div", { class: "choices" });
    const status = h("p", { class: "outcome" });
    const card = h(
      offset ? "li" : "div",
      { class: "entry permission", dataset: offset ? { offset, requestId: id } : { requestId: id } },
      h("div", { class: "label" }, "permission"),
      h(
        "div",
        { class: "text" },
        "May it use ",
        h("strong", {}, String(request.tool_name ?? "a tool")),
        request.tool_input ? "?" : "? (no input)"
      ),
      request.tool_input ? h("code", { class: "tool-input" }, String(request.tool_input)) : null,
      buttons,
      status,
      offset ? stamp(time) : null
    );
    const choices = [];
    if (Array.isArray(request.options) && request.options.length) {
      for (const option of request.options) {
        if (!option || typeof option !== "object" || typeof option.id !== "string") continue;
        const kind = String(option.kind ?? "");
        const allow = kind.startsWith("allow");
        choices.push({
          label: option.name || kind || option.id,
          decision: allow ? "allow" : "deny",
          option_id: option.id,
        });
      }
    }
    if (!choices.length) {
      choices.push({ label: "Allow", decision: "allow" }, { label: "Deny", decision: "deny" });
    }
    for (const choice of choices) {
      const button = h(
        "button",
        {
          type: "button",
          class: choice.decision === "allow" ? "primary allow" : "danger deny",
          dataset: { decision: choice.decision },
        },
        choice.label
      );
      if (!page.can("respond")) {
        button.disabled = true;
        button.title = "answering needs a respond token";
      }
      button.addEventListener("click", () => respond(card, id, choice));
      buttons.appendChild(button);
    }
    return card;
  }

  async function respond(card, id, choice) {
    const buttons = card.querySelectorAll(".choices button");
    buttons.forEach((b) => (b.disabled = true));
    const body = { request_id: id, decision: choice.decision };
    if (choice.option_id) body.option_id = choice.option_id;
    try {
      await api("POST", agentPath(key, "/respond"), body);
      // The permission_response event says how it ended (it may have come already).
      if (!card.classList.contains("answered")) card.querySelector(".outcome").textContent = "answered…";
    } catch (err) {
      card.querySelector(".outcome").textContent = `Not answered: ${err.message}`;
      buttons.forEach((b) => (b.disabled = !page.can("respond")));
    }
  }

  function answered(decision) {
    if (!decision || typeof decision !== "object") return;
    const id = String(decision.request_id ?? "");
    const behavior = String(decision.behavior ?? "");
    const word = { allow: "allowed", deny: "denied", cancelled: "withdrawn" }[behavior] || behavior;
    for (const card of document.querySelectorAll(".permission[data-request-id]")) {
      if (card.dataset.requestId !== id) continue;
      if (!card.matches("li")) {
        card.remove(); // an extra card of the pending list: the log shows the request
        continue;
      }
      card.classList.add("answered", `decision-${behavior.replace(/[^a-z_]/gi, "")}`);
      card.dataset.decision = behavior;
      card.querySelector(".choices")?.remove();
      const text = decision.message ? `${word}: ${decision.message}` : word;
      card.querySelector(".outcome").textContent = text;
    }
  }

  function resultLine(offset, event) {
    const r = event.result && typeof event.result === "object" ? event.result : {};
    const failed = r.is_error === true;
    const words = [failed ? "turn failed" : "turn done"];
    if (failed && typeof r.subtype === "string") words.push(`(${r.subtype})`);
    if (dollars(r.cost_usd)) words.push(dollars(r.cost_usd));
    return entry(offset, `result${failed ? " failed" : ""}`, event.timestamp, h("span", {}, words.join(" ")));
  }

  function render(offset, event) {
    switch (event.type) {
      case "chat_entry":
        return chatEntry(offset, event);
      case "permission_request": {
        const request = event.request;
        if (!isRequest(request)) return null;
        for (const extra of pendingArea.querySelectorAll(".permission")) {
          if (extra.dataset.requestId === String(request.request_id)) extra.remove();
        }
        return requestCard(offset, request, event.timestamp);
      }
      case "permission_response":
        answered(event.decision);
        return null;
      case "state":
        setState(event.state);
        if (event.state === "done" || event.state === "error") {
          return entry(offset, `ended ${stateClass(event.state)}`, event.timestamp, `The agent ended (${event.state}).`);
        }
        return null;
      case "error":
        return entry(offset, "error-event", event.timestamp, h("div", { class: "label" }, "error"), h("div", { class: "text" }, String(event.error ?? "")));
      case "result":
        refreshStatus();
        return resultLine(offset, event);
      case "output":
        // Raw stdout of the agents that speak JSON is what the chat entries already
        // say; a plain program's (`lines`) output and any stderr is the conversation.
        if (backend === "lines" || event.stream === "stderr") {
          return entry(offset, `output stream-${event.stream === "stderr" ? "stderr" : "stdout"}`, null, h("pre", { class: "out" }, String(event.data ?? "")));
        }
        return null;
      default:
        return null; // a type this page does not know: ignored, as the protocol says
    }
  }

  function onEvent(message) {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch (err) {
      return;
    }
    if (!event || typeof event !== "object") return;
    const offset = Number.isInteger(event.offset) ? event.offset : Number(message.lastEventId);
    // A second guard against repeats, after the gateway's own: never show an offset twice.
    if (!Number.isInteger(offset) || offset <= lastOffset) return;
    lastOffset = offset;
    const node = render(offset, event);
    if (node) add(node);
  }

  function onTruncated(message) {
    let gap;
    try {
      gap = JSON.parse(message.data);
    } catch (err) {
      return;
    }
    if (!gap || typeof gap !== "object") return;
    const { after, before } = gap;
    // A notice that does not say where the gap is cannot be placed: ignored.
    if (!Number.isInteger(after) || !Number.isInteger(before) || after < 0 || before <= after) return;
    let text;
    if (gap.reason === "new_epoch") {
      // A new stream: its offsets start again, so the guard starts again too.
      lastOffset = after;
      if (!log.childElementCount) return; // nothing shown yet: nothing was lost to see
      text = "The agent's host started a new stream: what came after the last line above is lost.";
    } else {
      lastOffset = Math.max(lastOffset, before - 1);
      const span = before - after - 1;
      if (span < 1) return;
      text =
        span === 1
          ? `1 event (offset ${after + 1}) is no longer kept.`
          : `${span} events (offsets ${after + 1}–${before - 1}) are no longer kept.`;
    }
    add(h("li", { class: "entry gap", dataset: { gap: gap.reason ?? "" } }, text));
  }

  // ---- requests still pending (older than the events shown) ----------------------

  async function loadPending() {
    const before = new Set(
      [...log.querySelectorAll(".permission:not(.answered)")].map((c) => c.dataset.requestId)
    );
    let body;
    try {
      body = await api("GET", agentPath(key, "/pending"));
    } catch (err) {
      return;
    }
    if (closed || !body || !Array.isArray(body.requests)) return;
    const pending = new Set();
    for (const request of body.requests) {
      if (!isRequest(request)) continue;
      const id = String(request.request_id ?? "");
      pending.add(id);
      const shown = [...document.querySelectorAll(".permission[data-request-id]")].some(
        (c) => c.dataset.requestId === id
      );
      if (!shown) pendingArea.appendChild(requestCard(0, request, request.created_at));
    }
    // Cards shown before the list was asked for whose request is no longer pending were
    // answered (or lost with an earlier host) out of the events shown.
    for (const card of log.querySelectorAll(".permission:not(.answered)")) {
      if (before.has(card.dataset.requestId) && !pending.has(card.dataset.requestId)) {
        card.classList.add("answered");
        card.querySelector(".choices")?.remove();
        card.querySelector(".outcome").textContent = "no longer pending";
      }
    }
  }

  // ---- actions --------------------------------------------------------------------

  function showNotice(text) {
    notice.textContent = text;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value;
    if (!text.trim()) return;
    sendButton.disabled = true;
    showNotice("");
    try {
      await api("POST", agentPath(key, "/send"), { input: text });
      if (input.value === text) input.value = "";
      follow = true;
    } catch (err) {
      showNotice(`Not sent: ${err.message}`);
    } finally {
      sendButton.disabled = !page.can("send");
      input.focus();
    }
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  input.addEventListener("input", () => {
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, 160)}px`;
  });

  async function interrupt() {
    showNotice("");
    try {
      await api("POST", agentPath(key, "/interrupt"));
    } catch (err) {
      showNotice(`Not interrupted: ${err.message}`);
    }
  }

  function askStop() {
    confirmRow.hidden = false;
  }

  async function stop() {
    confirmRow.hidden = true;
    stopButton.disabled = true;
    showNotice("Stopping…");
    try {
      const result = await api("POST", agentPath(key, "/stop"));
      const state = result && typeof result.final_state === "string" ? result.final_state : "stopped";
      showNotice(`Stopped (${state}).`);
    } catch (err) {
      showNotice(`Not stopped: ${err.message}`);
    } finally {
      stopButton.disabled = !page.can("admin");
    }
  }

  // ---- the stream -----------------------------------------------------------------

  let stream = null;
  const open = () => new Stream({
    // A new connection (not the browser's own retry) resumes after the last offset shown.
    url: () => agentPath(key, lastOffset > 0 ? `/events?after=${lastOffset}` : `/events?tail=${TAIL}`),
    handlers: { message: onEvent, truncated: onTruncated },
    status: (live) => {
      page.connection(live);
      if (live) loadPending();
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
  // The status first: which events are the conversation depends on the backend.
  refreshStatus().then((found) => {
    if (found && !closed) stream = open();
  });

  return {
    close() {
      closed = true;
      if (stream) stream.close();
    },
  };
}
