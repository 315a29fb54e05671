// The page: log in with a token, then the overview of every agent (#/) or one agent's
// conversation (#/agent/KEY). Hash routes, so Back works and a link can be shared
// (a link never holds a token).

import { api, ApiError, setUnauthorizedHandler } from "./api.js";
import { h, replace } from "./dom.js";
import { AgentList, showOverview } from "./overview.js";
import { showAgent } from "./agent.js";

const app = document.getElementById("app");
const conn = document.getElementById("conn");
const whoami = document.getElementById("whoami");
const attention = document.getElementById("attention");
const logoutButton = document.getElementById("logout");

/** Who is logged in: {name, scopes} from GET /api/me, or null. */
let me = null;
/** The view on screen: an object with close(), or null. */
let view = null;
/** Every agent, live while logged in (an AgentList), or null. */
let agents = null;
/** A refresh of the list of agents to come (a timer), or null. */
let refreshing = null;
/** The page's streams that are not connected now, by name. */
const down = new Set();

/** What the page's views share. */
const page = {
  app,
  get me() {
    return me;
  },
  can(scope) {
    if (!me || !Array.isArray(me.scopes)) return false;
    return me.scopes.includes(scope) || me.scopes.includes("admin");
  },
  /** Stream `name` is connected (live true) or trying to be. */
  connection(name, live) {
    if (live) down.delete(name);
    else down.add(name);
    conn.hidden = down.size === 0;
    conn.textContent = down.size ? "reconnecting…" : "";
  },
  loggedOut,
  /** Something changed that the list of agents shows: ask for it soon (once for a
   * burst of changes, e.g. the replay of an agent's events). */
  agentsChanged() {
    if (!agents || refreshing !== null) return;
    refreshing = setTimeout(() => {
      refreshing = null;
      if (agents) agents.poll();
    }, 300);
  },
};

function closeView() {
  if (view) view.close();
  view = null;
  page.connection("agent", true);
}

/** Who needs the user, whatever view is open: the top bar and the tab's title. */
function showAttention(rows) {
  const needing = rows.filter((row) => row.needsYou).length;
  document.title = needing ? `(${needing}) agenthost` : "agenthost";
  attention.hidden = needing === 0;
  attention.textContent = needing === 1 ? "1 needs you" : `${needing} need you`;
}

function loggedOut() {
  me = null;
  closeView();
  if (agents) agents.close();
  agents = null;
  page.connection("agents", true);
  attention.hidden = true;
  document.title = "agenthost";
  whoami.textContent = "";
  logoutButton.hidden = true;
  showLogin();
}

function showLogin(message = "") {
  const field = h("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "current-password",
    autocapitalize: "off",
    spellcheck: "false",
    required: true,
    placeholder: "token",
  });
  const error = h("p", { class: "error", id: "login-error", role: "alert" }, message);
  const submit = h("button", { type: "submit", class: "primary" }, "Log in");
  const form = h(
    "form",
    { class: "login", id: "login" },
    h("h1", {}, "Log in"),
    h("label", { for: "token" }, "Access token"),
    field,
    submit,
    error,
    h(
      "p",
      { class: "hint" },
      "The admin token was printed once, when the gateway first started. Make another " +
        "(it may send to agents and answer them) with ",
      // the command agenthost/cli/web.py MORE_TOKENS names too (a test compares them)
      h("code", {}, "agenthost web token add NAME --scope send --scope respond"),
      "."
    )
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    submit.disabled = true;
    try {
      await api("POST", "/api/login", { token: field.value });
      field.value = "";
      await start();
    } catch (err) {
      error.textContent =
        err instanceof ApiError && err.status === 401
          ? "That token is not valid."
          : `Cannot log in: ${err.message}`;
      field.select();
    } finally {
      submit.disabled = false;
    }
  });
  replace(app, form);
  field.focus();
}

function route() {
  closeView();
  if (!me) return;
  const hash = location.hash || "#/";
  const match = /^#\/agent\/(.+)$/.exec(hash);
  if (match) {
    let key;
    try {
      key = decodeURIComponent(match[1]);
    } catch (err) {
      key = match[1];
    }
    agents.watch(false); // the agent's own stream is the one this page holds
    view = showAgent(page, key);
  } else {
    agents.watch(true);
    view = showOverview(page, agents);
    // The list's stream may outlive the session (a revoked token): ask whether it
    // still holds, so a dead session goes back to the login at once.
    api("GET", "/api/me").catch(() => {});
  }
}

async function start() {
  try {
    me = await api("GET", "/api/me");
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      loggedOut();
      return;
    }
    replace(
      app,
      h("p", { class: "error" }, `The gateway does not answer: ${err.message}`),
      h("button", { type: "button", onclick: () => start() }, "Try again")
    );
    return;
  }
  whoami.textContent = me && typeof me.name === "string" ? me.name : "";
  logoutButton.hidden = false;
  if (!agents) {
    agents = new AgentList(page);
    agents.subscribe(showAttention);
  }
  route();
}

logoutButton.addEventListener("click", async () => {
  try {
    await api("POST", "/api/logout");
  } catch (err) {
    // logged out either way: the page forgets the session
  }
  loggedOut();
});

setUnauthorizedHandler(() => {
  if (me) loggedOut();
});
window.addEventListener("hashchange", () => {
  if (me) route();
});
start();
