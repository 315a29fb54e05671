// The gateway's HTTP API and its event streams, as the page uses them. The session
// cookie (HttpOnly, set by POST /api/login) authenticates every request: the page
// never holds the token after logging in.

export class ApiError extends Error {
  constructor(status, body) {
    const text = body && typeof body.error === "string" ? body.error : `HTTP ${status}`;
    super(text);
    this.status = status;
    this.code = body && typeof body.code === "string" ? body.code : "";
  }
}

let onUnauthorized = () => {};

/** What to do when the gateway says 401 (the session is gone): show the login. */
export function setUnauthorizedHandler(fn) {
  onUnauthorized = fn;
}

/** A JSON request; resolves with the parsed body (null for 204), throws ApiError. */
export async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, { error: "the gateway cannot be reached", code: "network" });
  }
  let data = null;
  const text = await response.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch (err) {
      data = null;
    }
  }
  if (!response.ok) {
    const error = new ApiError(response.status, data);
    if (response.status === 401 && path !== "/api/login") onUnauthorized(error);
    throw error;
  }
  return data;
}

/** The path of one agent's API (the key URL-encoded: remote keys hold `@` and `:`). */
export function agentPath(key, rest = "") {
  return `/api/agents/${encodeURIComponent(key)}${rest}`;
}

/**
 * An EventSource that comes back by itself. When its connection ends or fails, this
 * closes it and opens a new one after a pause (short at first, then longer), at the
 * URL `url()` gives then: a stream resumes with ?after= the last offset shown, which
 * does not depend on the browser's own retry (and its Last-Event-ID header, which the
 * gateway also honours). `check()` runs before a reopen and may return false to stop
 * (e.g. the session is gone). `status(connected)` tells the page whether it is live.
 */
export class Stream {
  constructor({ url, handlers, status, check }) {
    this.url = url;
    this.handlers = handlers;
    this.status = status || (() => {});
    this.check = check || (async () => true);
    this.source = null;
    this.timer = null;
    this.failures = 0;
    this.closed = false;
    this.open();
  }

  open() {
    if (this.closed) return;
    const source = new EventSource(this.url(), { withCredentials: true });
    this.source = source;
    source.onopen = () => {
      this.failures = 0;
      this.status(true);
    };
    source.onerror = () => {
      if (this.closed || source !== this.source) return;
      this.status(false);
      this.reopenLater();
    };
    for (const [type, handler] of Object.entries(this.handlers)) {
      source.addEventListener(type, (event) => {
        if (source === this.source && !this.closed) handler(event);
      });
    }
  }

  reopenLater() {
    this.source.close();
    this.failures += 1;
    const pause = Math.min(250 * 2 ** (this.failures - 1), 4000);
    this.timer = setTimeout(async () => {
      this.timer = null;
      let go = false;
      try {
        go = await this.check();
      } catch (err) {
        go = true; // the gateway is down: keep trying
      }
      if (go) this.open();
    }, pause);
  }

  close() {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    if (this.source) this.source.close();
  }
}
