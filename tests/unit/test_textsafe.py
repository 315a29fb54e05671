"""agenthost.textsafe: what agent text becomes before a terminal sees it.

A table of hostile inputs and what each becomes; the characters it escapes are
checked against Python's own Unicode tables; and, with random text, that the
notation can always be read back (nothing shown is ambiguous) and that nothing unsafe
is left in it.
"""

from __future__ import annotations

import json
import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wcwidth import wcswidth

from agenthost.textsafe import FORMAT, LINES, escape, escape_html, escape_json, is_safe, markers

BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]
MARKS = ["\u200e", "\u200f", "\u061c"]

TABLE = [
    # (what the agent printed, what is shown)
    ("a\x1b[2Kb", "a\\x1b[2Kb"),  # CSI erase line
    ("\x1b[1G\x1b[3A\x1b[2J", "\\x1b[1G\\x1b[3A\\x1b[2J"),  # cursor moves, clear screen
    ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # OSC 0 (window title), BEL-terminated
    ("\x1b]0;title\x1b\\", "\\x1b]0;title\\x1b\\"),  # ... ST-terminated
    (
        "\x1b]8;;https://e.example/\x1b\\x\x1b]8;;\x1b\\",
        "\\x1b]8;;https://e.example/\\x1b\\\\x\\x1b]8;;\\x1b\\",
    ),  # OSC 8 (a link whose text is "x")
    ("\x1b]52;c;cm0gLXJm\x07", "\\x1b]52;c;cm0gLXJm\\x07"),  # OSC 52: clipboard write
    ("\x1bP+q544e\x1b\\", "\\x1bP+q544e\\x1b\\"),  # DCS
    ("\x9b2K", "\\x9b2K"),  # C1 CSI
    ("\x9d0;t\x9c", "\\x9d0;t\\x9c"),  # C1 OSC and ST
    ("\x1b", "\\x1b"),  # a lone ESC
    ("a\x00b", "a\\x00b"),  # NUL
    ("rm -rf /\rls", "rm -rf /\\x0dls"),  # CR: would overwrite the line
    ("rm\b\b\bls", "rm\\x08\\x08\\x08ls"),  # backspace
    ("a\x7fb", "a\\x7fb"),  # DEL
    ("bell\x07", "bell\\x07"),
    ("a\nb\tc", "a\\x0ab\\x09c"),  # one line: newline and tab too
    ("\u2028\u2029", "\\u2028\\u2029"),  # line and paragraph separators
    ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),  # invisible characters
    ("tag\U000e0041", "tag\\U000e0041"),  # a language tag (hidden ASCII)
    ("lone \ud800", "lone \\ud800"),  # a lone surrogate (no terminal can be sent one)
    ("soft\xadhyphen", "soft\\xadhyphen"),
    # what stays as it is
    ("e\u0301 a\u0308", "e\u0301 a\u0308"),  # combining characters
    ("日本語のテキスト", "日本語のテキスト"),  # wide characters
    ("café ✓ naïve Ωμέγα עברית العربية 🙂", "café ✓ naïve Ωμέγα עברית العربية 🙂"),
    ("👩\u200d💻 می\u200cخواهم", "👩\u200d💻 می\u200cخواهم"),  # ZWJ, ZWNJ: kept
    ("\xa0nbsp ÿ \u00ff", "\xa0nbsp ÿ \u00ff"),
    # backslashes: as they are, unless an escape could be read in them
    ("a\\b C:\\temp\\new \\n \\d+", "a\\b C:\\temp\\new \\n \\d+"),
    ("\\x1b", "\\\\x1b"),  # the four characters \x1b: not an ESC
    ("\\u202e \\U0001f600", "\\\\u202e \\\\U0001f600"),
    ("\\\x1b", "\\\\\\x1b"),  # a backslash, then an ESC
    ("\\\\x", "\\\\\\\\x"),  # a run of backslashes before x: all doubled
    ("\\\\n", "\\\\n"),  # ... before anything else: as it is
    ("end\\", "end\\"),
]


@pytest.mark.parametrize(("text", "shown"), TABLE)
def test_hostile_input_and_what_it_becomes(text: str, shown: str) -> None:
    assert escape(text) == shown
    assert unescape(shown) == text  # and it reads back


@pytest.mark.parametrize("char", BIDI + MARKS)
def test_every_bidi_control_and_mark_is_escaped(char: str) -> None:
    assert escape(f"ls {char}txt.exe") == f"ls \\u{ord(char):04x}txt.exe"


def test_multi_line_text_keeps_newlines_and_tabs_only() -> None:
    text = "line 1\n\tline 2\r\n\x1b[2K"
    assert escape(text, LINES) == "line 1\n\tline 2\\x0d\n\\x1b[2K"
    assert escape(text, "\n") == "line 1\n\\x09line 2\\x0d\n\\x1b[2K"
    with pytest.raises(ValueError, match="only newline and tab"):
        escape(text, "\r")


def test_is_safe() -> None:
    assert is_safe("plain 日本 \\ text") and is_safe("a\nb", LINES)
    assert is_safe("\\x1b")  # an escape shown: nothing a terminal acts on
    assert not is_safe("a\nb") and not is_safe("\u202e") and not is_safe("\x1b")


def test_the_format_characters_are_pythons_but_the_joiners() -> None:
    """FORMAT is Unicode's category Cf (as this Python knows it) but U+200C and U+200D;
    a Python with a newer Unicode fails this until FORMAT is brought up to date."""
    ours = {chr(c) for c in range(sys.maxunicode + 1) if not is_safe(chr(c), LINES)}
    wanted = {
        chr(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Cc", "Cf", "Cs", "Zl", "Zp")
    } - {"\u200c", "\u200d", "\n", "\t"}
    assert ours == wanted, FORMAT


def test_json_documents_keep_their_data_and_lose_their_raw_controls() -> None:
    data = {"t\u202e": ["\x1b[2K \x9b2K \x7f \u2066x\u2069 \U000e0041 \ud800 日本", 1]}
    document = json.dumps(data, indent=2, ensure_ascii=False)
    assert not is_safe(document, LINES)  # json.dumps leaves C1, DEL, bidi raw
    safe = escape_json(document)
    assert is_safe(safe, LINES) and json.loads(safe) == data
    assert "\n  " in safe and "日本" in safe  # indentation and readable text stay
    assert "\\u202e" in safe and "\\udb40\\udc41" in safe  # a tag: a UTF-16 pair
    assert escape_json('{"a":"\x1b\r"}') == '{"a":"\\u001b\\u000d"}'  # even if raw


# --- the notation reads back: nothing shown is ambiguous --------------------------


def unescape(shown: str) -> str:
    """The text that ``shown`` shows, read as docs/cli.md says (an independent reader
    of the notation)."""
    out, i = [], 0
    while i < len(shown):
        if shown[i] != "\\":
            out.append(shown[i])
            i += 1
            continue
        j = i
        while j < len(shown) and shown[j] == "\\":
            j += 1
        run, after = j - i, shown[j : j + 1]
        if after and after in "xuU":  # doubled backslashes, then maybe an escape
            out.append("\\" * (run // 2))
            if run % 2:
                digits = {"x": 2, "u": 4, "U": 8}[after]
                out.append(chr(int(shown[j + 1 : j + 1 + digits], 16)))
                j += 1 + digits
        else:
            out.append("\\" * run)
        i = j
    return "".join(out)


SPICY = st.sampled_from(list("\\xuU0123456789abcdef\x1b\x9b\u202e\ud800\U000e0041\n\t\r "))
TEXT = st.text(st.one_of(st.characters(), SPICY), max_size=60)


@given(TEXT)
def test_any_text_reads_back_and_is_printable(text: str) -> None:
    for keep in ("", LINES):
        shown = escape(text, keep)
        assert unescape(shown) == text
        assert is_safe(shown, keep)
        categories = {unicodedata.category(c) for c in shown.replace("\n", "").replace("\t", "")}
        assert not categories & {"Cc", "Cs", "Zl", "Zp"}
        if "\n" not in shown and "\t" not in shown:
            assert wcswidth(shown) >= 0  # a terminal can print all of it


@given(st.recursive(TEXT, lambda inner: st.lists(inner) | st.dictionaries(TEXT, inner)))
def test_any_json_keeps_its_data(value: object) -> None:
    document = json.dumps(value, ensure_ascii=False, indent=1)
    safe = escape_json(document)
    assert json.loads(safe) == value
    assert is_safe(safe, LINES)


# --- HTML: the web's markers ------------------------------------------------------------


def test_html_shows_each_unsafe_character_as_a_marker() -> None:
    text = "<b>rm</b> -rf ~ #\u202etxt.exe\n\tx\x1b\U000e0041 👩\u200d💻 &"
    assert escape_html(text) == (
        "&lt;b&gt;rm&lt;/b&gt; -rf ~ #<span class='ctl'>⟨U+202E⟩</span>txt.exe\n\tx"
        "<span class='ctl'>⟨U+001B⟩</span><span class='ctl'>⟨U+E0041⟩</span> 👩\u200d💻 &amp;"
    )
    assert markers("Allow Ba\u202esh?") == "Allow Ba⟨U+202E⟩sh?"  # (a page's title)


@given(TEXT)
def test_html_holds_nothing_unsafe(text: str) -> None:
    assert is_safe(escape_html(text), LINES) and is_safe(markers(text), LINES)
    assert "<" not in escape_html(text).replace("<span class='ctl'>", "").replace("</span>", "")
