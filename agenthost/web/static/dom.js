// Building the page's elements. Agent data only ever becomes text nodes (textContent),
// never markup: an agent can print anything.

/**
 * h("li", {class: "entry", dataset: {offset: 3}}, "text", child) -> an element.
 * Attributes starting with "on" are listeners; strings among the children become
 * text nodes; null, undefined and false children are skipped.
 */
export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "dataset") {
      for (const [key, v] of Object.entries(value)) node.dataset[key] = String(v);
    } else if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else if (name === "text") {
      node.textContent = String(value);
    } else if (value === true) {
      node.setAttribute(name, "");
    } else {
      node.setAttribute(name, String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else if (child instanceof Node) node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
  }
}

/** Replace every child of `node`. */
export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

/** "3 s ago", "5 min ago", "2 h ago", else the date; "" for no date. */
export function ago(ms, now = Date.now()) {
  if (!Number.isFinite(ms)) return "";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 5) return "just now";
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(ms).toLocaleDateString();
}

/** Milliseconds of an RFC 3339 string, NaN when it is not one. */
export function when(text) {
  return typeof text === "string" ? Date.parse(text) : NaN;
}

/** "$0.0004" under a dollar, "$1.25" above; "" when unknown. */
export function dollars(cost) {
  if (typeof cost !== "number" || !Number.isFinite(cost)) return "";
  return cost < 1 ? `$${cost.toFixed(4)}` : `$${cost.toFixed(2)}`;
}

/** Clock time of an RFC 3339 string, for one line of a conversation. */
export function clock(text) {
  const ms = when(text);
  return Number.isFinite(ms)
    ? new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : "";
}

/**
 * The characters that show nothing, act on text or turn it around, as
 * agenthost/textsafe.py has them: control characters, format characters (bidi
 * controls and marks, zero-width and invisible ones, language tags) but the zero-width
 * joiner and non-joiner (emoji and several scripts need them), line and paragraph
 * separators, lone surrogates. Newline and tab are not among them here: the page shows
 * lines.
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;
const KEPT = new Set(["\n", "\t", "\u200c", "\u200d"]);

/**
 * `text` as the children of an element, with each invisible character (see INVISIBLE)
 * a visible marker in its place, `⟨U+202E⟩` in a span of class "ctl": in what a person
 * decides on (a permission request, a tool call), a reversed-looking command shows what
 * reverses it.
 */
export function visible(text) {
  const value = String(text);
  const out = [];
  let last = 0;
  for (const match of value.matchAll(INVISIBLE)) {
    const char = match[0];
    if (KEPT.has(char)) continue;
    if (match.index > last) out.push(value.slice(last, match.index));
    const code = char.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    const title = `U+${code}: a character that shows nothing or turns text around`;
    out.push(h("span", { class: "ctl", title }, `⟨U+${code}⟩`));
    last = match.index + char.length;
  }
  if (last < value.length) out.push(value.slice(last));
  return out;
}
