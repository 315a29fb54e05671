"""The pages of approval links (``/l/<token>``), as HTML text. Sans-IO: strings in,
strings out; :mod:`agenthost.web.links` serves them.

The pages need no script: the one button is a form that POSTs to the page's own
address. Everything that comes from an agent is escaped, and what hides in it or turns
it around (a bidi control, ESC) is a visible marker, ``⟨U+202E⟩``
(:func:`agenthost.textsafe.escape_html`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from html import escape
from typing import Final

from agenthost.textsafe import escape_html, markers

_STYLE: Final = """
:root { color-scheme: light dark; --ok: #1a7f37; --danger: #c62828; --muted: #6b7280; }
body { font: 16px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 34rem;
  padding: 1.2rem; }
h1 { font-size: 1.3rem; margin: 0 0 0.8rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.3rem 0.8rem; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
code { white-space: pre-wrap; overflow-wrap: anywhere; }
code, strong, dd { unicode-bidi: isolate; }
.ctl { border: 1px solid var(--danger); border-radius: 4px; color: var(--danger);
  padding: 0 3px; margin: 0 1px; font: 600 0.8em ui-monospace, monospace;
  unicode-bidi: isolate; direction: ltr; }
button { width: 100%; min-height: 48px; font-size: 1.1rem; font-weight: 600;
  border: none; border-radius: 8px; color: #fff; cursor: pointer; }
button.allow { background: var(--ok); }
button.deny { background: var(--danger); }
.why { color: var(--muted); font-size: 0.9rem; }
"""

_VERB: Final = {"allow": "Allow", "deny": "Deny"}
_DONE: Final = {"allow": "allowed", "deny": "denied", "cancelled": "withdrawn"}


@dataclass(frozen=True, slots=True)
class Asked:
    """What the page shows about the request a link answers."""

    agent_id: str
    request_id: str
    tool_name: str
    tool_input: str
    decision: str
    expires: int


def _page(title: str, *body: str) -> str:
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<meta name='robots' content='noindex'>"
        f"<title>{escape(markers(title))} - agenthost</title><link rel='icon' href='data:,'>"
        f"<style>{_STYLE}</style></head><body>" + "".join(body) + "</body></html>\n"
    )


def _until(expires: int, now: float) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(expires))
    minutes = max(0, int((expires - now) // 60))
    left = f"{minutes} min" if minutes < 120 else f"{minutes // 60} h"
    return f"{when} (in {left})"


def _facts(asked: Asked) -> str:
    rows = [
        ("Agent", escape(asked.agent_id)),
        ("Tool", escape_html(asked.tool_name)),
        (
            "Input",
            f"<code>{escape_html(asked.tool_input)}</code>" if asked.tool_input else "(none)",
        ),
        ("Request", escape_html(asked.request_id)),
    ]
    return "<dl>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def confirm_page(asked: Asked, now: float) -> str:
    """The page of a link followed by GET: what it would decide, and one button."""
    verb = _VERB.get(asked.decision, asked.decision)
    return _page(
        f"{verb} {asked.tool_name}?",
        f"<h1>{escape(verb)} <strong>{escape_html(asked.tool_name)}</strong>?</h1>",
        _facts(asked),
        f"<p>Decision: <strong id='decision'>{escape(verb.lower())}</strong>. "
        f"The link works once, until {escape(_until(asked.expires, now))}.</p>",
        "<form method='post'>",
        f"<button type='submit' class='{escape(asked.decision)}'>{escape(verb)}</button>",
        "</form>",
        "<p class='why'>Opening this page decided nothing; the button does.</p>",
    )


def done_page(asked: Asked) -> str:
    """The page after a link decided."""
    word = _DONE.get(asked.decision, asked.decision)
    return _page(
        word.capitalize(),
        f"<h1 id='outcome'>{escape(word.capitalize())}</h1>",
        _facts(asked),
        f"<p>The agent was told: {escape(word)} (by link).</p>",
    )


_HEADINGS: Final = {
    "malformed": "Not an approval link",
    "forged": "This link is not valid",
    "expired": "This link has expired",
    "used": "This link was used already",
    "answered": "Already answered",
    "gone": "Nothing to answer",
    "too_many_failures": "Too many bad links",
}


def refused_page(why: str, message: str, asked: Asked | None = None) -> str:
    """The page of a link that is not honoured, saying why (``why`` is the code)."""
    heading = _HEADINGS.get(why, "Refused")
    return _page(
        heading,
        f"<h1>{escape(heading)}</h1>",
        f"<p id='why' data-why='{escape(why)}'>{escape_html(message)}</p>",
        _facts(asked) if asked is not None else "",
    )
