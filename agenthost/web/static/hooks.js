// The overview's "Hooks" section: each signed webhook (GET /api/hooks), where its
// deliveries go and how its newest ones went. Hidden when there is none. Everything of
// a hook or a run becomes text nodes: a payload's sender chose part of it.

import { api } from "./api.js";
import { ago, h, replace, when } from "./dom.js";

/** How often the section asks again while the overview is on screen (ms). */
const POLL_MS = 15000;

function isObject(value) {
  return Boolean(value) && typeof value === "object" && !Array.isArray(value);
}

/** Where a hook's deliveries go, in words. */
export function targetText(target) {
  if (!isObject(target)) return "";
  if (typeof target.agent_id === "string") return `→ ${target.agent_id}`;
  if (isObject(target.new)) return `→ a new ${target.new.agent || "demo"} agent each`;
  return "";
}

function delivery(run, now) {
  const at = when(run.started_at);
  return h(
    "li",
    { class: `delivery ${typeof run.result === "string" ? run.result : ""}` },
    h("span", { class: "result" }, String(run.result ?? "")),
    " ",
    h("span", { class: "muted", title: run.started_at || "" }, ago(at, now)),
    run.agent_id ? h("span", { class: "muted" }, ` · ${run.agent_id}`) : null,
    run.reason ? h("span", { class: "error" }, ` · ${run.reason}`) : null
  );
}

function item(hook, now) {
  const events = Array.isArray(hook.events) && hook.events.length ? hook.events.join(", ") : "every event";
  const runs = Array.isArray(hook.deliveries) ? hook.deliveries.slice(0, 3) : [];
  return h(
    "li",
    { class: "hook", dataset: { name: String(hook.name) } },
    h(
      "div",
      { class: "line1" },
      h("span", { class: "name" }, String(hook.name)),
      " ",
      h("span", { class: "muted" }, hook.error ? "unusable" : `${targetText(hook.target)} (${events})`)
    ),
    hook.error ? h("div", { class: "error" }, String(hook.error)) : null,
    runs.length ? h("ul", { class: "deliveries" }, runs.map((run) => delivery(run, now))) : null
  );
}

/** The section, kept up to date until close(); appended to `parent`. */
export function hooksSection(parent) {
  const list = h("ul", { class: "hooks", id: "hooks" });
  const section = h("section", { id: "hooks-section", hidden: true }, h("h2", { class: "title" }, "Hooks"), list);
  parent.appendChild(section);
  let closed = false;

  async function poll() {
    let answer;
    try {
      answer = await api("GET", "/api/hooks");
    } catch (err) {
      return; // the next poll tries again; a 401 has sent the page to the login already
    }
    if (closed || !isObject(answer) || !Array.isArray(answer.hooks)) return;
    const now = Date.now();
    section.hidden = answer.hooks.length === 0;
    replace(list, answer.hooks.filter(isObject).map((hook) => item(hook, now)));
  }

  poll();
  const timer = setInterval(poll, POLL_MS);
  return {
    close() {
      closed = true;
      clearInterval(timer);
    },
  };
}
