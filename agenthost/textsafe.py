"""Agent text made safe to show: on a terminal, in JSON, in HTML, and which characters
need it.

An agent prints what it likes, and a terminal acts on some of it: ESC and C1 controls
start sequences that erase lines, move the cursor, set the window title, write the
clipboard (OSC 52) or plant links (OSC 8); CR, backspace and DEL overwrite what was
shown; bidi controls (U+202E...) make text read in another order than it runs.
Everything agenthost shows of an agent goes through :func:`escape` (the CLI's text),
:func:`escape_json` (its JSON) or :func:`escape_html` (the approval links' pages); the
web page has the same set of characters in ``static/dom.js``. Sans-IO: strings in,
strings out.

Unsafe: the control characters (Unicode category Cc: C0, DEL, C1), the format
characters (Cf: bidi controls and marks, zero-width and invisible characters, language
tags), the line and paragraph separators (Zl, Zp), and lone surrogates (Cs, which no
terminal can be sent). Kept: everything else, combining marks and wide characters
included, and the zero-width joiner and non-joiner (U+200C, U+200D), which emoji and
several scripts need to be written right.

The notation (docs/cli.md, "How agent text is shown"): each unsafe character becomes
``\\xHH`` (code points up to FF), ``\\uHHHH`` (up to FFFF) or ``\\UHHHHHHHH``, in lower
case, as Python writes them. A backslash of the text stays one backslash, except where
an escape could be read in it: a run of backslashes right before ``x``, ``u``, ``U`` or
an escape is doubled. So ``\\x1b`` shown is always an ESC the text held, ``\\\\x1b``
shown is the four characters ``\\x1b`` of the text, and a Windows path or a regular
expression shows as written.
"""

from __future__ import annotations

import html
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

CONTROLS: Final = "\x00-\x1f\x7f-\x9f"
"""Category Cc: the C0 controls, DEL and the C1 controls."""
FORMAT: Final = (
    "\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200e\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
)
"""Category Cf (Unicode 14, Python 3.11's) but U+200C and U+200D: bidi controls and
marks, zero-width and invisible characters, language tags, soft hyphen."""
SEPARATORS: Final = "\u2028\u2029"
"""Categories Zl and Zp: the line and paragraph separators."""
SURROGATES: Final = "\ud800-\udfff"
"""Category Cs: halves of UTF-16 pairs, which JSON may carry alone."""

UNSAFE: Final = CONTROLS + FORMAT + SEPARATORS + SURROGATES
"""Every character :func:`escape` shows escaped (a regular expression class's body)."""
LINES: Final = "\n\t"
"""What multi-line text keeps: newline and tab (``keep=LINES``)."""

_ESCAPE_START: Final = "xuU"


def _code(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _class(keep: str) -> str:
    body = UNSAFE
    if keep:  # the kept controls leave C0: split its range around each of them
        kept = sorted(ord(c) for c in keep)
        ranges, start = [], 0x00
        for code in kept:
            if code > start:
                ranges.append(f"\\x{start:02x}-\\x{code - 1:02x}")
            start = code + 1
        ranges.append(f"\\x{start:02x}-\\x1f")
        body = "".join(ranges) + UNSAFE[len("\x00-\x1f") :]
    return body


_PATTERNS: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {}


def _patterns(keep: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """What :func:`escape` replaces, and the unsafe characters alone, for ``keep``."""
    patterns = _PATTERNS.get(keep)
    if patterns is None:
        if not set(keep) <= set(LINES):
            raise ValueError(f"only newline and tab can be kept, not {keep!r}")
        body = _class(keep)
        # a run of backslashes an escape could be read in, or one unsafe character
        replaced = re.compile(f"(\\\\+)(?=[{_ESCAPE_START}{body}])|[{body}]")
        patterns = _PATTERNS[keep] = (replaced, re.compile(f"[{body}]"))
    return patterns


def _replace(match: re.Match[str]) -> str:
    run = match.group(1)
    return run * 2 if run is not None else _code(match.group())


def escape(text: str, keep: str = "") -> str:
    """``text`` with every unsafe character shown as an escape (see the module's
    notation). ``keep``: the controls kept as they are, of newline and tab (``LINES``
    where multi-line text is shown); by default everything is on one line."""
    return _patterns(keep)[0].sub(_replace, text)


def is_safe(text: str, keep: str = "") -> bool:
    """Whether ``text`` holds no unsafe character (but those of ``keep``): whether a
    terminal may be sent it as it is."""
    return _patterns(keep)[1].search(text) is None


def _json_code(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON writes the rest as a UTF-16 pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def escape_json(document: str) -> str:
    """JSON text with every unsafe character left raw in it written as a ``\\uXXXX``
    escape (JSON's own notation): the same document once parsed, but safe on a
    terminal. (``json.dumps`` escapes the C0 controls but, with ``ensure_ascii=False``,
    leaves DEL, C1 and bidi controls raw; newline and tab, JSON's whitespace, stay.)"""
    return _patterns(LINES)[1].sub(_json_code, document)


def _marker(char: str) -> str:
    return f"⟨U+{ord(char):04X}⟩"


def markers(text: str) -> str:
    """``text`` with each unsafe character but newline and tab shown as a marker,
    ``⟨U+202E⟩``: the web's notation, for a browser (a page's title), not a terminal."""
    return _patterns(LINES)[1].sub(lambda match: _marker(match.group()), text)


def escape_html(text: str) -> str:
    """``text`` as HTML (``html.escape``), each unsafe character but newline and tab a
    marker in a span of class ``ctl``, ``<span class='ctl'>⟨U+202E⟩</span>``, as the
    page's ``visible()`` (static/dom.js) draws it: what hides in a command, or turns it
    around, shows where it is."""
    parts, last = [], 0
    for match in _patterns(LINES)[1].finditer(text):
        parts.append(html.escape(text[last : match.start()]))
        parts.append(f"<span class='ctl'>{_marker(match.group())}</span>")
        last = match.end()
    parts.append(html.escape(text[last:]))
    return "".join(parts)


__all__ = ["LINES", "UNSAFE", "escape", "escape_html", "escape_json", "is_safe", "markers"]
