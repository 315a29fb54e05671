// A terminal agent (`--agent pty`): its screen in xterm.js (vendor/xterm, served by the
// gateway, never from elsewhere), keys to it with the send scope, the size of this
// browser sent as it changes; on a narrow screen (a phone) the screen as text, an input
// line and the keys a TUI needs. termlink.js carries the bytes, each once.
//
// Nothing the agent writes runs or becomes markup: xterm.js draws it in its own rows
// (as text), the title it sets is shown as text, its links open only http(s) pages in
// a new tab without a way back (noopener), and the queries a terminal would answer
// (device attributes, cursor position, colours, modes) are not answered from here: an
// answer would be typed into the agent by every browser watching, again at every
// replay of the screen.

import { stateClass } from "./conversation.js";
import { h, replace, visible } from "./dom.js";
import { TerminalLink } from "./termlink.js";

/** A screen at most this wide shows the text view (phones). */
export const NARROW = "(max-width: 640px)";

const KEYS = [
  ["Esc", "\x1b", "esc"],
  ["Tab", "\t", "tab"],
  ["←", "\x1b[D", "left", "\x1bOD"],
  ["↑", "\x1b[A", "up", "\x1bOA"],
  ["↓", "\x1b[B", "down", "\x1bOB"],
  ["→", "\x1b[C", "right", "\x1bOC"],
  ["Ctrl-C", "\x03", "ctrl-c"],
];
const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGTSTP", "SIGCONT", "SIGKILL"];

/** The title the program set, as text (what hides in it shown as a marker). */
function showTitle(el, title) {
  replace(el, ...visible(title.slice(0, 200)));
  el.title = title.slice(0, 1000);
}

/** The head of an agent's page: back, name, title, state (`state` its first). */
function head(key, state) {
  const name = h("span", { class: "name" }, key);
  const title = h("span", { class: "term-title muted", id: "term-title" });
  const badge = h("span", { class: "badge", id: "agent-state" }, "…");
  const el = h(
    "div",
    { class: "agent-head" },
    h(
      "a",
      { href: "#/", class: "back", "aria-label": "All agents" },
      "‹",
      h("span", { class: "word" }, "Agents")
    ),
    h("div", { class: "agent-title" }, name, title, h("span", { class: "spacer" }), badge)
  );
  function setState(text) {
    badge.textContent = text;
    badge.className = `badge ${stateClass(text)}`;
    badge.dataset.state = text;
  }
  if (typeof state === "string" && state) setState(state);
  return { el, name, title, badge, setState };
}

/**
 * The view of terminal agent `key`, whose state is `state` (its status said
 * `terminal`); returns { close() }. A phone turned sideways gets the other view.
 */
export function showTerminal(page, key, state) {
  const narrow = window.matchMedia(NARROW);
  const show = () => (narrow.matches ? phoneView : xtermView)(page, key, state);
  let view = show();
  const swap = () => {
    state = view.state();
    view.close();
    view = show();
  };
  narrow.addEventListener("change", swap);
  return {
    close() {
      narrow.removeEventListener("change", swap);
      view.close();
    },
  };
}

/** The controls below the screen: a notice line, and signals for a control token. */
function dock(page, link, ...more) {
  const notice = h("p", { class: "error", id: "term-error", role: "alert" });
  const select = h(
    "select",
    { id: "signal-name", "aria-label": "Signal" },
    SIGNALS.map((name) => h("option", { value: name }, name))
  );
  const signal = h(
    "div",
    { class: "actions", hidden: !page.can("control") },
    select,
    h(
      "button",
      { type: "button", id: "signal", onclick: () => link().signal(select.value) },
      "Send signal"
    )
  );
  const readOnly = h(
    "p",
    { class: "muted read-only", id: "read-only", hidden: page.can("send") },
    "Read only: this token may watch, not type (a token with the send scope can)."
  );
  return { el: h("div", { class: "dock term-dock" }, notice, readOnly, ...more, signal), notice };
}

// ---- xterm.js ---------------------------------------------------------------------

/** Queries a terminal answers, which this page leaves unanswered (see the top). */
function leaveQueriesUnanswered(term) {
  const csi = [
    { final: "c" }, // DA1
    { prefix: ">", final: "c" }, // DA2
    { prefix: "=", final: "c" }, // DA3
    { final: "n" }, // DSR: status, cursor position
    { prefix: "?", final: "n" }, // DECDSR
    { intermediates: "$", final: "p" }, // DECRQM
    { prefix: "?", intermediates: "$", final: "p" },
    { prefix: ">", final: "q" }, // XTVERSION
    { prefix: "?", final: "u" }, // kitty keyboard flags
    { final: "t" }, // window reports
  ];
  for (const id of csi) term.parser.registerCsiHandler(id, () => true);
  term.parser.registerDcsHandler({ intermediates: "$", final: "q" }, () => true); // DECRQSS
  term.parser.registerDcsHandler({ intermediates: "+", final: "q" }, () => true); // XTGETTCAP
  for (const osc of [4, 10, 11, 12, 17, 19, 104, 110, 111, 112]) {
    // a colour query ("?") is answered by xterm.js; a colour set is only drawn
    term.parser.registerOscHandler(osc, (data) => data.includes("?"));
  }
  term.parser.registerOscHandler(52, () => true); // clipboard: never read, never written
}

/** A link the agent printed (OSC 8, or a URL): http(s) only, in a new tab, noopener. */
function openLink(event, uri) {
  let url;
  try {
    url = new URL(uri);
  } catch (err) {
    return;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return;
  window.open(url.href, "_blank", "noopener,noreferrer");
}

function xtermView(page, key, state) {
  const top = head(key, state);
  // xterm.js's own element goes in this box, which the fit addon measures
  const screenEl = h("div", { class: "term-wrap", id: "terminal" });
  let link = null;
  const { el: dockEl, notice } = dock(page, () => link);
  page.app.classList.add("terminal-main");
  replace(page.app, top.el, screenEl, dockEl);

  let term = null;
  let fit = null;
  let observer = null;
  let closed = false;
  let fitting = null;

  link = new TerminalLink(page, key, {
    screen: (screen) => {
      if (!term) return;
      term.reset();
      term.resize(screen.cols, screen.rows);
      term.write(screen.dump);
      showTitle(top.title, screen.title);
    },
    text: (text) => term && term.write(text),
    size: (cols, rows) => term && term.resize(cols, rows),
    state: top.setState,
    notice: (text) => (notice.textContent = text),
  });

  /** Ask for the size that fills the page (after the layout settled). */
  function sendSize() {
    if (fitting !== null || !fit) return;
    fitting = setTimeout(() => {
      fitting = null;
      const size = fit && fit.proposeDimensions();
      if (size && Number.isFinite(size.cols) && Number.isFinite(size.rows)) {
        link.resize(size.cols, size.rows);
      }
    }, 100);
  }

  Promise.all([import("./vendor/xterm/xterm.mjs"), import("./vendor/xterm/addon-fit.mjs")])
    .then(([{ Terminal }, { FitAddon }]) => {
      if (closed) return;
      term = new Terminal({
        cols: 80,
        rows: 24,
        scrollback: 1000,
        disableStdin: !page.can("send"),
        cursorBlink: false,
        fontFamily: 'ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace',
        fontSize: 14,
        linkHandler: { activate: openLink, allowNonHttpProtocols: false },
      });
      leaveQueriesUnanswered(term);
      fit = new FitAddon();
      term.loadAddon(fit);
      term.open(screenEl);
      if (page.can("send")) {
        term.onData((data) => link.type(data));
        term.onBinary((data) => {
          const bytes = new Uint8Array(data.length);
          for (let i = 0; i < data.length; i++) bytes[i] = data.charCodeAt(i) & 0xff;
          link.type(bytes);
        });
        term.focus();
        // a click beside a terminal smaller than its box types into it too
        screenEl.addEventListener("click", () => term.focus());
      }
      term.onTitleChange((title) => showTitle(top.title, title));
      // what the tests (and a curious person's console) read: the buffer as text
      screenEl.terminalView = Object.freeze({
        lines: () => {
          const buffer = term.buffer.active;
          const out = [];
          for (let row = 0; row < term.rows; row++) {
            const line = buffer.getLine(buffer.baseY + row);
            // as host.screen's lines: trailing spaces stripped (written ones too)
            out.push(line ? line.translateToString(true).replace(/ +$/, "") : "");
          }
          return out;
        },
        size: () => ({ cols: term.cols, rows: term.rows }),
        cursor: () => ({ col: term.buffer.active.cursorX, row: term.buffer.active.cursorY }),
        offset: () => link.lastOffset,
        applied: () => link.applied.slice(),
        pending: () => new Promise((resolve) => term.write("", resolve)),
      });
      screenEl.dataset.ready = "1";
      if (page.can("send")) {
        observer = new ResizeObserver(sendSize);
        observer.observe(screenEl);
      }
      link.start();
    })
    .catch((err) => {
      notice.textContent = `The terminal cannot start: ${err.message}`;
    });

  return {
    state: () => top.badge.dataset.state,
    close() {
      closed = true;
      if (fitting !== null) clearTimeout(fitting);
      if (observer) observer.disconnect();
      link.close();
      if (term) term.dispose();
      page.app.classList.remove("terminal-main");
    },
  };
}

// ---- a phone: the screen as text ----------------------------------------------------

/** Whether a screen's modes (its dump) put the cursor keys in application mode. */
function applicationCursor(dump) {
  let on = false;
  for (const match of dump.matchAll(/\x1b\[\?([0-9;]*)([hl])/g)) {
    if (match[1].split(";").includes("1")) on = match[2] === "h";
  }
  return on;
}

function phoneView(page, key, state) {
  const top = head(key, state);
  const text = h("pre", { class: "screen-text", id: "screen-text", "aria-live": "off" });
  let link = null;
  let appCursor = false;
  const field = h("input", {
    id: "term-input",
    type: "text",
    autocomplete: "off",
    autocapitalize: "off",
    spellcheck: "false",
    enterkeyhint: "send",
    placeholder: "Type, then Enter",
    "aria-label": "Type into the terminal",
  });
  const enter = h("button", { type: "submit", class: "primary", id: "key-enter" }, "⏎");
  const form = h("form", { class: "composer term-line", id: "term-line" }, field, enter);
  const keys = h(
    "div",
    { class: "term-keys", id: "term-keys" },
    KEYS.map(([label, seq, name, app]) =>
      h(
        "button",
        {
          type: "button",
          class: "key",
          id: `key-${name}`,
          onclick: () => link.type(app && appCursor ? app : seq),
        },
        label
      )
    )
  );
  const canSend = page.can("send");
  form.hidden = !canSend;
  keys.hidden = !canSend;
  const { el: dockEl, notice } = dock(page, () => link, form, keys);
  replace(page.app, top.el, text, dockEl);

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    link.type(`${field.value}\r`);
    field.value = "";
  });

  // The text follows the screen: asked for again after output, at most every 250 ms.
  let timer = null;
  let last = 0;
  function later() {
    if (timer !== null) return;
    timer = setTimeout(() => {
      timer = null;
      last = Date.now();
      link.paint();
    }, Math.max(0, 250 - (Date.now() - last)));
  }

  link = new TerminalLink(page, key, {
    screen: (screen) => {
      text.textContent = screen.lines.join("\n");
      text.dataset.offset = String(screen.offset);
      showTitle(top.title, screen.title);
      appCursor = applicationCursor(screen.dump);
    },
    text: later,
    size: later,
    state: top.setState,
    notice: (message) => (notice.textContent = message),
  });
  link.start();
  return {
    state: () => top.badge.dataset.state,
    close() {
      if (timer !== null) clearTimeout(timer);
      link.close();
    },
  };
}
