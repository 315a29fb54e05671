// One agent's conversation as the page shows it: a list of entries, one per stream
// event worth showing (its offset in data-offset), built from the events of
// GET /api/agents/KEY/events. Agent data only ever becomes text, and what hides in
// it or turns it around (ESC, bidi controls...) shows as a marker (dom.js visible()).

import { clock, h, visible } from "./dom.js";
import { Follow } from "./follow.js";

/** Entries kept on screen; older ones leave it (the agent's history keeps them all). */
export const MAX_ENTRIES = 1000;
/** A tool result longer than this many lines is folded (a tap unfolds it). */
const FOLD_LINES = 12;

/** A state as a class name (agent data never becomes more than a word there). */
export function stateClass(state) {
  return `state-${String(state).replace(/[^a-z0-9_-]/gi, "")}`;
}

/** A permission request the page can answer: an object with a request id. */
function isRequest(request) {
  return (
    Boolean(request) &&
    typeof request === "object" &&
    typeof request.request_id === "string" &&
    request.request_id !== ""
  );
}

/** Any value as text: strings as they are, nothing as "", the rest as JSON. */
function str(value) {
  if (typeof value === "string") return value;
  return value === null || value === undefined ? "" : JSON.stringify(value);
}

/** A shell word as a shell reads it (Python's shlex.quote). */
function shellWord(word) {
  if (word === "") return "''";
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'"'"'`)}'`;
}

/**
 * What a person is asked to approve, whole (as `agenthost pending` shows it): the
 * command of the request's input (an argument list quoted as a shell reads it), else
 * the host's summary of the input, `tool_input` (cut short and put on one line).
 */
export function approvalText(request) {
  const input = request.input && typeof request.input === "object" ? request.input : {};
  for (const key of ["command", "cmd"]) {
    const value = input[key];
    if (typeof value === "string" && value) return value;
    if (Array.isArray(value) && value.length && value.every((v) => typeof v === "string")) {
      return value.map(shellWord).join(" ");
    }
  }
  return str(request.tool_input);
}

/** Long text folded under its first lines (what hides in it shown: visible()). */
function block(text) {
  const lines = text.split("\n");
  if (lines.length <= FOLD_LINES) return h("pre", { class: "out" }, visible(text));
  return h(
    "details",
    { class: "fold" },
    h("summary", {}, visible(`${lines.slice(0, 2).join("\n")}… (${lines.length} lines)`)),
    h("pre", { class: "out" }, visible(text))
  );
}

/** What a permission request offers: the agent's own options, else Allow and Deny. */
function choicesOf(request) {
  const choices = [];
  for (const option of Array.isArray(request.options) ? request.options : []) {
    if (!option || typeof option !== "object" || typeof option.id !== "string") continue;
    const kind = str(option.kind);
    choices.push({
      label: str(option.name) || kind || option.id,
      decision: kind.startsWith("allow") ? "allow" : "deny",
      option_id: option.id,
    });
  }
  if (!choices.length) {
    choices.push(
      { label: "Allow", decision: "allow" },
      // the same tool (and exact command) is allowed for the rest of the session
      { label: "Allow for session", decision: "allow", remember: "session" },
      { label: "Deny", decision: "deny" }
    );
  }
  return choices;
}

/** A button's classes: its look, and what tests and styles find it by. */
function choiceClass(choice) {
  if (choice.remember) return "allow-session";
  return choice.decision === "allow" ? "primary allow" : "danger deny";
}

const OUTCOME = { allow: "allowed", deny: "denied", cancelled: "withdrawn" };

/** A turn as the stream tells it: whether its end was shown, and its error event. */
function newTurn() {
  return { ended: false, error: null };
}

/**
 * Whether a turn's result says an interrupt ended it: `interrupted` (the host's), or
 * before that field existed Claude Code's `aborted_*` terminal reasons and Codex's
 * subtype (as agenthost/cli/render.py was_interrupted()).
 */
function wasInterrupted(result) {
  if (result.interrupted === true || result.subtype === "interrupted") return true;
  const reason = result.terminal_reason;
  return typeof reason === "string" && reason.startsWith("aborted");
}

/**
 * The conversation of one agent. `hooks`: canRespond (bool), respond(id, choice) (a
 * promise: POST .../respond), onState(state), onResult(), onAdd() (an entry was
 * added below), onFirst() (the stream's first event came: hasEarlier() knows), and
 * backend() (which events are the conversation: a plain program's output is).
 */
export class Conversation {
  constructor(key, hooks) {
    this.hooks = hooks;
    this.lastOffset = 0;
    /** The offset of the first event the stream delivered (0 before): the tail the
     * page asked for starts there, and what is older is in the history. */
    this.firstDelivered = 0;
    this.lastClock = "";
    /** What the stream said of the current turn (its end line shown, its error). */
    this.turn = newTurn();
    /** The view's pinned-to-the-bottom rule (a Follow), once watch() made it. */
    this.follow = null;
    // role "log": a screen reader reads new entries as they come, politely.
    this.log = h("ol", { class: "log", id: "log", role: "log" });
    this.trimmed = h(
      "p",
      { class: "muted trimmed", id: "trimmed", hidden: true },
      `Only the last ${MAX_ENTRIES} entries are shown; `,
      h("code", {}, `agenthost history ${key}`),
      " has them all."
    );
    /** Requests still pending that the events shown do not include (older ones). */
    this.pending = h("div", { class: "pending-area", id: "pending" });
    /** Shown while the person reads above and newer entries came: back to the bottom. */
    this.jump = h(
      "button",
      { type: "button", class: "jump", id: "jump", hidden: true, onclick: () => this.followNext() },
      "New messages ↓"
    );
  }

  /**
   * Keep the newest entries in sight while the person is at the bottom, whatever in
   * `watched` (elements) grows (follow.js); until unwatch().
   */
  watch(watched) {
    this.follow = new Follow(watched, (pinned) => {
      if (pinned) this.jump.hidden = true;
    });
  }

  /** Stop watching (the view closes). */
  unwatch() {
    if (this.follow) this.follow.close();
  }

  /** The elements to put on the page, in order. */
  elements() {
    return [this.trimmed, this.log, this.pending];
  }

  // ---- the stream's events --------------------------------------------------------

  /** A "message" event of the stream: `id:` the offset, `data:` the event's JSON. */
  onEvent(message) {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch (err) {
      return;
    }
    if (!event || typeof event !== "object") return;
    const offset = Number.isInteger(event.offset) ? event.offset : Number(message.lastEventId);
    // A second guard against repeats, after the gateway's own: an offset shows once.
    if (!Number.isInteger(offset) || offset <= this.lastOffset) return;
    this.lastOffset = offset;
    if (!this.firstDelivered) {
      this.firstDelivered = offset;
      this.hooks.onFirst();
    }
    const node = this.render(offset, event);
    if (node) this.add(node);
  }

  /** A "truncated" event: {epoch, after, before, reason}, shown as a notice. */
  onTruncated(message) {
    let gap;
    try {
      gap = JSON.parse(message.data);
    } catch (err) {
      return;
    }
    if (!gap || typeof gap !== "object") return;
    const { after, before } = gap;
    // A notice that does not say where the gap is cannot be placed: ignored.
    if (!Number.isInteger(after) || !Number.isInteger(before) || after < 0 || before <= after) {
      return;
    }
    let text;
    if (gap.reason === "new_epoch") {
      // A new stream: its offsets start again, so the guard starts again too.
      this.lastOffset = after;
      if (!this.log.childElementCount) return; // nothing shown yet: nothing to tell apart
      text = "The agent's host started a new stream: what came after the line above is lost.";
    } else {
      this.lastOffset = Math.max(this.lastOffset, before - 1);
      const span = before - after - 1;
      if (span < 1) return;
      text =
        span === 1
          ? `1 event (offset ${after + 1}) is no longer kept.`
          : `${span} events (offsets ${after + 1}–${before - 1}) are no longer kept.`;
    }
    this.add(h("li", { class: "entry gap", dataset: { gap: str(gap.reason) } }, text));
  }

  render(offset, event) {
    switch (event.type) {
      case "chat_entry":
        return this.liveEntry(offset, event);
      case "permission_request":
        if (!isRequest(event.request)) return null;
        for (const extra of this.pending.querySelectorAll(".permission")) {
          if (extra.dataset.requestId === event.request.request_id) extra.remove();
        }
        return this.requestCard(offset, event.request, event.timestamp);
      case "permission_response":
        this.answered(event.decision);
        return null;
      case "state":
        if (typeof event.state !== "string") return null;
        this.hooks.onState(event.state);
        if (event.state !== "done" && event.state !== "error") return null;
        return this.entry(
          offset,
          `ended ${stateClass(event.state)}`,
          event.timestamp,
          `The agent ended (${event.state}).`
        );
      case "error": {
        const node = this.entry(
          offset,
          "error-event",
          event.timestamp,
          h("div", { class: "label" }, "error"),
          h("div", { class: "text" }, visible(str(event.error)))
        );
        this.turn.error = { node, text: str(event.error) };
        return node;
      }
      case "result":
        this.hooks.onResult();
        return this.resultLine(offset, event);
      case "output": {
        // The raw stdout of agents that speak JSON says what the chat entries say; a
        // plain program's (`lines`) output, and anyone's stderr, is the conversation.
        const stderr = event.stream === "stderr";
        if (!stderr && this.hooks.backend() !== "lines") return null;
        const kind = `output stream-${stderr ? "stderr" : "stdout"}`;
        return this.entry(offset, kind, null, block(str(event.data)));
      }
      default:
        return null; // a type this page does not know: ignored, as the protocol says
    }
  }

  /**
   * A chat entry of the live stream. A failed turn is reported twice by the host (an
   * `error` event, then the history entry with the same text): its line takes the
   * place of the error shown just above it.
   */
  liveEntry(offset, event) {
    const e = event.chat_entry;
    if (e && typeof e === "object" && e.role === "assistant") {
      if (e.is_error === true && this.turn.error && this.turn.error.text === str(e.content)) {
        this.lastShownError(this.turn);
      }
      if (e.is_error === true || e.interrupted === true) this.turn.ended = true;
    }
    if (e && typeof e === "object" && e.role === "user") this.turn = newTurn();
    return this.chatEntry(offset, event);
  }

  // ---- entries --------------------------------------------------------------------

  /** The offset of the oldest entry shown; 0 when none is. */
  firstOffset() {
    const first = this.log.querySelector("[data-offset]");
    return first ? Number(first.dataset.offset) : 0;
  }

  /**
   * Whether the history may hold entries older than those shown: the stream began
   * after the agent's first event (the page asks for the last ones), or the oldest
   * entries left the screen.
   */
  hasEarlier() {
    return this.firstDelivered > 1 || !this.trimmed.hidden;
  }

  /**
   * Put the chat entries of the agent's history (oldest first, each with its offset)
   * that are older than the oldest one shown above it, where the reader stays; how
   * many there were.
   */
  prepend(entries) {
    // older than the oldest shown, or (none shown) than the first event delivered
    const first = this.firstOffset() || this.firstDelivered;
    const older = entries.filter(
      (e) => e && typeof e === "object" && Number.isInteger(e.offset) && e.offset < first
    );
    const bottomClock = this.lastClock;
    this.lastClock = "";
    const nodes = [];
    for (const e of older) {
      const node = this.chatEntry(e.offset, { chat_entry: e }, nodes[nodes.length - 1]);
      if (node) nodes.push(node);
    }
    this.lastClock = bottomClock;
    const el = document.scrollingElement;
    const height = el.scrollHeight;
    this.log.prepend(...nodes);
    el.scrollTop += el.scrollHeight - height;
    return older.length;
  }

  add(node) {
    this.log.appendChild(node);
    if (this.log.childElementCount > MAX_ENTRIES) {
      this.log.firstElementChild.remove();
      this.trimmed.hidden = false;
    }
    this.hooks.onAdd();
    // Whoever reads the newest entries keeps seeing them (the Follow sees the log
    // grow); whoever scrolled up stays there, and is told that newer ones came.
    if (this.follow && !this.follow.pinned) this.jump.hidden = false;
  }

  /** Go to the newest entries and stay with them (the person sent something). */
  followNext() {
    if (this.follow) this.follow.pin();
  }

  /** The time of an entry when it differs from the one above (a turn is one minute). */
  stamp(time) {
    const text = clock(time);
    if (!text || text === this.lastClock) return null;
    this.lastClock = text;
    return h("time", { class: "when", datetime: time, title: time }, text);
  }

  entry(offset, kind, time, ...children) {
    return h("li", { class: `entry ${kind}`, dataset: { offset } }, ...children, this.stamp(time));
  }

  chatEntry(offset, event, above = this.log.lastElementChild) {
    const e = event.chat_entry;
    if (!e || typeof e !== "object") return null;
    const time = e.timestamp || event.timestamp;
    if (e.role === "permission") return this.decisionLine(offset, e, time);
    if (e.tool_result !== undefined && e.tool_result !== null) {
      const failed = e.is_error === true;
      const label = visible(`${str(e.tool_name) || "tool"} ${failed ? "failed" : "result"}`);
      // Right under its call, a result is drawn as the call's second half.
      const joined =
        Boolean(above) &&
        above.matches(".tool-call") &&
        typeof e.tool_use_id === "string" &&
        above.dataset.toolUseId === e.tool_use_id;
      return this.entry(
        offset,
        `tool-result${failed ? " failed" : ""}${joined ? " joined" : ""}`,
        time,
        h("div", { class: "label" }, label),
        block(str(e.tool_result))
      );
    }
    if (e.tool_name !== undefined && e.tool_name !== null) {
      const call = this.entry(
        offset,
        "tool-call",
        time,
        h("div", { class: "label" }, visible(str(e.tool_name))),
        h("code", { class: "tool-input" }, visible(str(e.tool_input)))
      );
      if (typeof e.tool_use_id === "string") call.dataset.toolUseId = e.tool_use_id;
      return call;
    }
    if (e.role === "assistant" && e.interrupted === true) {
      return this.turnEnd(offset, "interrupted", time, "turn interrupted");
    }
    if (e.role === "assistant" && e.is_error === true) {
      return this.failedLine(offset, str(e.content), time);
    }
    const role = typeof e.role === "string" ? e.role : "other";
    // what the agent says shows what hides in it; the user's own words stay as typed
    const text = role === "user" ? str(e.content) : visible(str(e.content));
    return this.entry(
      offset,
      `msg role-${role.replace(/[^a-z0-9_-]/gi, "")}`,
      time,
      h("div", { class: "label" }, role === "user" ? "you" : role),
      h("div", { class: "text" }, text)
    );
  }

  /**
   * A decision on a permission request, as the history records it ("allowed by
   * policy: rule 1", "denied by web:phone"): one small line under the request.
   */
  decisionLine(offset, e, time) {
    const decision = e.decision && typeof e.decision === "object" ? e.decision : {};
    const behavior = str(decision.behavior).replace(/[^a-z_]/gi, "");
    const tool = str(e.tool_name);
    const line = this.entry(
      offset,
      `decision-line${behavior ? ` decision-${behavior}` : ""}`,
      time,
      h("span", {}, visible(tool ? `${tool}: ${str(e.content)}` : str(e.content)))
    );
    if (typeof decision.actor === "string") line.dataset.actor = decision.actor;
    return line;
  }

  /**
   * The end of a turn, in the words the terminal and docs/agents.md use too:
   * `turn done`, `turn interrupted`, `turn failed: <the error text>`.
   */
  turnEnd(offset, outcome, time, ...words) {
    return this.entry(offset, `result turn-end ${outcome}`, time, h("span", {}, ...words));
  }

  /** A failed turn's line: its error text, once. */
  failedLine(offset, text, time) {
    return this.turnEnd(offset, "failed", time, "turn failed: ", visible(text));
  }

  /**
   * A `result` event. An interrupted or failed turn has its line already (from the
   * history entry the host recorded for it, which `history` keeps too): a second
   * one would say it twice. A result alone (an agent that reported nothing else) gets
   * its line here.
   */
  resultLine(offset, event) {
    const r = event.result && typeof event.result === "object" ? event.result : {};
    const turn = this.turn;
    this.turn = newTurn();
    const time = event.timestamp;
    const interrupted = wasInterrupted(r);
    if (!interrupted && r.is_error !== true) return this.turnEnd(offset, "done", time, "turn done");
    if (turn.ended) return null;
    if (interrupted) return this.turnEnd(offset, "interrupted", time, "turn interrupted");
    const error = this.lastShownError(turn);
    return this.failedLine(offset, error || "the agent did not say why", time);
  }

  /**
   * The text of the turn's error event when it is the last entry shown, which then
   * leaves the log (the failed turn's line says it); "" else.
   */
  lastShownError(turn) {
    if (!turn.error || turn.error.node !== this.log.lastElementChild) return "";
    turn.error.node.remove();
    return turn.error.text;
  }

  // ---- permission requests --------------------------------------------------------

  /** A request's card: in the log (with its offset) or, without one, among the pending. */
  requestCard(offset, request, time) {
    const id = request.request_id;
    // the command whole, and what hides in it or turns it around shown (⟨U+202E⟩)
    const input = approvalText(request);
    const tool = str(request.tool_name);
    const choices = h("div", { class: "choices" });
    const dataset = offset ? { offset, requestId: id } : { requestId: id };
    const card = h(
      offset ? "li" : "div",
      { class: "entry permission", dataset },
      h("div", { class: "label" }, "permission"),
      h(
        "div",
        { class: "text" },
        "May it use ",
        tool ? h("strong", {}, visible(tool)) : "a tool",
        input ? "?" : "? (no input)"
      ),
      input ? h("code", { class: "tool-input" }, visible(input)) : null,
      choices,
      h("p", { class: "outcome" }),
      offset ? this.stamp(time) : null
    );
    for (const choice of choicesOf(request)) {
      const button = h("button", { type: "button", class: choiceClass(choice) }, choice.label);
      if (!this.hooks.canRespond) {
        button.disabled = true;
        button.title = "answering needs a token with the respond scope";
      }
      button.addEventListener("click", () => this.respond(card, id, choice));
      choices.appendChild(button);
    }
    return card;
  }

  async respond(card, id, choice) {
    const buttons = card.querySelectorAll(".choices button");
    buttons.forEach((b) => (b.disabled = true));
    const outcome = card.querySelector(".outcome");
    try {
      await this.hooks.respond(id, choice);
      // The permission_response event says how it ended (it may have come already).
      if (!card.classList.contains("answered")) outcome.textContent = "answered…";
    } catch (err) {
      outcome.textContent = `Not answered: ${err.message}`;
      buttons.forEach((b) => (b.disabled = false));
    }
  }

  cards(id) {
    return [...document.querySelectorAll(".permission[data-request-id]")].filter(
      (card) => card.dataset.requestId === id
    );
  }

  answered(decision) {
    if (!decision || typeof decision !== "object") return;
    const behavior = str(decision.behavior);
    const word = OUTCOME[behavior] || behavior;
    for (const card of this.cards(str(decision.request_id))) {
      if (!card.matches("li")) {
        card.remove(); // a card of the pending list: the log shows the request
        continue;
      }
      this.close(card, decision.message ? `${word}: ${str(decision.message)}` : word);
      card.classList.add(`decision-${behavior.replace(/[^a-z_]/gi, "")}`);
      card.dataset.decision = behavior;
    }
  }

  close(card, text) {
    card.classList.add("answered");
    card.querySelector(".choices")?.remove();
    card.querySelector(".outcome").textContent = text;
  }

  /** The unanswered request cards of the log (ids), before asking for the pending list. */
  openRequests() {
    return new Set(
      [...this.log.querySelectorAll(".permission:not(.answered)")].map((c) => c.dataset.requestId)
    );
  }

  /**
   * The pending list (GET .../pending `requests`) as it was after `before` (from
   * openRequests()) was taken: a pending request not shown gets a card; a card of
   * `before` whose request is no longer pending was answered (or lost with an earlier
   * host) outside the events shown.
   */
  showPending(requests, before) {
    const pending = new Set();
    for (const request of requests) {
      if (!isRequest(request)) continue;
      pending.add(request.request_id);
      if (!this.cards(request.request_id).length) {
        this.pending.appendChild(this.requestCard(0, request, request.created_at));
      }
    }
    for (const card of this.log.querySelectorAll(".permission:not(.answered)")) {
      const id = card.dataset.requestId;
      if (before.has(id) && !pending.has(id)) this.close(card, "no longer pending");
    }
  }
}
