// A terminal agent's link to the gateway, for both of its views (terminal.js): the
// screen (GET .../screen, painted first), then the stream's events after the screen's
// offset (SSE, each offset once), and the keys, sizes and signals sent back.
//
// Exactly once, across reconnects: every event whose offset is not above the last one
// applied is ignored; a reconnect asks for the events after that offset. When the
// stream says events were lost (a `truncated` event: evicted, or a new stream), the
// screen is asked for again and painted anew; events that arrive meanwhile wait, and
// those the new screen already holds are dropped.

import { agentPath, api, ApiError, Stream } from "./api.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8"); // not fatal: what is not UTF-8 becomes U+FFFD

/**
 * The text of a `terminal` event, or null for garbage. `data` is text; `data_b64` holds
 * bytes that are not all UTF-8: decoded here with U+FFFD for what is not, as the host's
 * emulator shows it (xterm.js would drop those bytes). The host never cuts a character
 * across events, so each event decodes on its own.
 */
export function eventText(event) {
  if (typeof event.data === "string") return event.data;
  if (typeof event.data_b64 !== "string") return null;
  let binary;
  try {
    binary = atob(event.data_b64);
  } catch (err) {
    return null;
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return decoder.decode(bytes);
}

/** A whole number in [low, high], else null. */
function whole(value, low, high) {
  return Number.isInteger(value) && value >= low && value <= high ? value : null;
}

/** A screen object as the gateway gave it, checked; null when it is not one. */
export function checkScreen(value) {
  if (!value || typeof value !== "object") return null;
  const offset = whole(value.offset, 0, Number.MAX_SAFE_INTEGER);
  const cols = whole(value.cols, 1, 1000);
  const rows = whole(value.rows, 1, 1000);
  if (offset === null || cols === null || rows === null) return null;
  const lines = Array.isArray(value.lines)
    ? value.lines.map((line) => (typeof line === "string" ? line : ""))
    : [];
  const cursor = value.cursor && typeof value.cursor === "object" ? value.cursor : {};
  return {
    offset,
    cols,
    rows,
    lines,
    dump: typeof value.dump === "string" ? value.dump : "",
    title: typeof value.title === "string" ? value.title : "",
    alternate: value.alternate === true,
    cursor: {
      col: whole(cursor.col, 0, 1000) ?? 0,
      row: whole(cursor.row, 0, 1000) ?? 0,
      visible: cursor.visible !== false,
    },
  };
}

/**
 * The link of agent `key`. `on` holds what the view does: screen(screen) paints a
 * screen object, text(string) writes output, size(cols, rows) applies a
 * `terminal_size`, state(text) shows the agent's state, notice(text) tells the person.
 */
export class TerminalLink {
  constructor(page, key, on) {
    this.page = page;
    this.key = key;
    this.on = on;
    this.lastOffset = 0;
    this.painting = false;
    this.waiting = []; // events that came while a screen was on its way
    this.stream = null;
    this.closed = false;
    this.retry = null;
    this.outbox = []; // keys not sent yet: [{text} | {bytes}]
    this.sending = false;
    this.size = null; // the terminal's size, as the last screen or terminal_size said
    this.wanted = null; // this browser's size, as last asked for
    this.answered = null; // the terminal's size the last resize asked for answered
    this.again = false; // a paint is due after the one on its way
    this.applied = []; // the offsets of the screens painted and the events applied
  }

  /** Paint the screen, then follow the stream after it. */
  start() {
    this.paint();
  }

  /** Ask for the screen now and paint it (the stream's events wait meanwhile). */
  async paint() {
    if (this.closed) return;
    if (this.painting) {
      // events may be lost after the screen on its way was taken: another one after it
      this.again = true;
      return;
    }
    this.painting = true;
    let screen = null;
    try {
      screen = checkScreen(await api("GET", agentPath(this.key, "/screen")));
      if (!screen) this.on.notice("The gateway sent a screen that is not one.");
    } catch (err) {
      this.painting = false;
      if (err instanceof ApiError && (err.status === 401 || err.status === 404)) {
        this.on.notice(`No screen: ${err.message}`);
        return;
      }
      if (err instanceof ApiError && err.status === 409) {
        // not running (its last screen stays on the page), or not a terminal
        this.on.notice(`No screen: ${err.message}`);
      }
      if (!this.closed) this.retry = setTimeout(() => this.paint(), 2000);
      return;
    }
    if (this.closed) return;
    if (screen) {
      this.lastOffset = screen.offset;
      this.record(`screen ${screen.offset}`);
      this.size = { cols: screen.cols, rows: screen.rows };
      this.on.screen(screen);
    }
    this.painting = false;
    if (this.again) {
      this.again = false;
      this.paint();
      return;
    }
    const waiting = this.waiting;
    this.waiting = [];
    for (const event of waiting) this.apply(event);
    if (!this.stream) this.stream = this.open();
  }

  open() {
    return new Stream({
      url: () => agentPath(this.key, `/events?after=${this.lastOffset}`),
      handlers: {
        message: (m) => this.onMessage(m),
        truncated: () => this.paint(),
      },
      status: (live) => this.page.connection("agent", live),
      check: async () => {
        try {
          await api("GET", agentPath(this.key));
        } catch (err) {
          if (err instanceof ApiError && (err.status === 404 || err.status === 401)) {
            return false;
          }
        }
        return true;
      },
    });
  }

  onMessage(message) {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch (err) {
      return;
    }
    if (!event || typeof event !== "object" || !Number.isSafeInteger(event.offset)) return;
    if (this.painting) {
      if (this.waiting.length < 100000) this.waiting.push(event);
      return;
    }
    this.apply(event);
  }

  /** Apply one event unless an earlier screen or event held it already. */
  apply(event) {
    if (event.offset <= this.lastOffset) return;
    this.lastOffset = event.offset;
    this.record(event.offset);
    if (event.type === "terminal") {
      const text = eventText(event);
      if (text !== null) this.on.text(text);
    } else if (event.type === "terminal_size") {
      const cols = whole(event.cols, 1, 1000);
      const rows = whole(event.rows, 1, 1000);
      if (cols !== null && rows !== null) {
        this.size = { cols, rows };
        this.on.size(cols, rows);
      }
    } else if (event.type === "state" && typeof event.state === "string") {
      this.on.state(event.state);
    }
  }

  /** Keep what was applied, the newest 10000 (for a test, or a curious person). */
  record(what) {
    if (this.applied.length >= 10000) this.applied.splice(0, 1000);
    this.applied.push(what);
  }

  // ---- to the agent ---------------------------------------------------------------

  /** Type `data` (a string, or a Uint8Array of raw bytes) into the terminal: sent in
   * order, what is typed while a request is on its way goes in the next one. */
  type(data) {
    if (this.closed || !data.length) return;
    this.outbox.push(typeof data === "string" ? { text: data } : { bytes: data });
    this.flush();
  }

  async flush() {
    if (this.sending || !this.outbox.length) return;
    this.sending = true;
    const batch = this.outbox;
    this.outbox = [];
    let body;
    if (batch.every((item) => item.text !== undefined)) {
      body = { data: batch.map((item) => item.text).join("") };
    } else {
      const parts = batch.map((item) => item.bytes || encoder.encode(item.text));
      let binary = "";
      for (const part of parts) for (const byte of part) binary += String.fromCharCode(byte);
      body = { data_b64: btoa(binary) };
    }
    try {
      // "latest" size policy: whoever types takes the terminal to their size
      await this.claimSize();
      await api("POST", agentPath(this.key, "/input"), body);
    } catch (err) {
      if (err instanceof ApiError && err.code === "busy") {
        this.outbox = batch.concat(this.outbox); // the agent reads slowly: again soon
        this.sending = false;
        setTimeout(() => this.flush(), 200);
        return;
      }
      this.on.notice(`Keys not sent: ${err.message}`);
    }
    this.sending = false;
    if (this.outbox.length) this.flush();
  }

  /** Ask for this browser's size (cols x rows); the terminal follows the latest. */
  async resize(cols, rows) {
    if (this.closed || !whole(cols, 2, 1000) || !whole(rows, 1, 1000)) return;
    this.wanted = { cols, rows };
    await this.claimSize(true);
  }

  /** Ask for this browser's size again when typing, if another client took the
   * terminal to theirs since (the size follows whoever resized or typed last). */
  async claimSize(always = false) {
    const wanted = this.wanted;
    if (!wanted || !this.page.can("send")) return;
    const got = this.answered;
    const taken = !got || !this.size || got.cols !== this.size.cols || got.rows !== this.size.rows;
    if (!always && !taken) return;
    try {
      const answer = await api("POST", agentPath(this.key, "/resize"), wanted);
      const cols = whole(answer && answer.cols, 1, 1000);
      const rows = whole(answer && answer.rows, 1, 1000);
      // a fixed size (--size) answers with itself: nothing to claim again
      this.answered = cols !== null && rows !== null ? { cols, rows } : null;
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 409)) {
        this.on.notice(`Not resized: ${err.message}`);
      }
    }
  }

  /** Send a signal (SIGINT, ...) to the terminal's foreground processes. */
  async signal(name) {
    try {
      await api("POST", agentPath(this.key, "/signal"), { signal: name });
      this.on.notice("");
    } catch (err) {
      this.on.notice(`Not sent: ${err.message}`);
    }
  }

  close() {
    this.closed = true;
    if (this.retry !== null) clearTimeout(this.retry);
    if (this.stream) this.stream.close();
  }
}
