"""What the CLI's fast path takes as its own (agenthost/cli/fast.py) and what it leaves
to click, and the colours it prints without click."""

from __future__ import annotations

import click
import pytest

from agenthost.cli.fast import parse
from agenthost.cli.views import Style


@pytest.mark.parametrize(
    ("argv", "args", "values"),
    [
        (["status", "a1"], ["a1"], {}),
        (["status", "--json", "a1"], ["a1"], {}),
        (["ping", "a1", "--home", "/tmp/h"], ["a1"], {"--home": "/tmp/h"}),
        (["pending", "a1", "--json", "--json"], ["a1"], {}),
        (["send", "a1", "hello", "there"], ["a1", "hello", "there"], {}),
        (["send", "a1", "-"], ["a1", "-"], {}),
        (["send", "a1", "x", "--key", "k"], ["a1", "x"], {"--key": "k"}),
        (
            ["respond", "a1", "r1", "deny", "--message", "no"],
            ["a1", "r1", "deny"],
            {"--message": "no"},
        ),
        (["respond", "a1", "r1", "allow", "--session"], ["a1", "r1", "allow"], {}),
    ],
)
def test_plain_command_lines_are_the_fast_paths(
    argv: list[str], args: list[str], values: dict[str, str]
) -> None:
    parsed = parse(argv)
    assert parsed is not None and parsed.args == args and parsed.values == values
    assert parsed.as_json == ("--json" in argv)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["list"],
        ["attach", "a1"],
        ["status"],
        ["status", "a1", "a2"],
        ["status", "a1", "--help"],
        ["status", "-h", "a1"],
        ["status", "a1", "--remote", "host"],
        ["status", "a1", "--home"],
        ["status", "a1", "--home", "--json"],
        ["status", "a1", "--home", "/a", "--home", "/b"],
        ["status", "a1", "--home=/tmp"],
        ["status", "--", "a1"],
        ["status", "a1", "--bogus"],
        ["send", "a1"],
        ["send", "a1", "-n"],
        ["send", "a1", "x", "--key"],
        ["respond", "a1", "r1"],
        ["respond", "a1", "r1", "maybe"],
        ["respond", "a1", "r1", "deny", "--session"],
        ["respond", "a1", "r1", "allow", "--input", "{}"],
        ["respond", "a1", "r1", "allow", "--option", "o1"],
        ["\x00", "\udcff"],
        ["status", "\x1b[31m", "--\udcff"],
    ],
)
def test_anything_else_is_clicks(argv: list[str]) -> None:
    assert parse(argv) is None


def test_the_colours_are_clicks_bytes() -> None:
    on, off = Style(True), Style(False)
    for name, kw in [
        ("dim", {"dim": True}),
        ("bold", {"bold": True}),
        ("red", {"fg": "red"}),
        ("green", {"fg": "green"}),
        ("yellow", {"fg": "yellow"}),
        ("cyan", {"fg": "cyan"}),
    ]:
        assert getattr(on, name)("x y") == click.style("x y", **kw)  # type: ignore[arg-type]
        assert getattr(off, name)("x y") == "x y"
