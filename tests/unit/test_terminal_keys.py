"""The keys a pass-through attach keeps (agenthost.terminal.keys) and what it writes
around the agent's bytes (agenthost.terminal.local)."""

from __future__ import annotations

import pytest

from agenthost.config import parse_config
from agenthost.errors import ConfigError
from agenthost.terminal.keys import CTRL_C, KeyScanner, parse_detach_key
from agenthost.terminal.local import AlternateScreen, leave_sequence


@pytest.mark.parametrize(
    ("text", "name", "byte"),
    [
        ("ctrl-]", "ctrl-]", 0x1D),
        ("Ctrl-Q", "ctrl-q", 0x11),
        ("ctrl+a", "ctrl-a", 0x01),
        ("C-b", "ctrl-b", 0x02),
        ("^Q", "ctrl-q", 0x11),
        ("^\\", "ctrl-\\", 0x1C),
        ("control-_", "ctrl-_", 0x1F),
        ("  ctrl-^ ", "ctrl-^", 0x1E),
        ("ctrl-@", "ctrl-@", 0x00),
    ],
)
def test_key_names(text: str, name: str, byte: int) -> None:
    key = parse_detach_key(text)
    assert (key.name, key.byte) == (name, byte)
    assert key.prompt_key == "c-" + name[-1]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "not a key name"),
        ("]", "not a key name"),
        ("ctrl-", "not a key name"),
        ("ctrl-qq", "not a key name"),
        ("alt-q", "not a key name"),
        ("ctrl-1", "sends no control character"),
        ("ctrl-é", "sends no control character"),
        ("ctrl-?", "sends no control character"),
        ("ctrl-m", "Enter"),
        ("ctrl-j", "Enter"),
        ("ctrl-i", "Tab"),
        ("ctrl-h", "Backspace"),
        ("ctrl-[", "Escape"),
        ("ctrl-c", "interrupts"),
        ("ctrl-d", "end of input"),
        ("ctrl-\x00", "sends no control character"),
        ("x" * 10_000, "not a key name"),
    ],
)
def test_garbage_key_names(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_detach_key(text)


def test_a_key_name_that_is_no_string() -> None:
    with pytest.raises(ValueError):
        parse_detach_key(42)  # type: ignore[arg-type]


def test_scanner_finds_the_first_key_byte() -> None:
    scan = KeyScanner([parse_detach_key("ctrl-]")]).scan
    assert scan(b"hello") == (b"hello", False)
    assert scan(b"") == (b"", False)
    assert scan(b"ab\x1dcd\x1d") == (b"ab", True)
    assert scan(b"\x1d") == (b"", True)
    # other control keys go to the agent
    assert scan(b"\x03\x11\x1b[A") == (b"\x03\x11\x1b[A", False)


def test_scanner_with_ctrl_c_too() -> None:
    scan = KeyScanner([parse_detach_key("ctrl-q"), CTRL_C]).scan
    assert scan(b"ab\x03") == (b"ab", True)
    assert scan(b"ab\x11") == (b"ab", True)
    assert scan(b"\x1d") == (b"\x1d", False)


@pytest.mark.parametrize(
    "encoded",
    [
        b"\x1b[93;5u",  # kitty
        b"\x1b[93;5:1u",  # kitty, with the event type "press"
        b"\x1b[93;5:2u",  # repeat
        b"\x1b[93:125;5u",  # with a shifted key
        b"\x1b[93;69u",  # Caps Lock on
        b"\x1b[93;133u",  # Num Lock on
        b"\x1b[27;5;93~",  # xterm modifyOtherKeys
    ],
)
def test_scanner_finds_a_key_a_keyboard_protocol_encodes(encoded: bytes) -> None:
    scan = KeyScanner([parse_detach_key("ctrl-]")]).scan
    assert scan(b"ab" + encoded + b"cd") == (b"ab", True)


@pytest.mark.parametrize(
    "other",
    [
        b"\x1b[93;5:3u",  # released: the press detached already
        b"\x1b[93;7u",  # Ctrl+Alt
        b"\x1b[93;1u",  # no modifier
        b"\x1b[113;5u",  # Ctrl-Q
        b"\x1b[27;3;93~",  # Alt
        b"\x1b[93u",
        b"\x1b[;5u",
        b"\x1b[1;5A",  # Ctrl-Up
    ],
)
def test_scanner_leaves_other_encoded_keys(other: bytes) -> None:
    scan = KeyScanner([parse_detach_key("ctrl-]")]).scan
    assert scan(b"ab" + other) == (b"ab" + other, False)


def test_scanner_on_garbage() -> None:
    scan = KeyScanner([parse_detach_key("ctrl-]")]).scan
    junk = bytes(range(0x1D)) + bytes(range(0x1E, 256)) + b"\x1b[" * 1000 + b"9" * 10_000
    assert scan(junk) == (junk, False)
    assert scan(b"\x1b[" + b"9" * 5000 + b";5u") == (b"\x1b[" + b"9" * 5000 + b";5u", False)


def test_the_detach_key_in_config_toml() -> None:
    assert parse_config("").attach.detach_key == "ctrl-]"
    assert parse_config('[attach]\ndetach_key = "^Q"\n').attach.detach_key == "ctrl-q"
    with pytest.raises(ConfigError, match=r"attach\.detach_key: .*Enter"):
        parse_config('[attach]\ndetach_key = "ctrl-m"\n')
    with pytest.raises(ConfigError, match=r"attach\.detach_key"):
        parse_config("[attach]\ndetach_key = 3\n")
    with pytest.raises(ConfigError, match=r"attach\.detach: unknown key"):
        parse_config('[attach]\ndetach = "ctrl-q"\n')


def test_alternate_screen_from_the_bytes() -> None:
    screen = AlternateScreen()
    assert not screen.on
    screen.feed(b"hello\x1b[?1049h")
    assert screen.on
    screen.feed(b"\x1b[?1049l")
    assert not screen.on
    screen.feed(b"\x1b[?1;1049h")  # among other modes
    assert screen.on
    screen.feed(b"\x1bc")  # a reset
    assert not screen.on
    screen.feed(b"\x1b[?47h")
    assert screen.on
    screen.feed(b"\x1b[?1047l")
    assert not screen.on
    screen.feed(b"\x1b[?25h\x1b[?2004h")  # other modes
    assert not screen.on


def test_alternate_screen_across_writes() -> None:
    screen = AlternateScreen()
    whole = b"abc\x1b[?1049h" + b"x" * 100 + b"\x1b[?1049l" + b"\x1b[?1049h"
    for cut in range(len(whole) + 1):
        screen = AlternateScreen()
        screen.feed(whole[:cut])
        screen.feed(whole[cut:])
        assert screen.on, cut
    screen = AlternateScreen()
    for byte in b"\x1b[?1049hzz\x1b[?1049l":
        screen.feed(bytes([byte]))
    assert not screen.on


def test_alternate_screen_on_garbage() -> None:
    screen = AlternateScreen()
    screen.feed(b"\x1b[?" + b"1049;" * 10_000 + b"h")
    screen.feed(bytes(range(256)) * 100)
    screen.feed(b"\x1b" * 100_000)
    assert screen.on in (True, False)


def test_leave_sequence() -> None:
    main, alternate = leave_sequence(False), leave_sequence(True)
    assert b"\x1b[?1049l" in alternate and b"\x1b[?1049l" not in main
    for mode in (b"\x1b[?25h", b"\x1b[?1000l", b"\x1b[?1006l", b"\x1b[?2004l", b"\x1b[0m"):
        assert mode in main and mode in alternate
    # the scroll region is reset between a save and a restore of the cursor
    assert b"\x1b7\x1b[r\x1b8" in main
