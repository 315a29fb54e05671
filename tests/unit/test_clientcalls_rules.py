"""The rules of the agent's client calls, without processes: confinement, parameters,
line slices, terminal output bounds (agenthost.host.confine)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agenthost.host.confine import (
    DEFAULT_OUTPUT_LIMIT,
    MAX_OUTPUT_LIMIT,
    MAX_PATH_BYTES,
    CallRefused,
    Confinement,
    OutputBuffer,
    args_param,
    count_param,
    env_param,
    needs_shell,
    output_limit,
    slice_lines,
    text_param,
)

# --- confinement --------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``wt`` (the working directory) beside ``wt2`` (a sibling with a common prefix)."""
    (tmp_path / "wt" / "sub").mkdir(parents=True)
    (tmp_path / "wt2").mkdir()
    (tmp_path / "wt" / "sub" / "f.txt").write_text("x")
    (tmp_path / "wt2" / "secret").write_text("s")
    return tmp_path


def refused(confinement: Confinement, path: object) -> CallRefused:
    with pytest.raises(CallRefused) as info:
        confinement.resolve(path)
    return info.value


def test_paths_inside_resolve_to_themselves(tree: Path) -> None:
    c = Confinement(str(tree / "wt"))
    assert c.resolve(str(tree / "wt" / "sub" / "f.txt")) == str(tree / "wt" / "sub" / "f.txt")
    assert c.resolve(str(tree / "wt")) == str(tree / "wt")  # the working directory itself
    # a file that does not exist yet (a write) is fine: it would be inside
    assert c.resolve(str(tree / "wt" / "new" / "g.txt")) == str(tree / "wt" / "new" / "g.txt")
    # .. that stays inside is fine too
    assert c.resolve(str(tree / "wt" / "sub" / ".." / "sub" / "f.txt")).endswith("sub/f.txt")


def test_relative_paths_are_bad_params(tree: Path) -> None:
    c = Confinement(str(tree / "wt"))
    for path in ("sub/f.txt", "./sub/f.txt", "../wt2/secret", "~/x"):
        error = refused(c, path)
        assert error.bad_params and "absolute" in error.message


def test_dotdot_and_siblings_with_a_common_prefix_are_outside(tree: Path) -> None:
    c = Confinement(str(tree / "wt"))
    for path in (
        tree / "wt" / ".." / "wt2" / "secret",
        tree / "wt2" / "secret",  # "/tmp/x/wt2" starts with "/tmp/x/wt"
        tree / "wt2",
        tree,
        Path("/etc/passwd"),
        Path("/"),
    ):
        error = refused(c, str(path))
        assert not error.bad_params and not error.not_found
        assert "outside the agent's working directory" in error.message


def test_symlinks_are_judged_by_their_target(tree: Path) -> None:
    wt = tree / "wt"
    (wt / "out").symlink_to(tree / "wt2" / "secret")
    (wt / "outdir").symlink_to(tree / "wt2")
    (wt / "in").symlink_to(wt / "sub" / "f.txt")
    (wt / "loop").symlink_to(wt / "loop")
    c = Confinement(str(wt))
    assert "outside" in refused(c, str(wt / "out")).message
    assert "outside" in refused(c, str(wt / "outdir" / "anything")).message
    assert c.resolve(str(wt / "in")) == str(wt / "sub" / "f.txt")
    # a loop resolves to itself (inside): opening it then fails, which is the I/O's concern
    assert c.resolve(str(wt / "loop")).startswith(str(wt))


def test_a_working_directory_reached_through_a_symlink(tree: Path) -> None:
    (tree / "link").symlink_to(tree / "wt")
    c = Confinement(str(tree / "link"))  # the root is resolved too
    assert c.resolve(str(tree / "link" / "sub" / "f.txt")) == str(tree / "wt" / "sub" / "f.txt")
    assert c.resolve(str(tree / "wt" / "sub")) == str(tree / "wt" / "sub")


@pytest.mark.parametrize(
    "garbage",
    [None, 7, 1.5, True, [], {}, b"/bytes", "", "/a\0b", "/" + "a/" * MAX_PATH_BYTES],
)
def test_garbage_paths_are_bad_params(tree: Path, garbage: object) -> None:
    error = refused(Confinement(str(tree / "wt")), garbage)
    assert error.bad_params
    assert len(error.message) < 300  # a huge path is not echoed whole


def test_a_component_too_long_for_the_file_system(tree: Path) -> None:
    c = Confinement(str(tree / "wt"))
    path = str(tree / "wt" / ("n" * 300))  # NAME_MAX is 255: resolves, cannot exist
    assert c.resolve(path) == path


def test_the_refusal_becomes_the_adapters_call_failed() -> None:
    failure = CallRefused("gone", not_found=True).failure()
    assert (failure.message, failure.not_found, failure.bad_params) == ("gone", True, False)


# --- parameters ------------------------------------------------------------------------


def test_count_params() -> None:
    assert count_param({}, "line") is None
    assert count_param({"line": None}, "line") is None
    assert count_param({"line": 0}, "line") == 0
    assert count_param({"line": 10**30}, "line") == 10**30
    for garbage in (-1, True, False, "3", 2.0, [1]):
        with pytest.raises(CallRefused) as info:
            count_param({"line": garbage}, "line")
        assert info.value.bad_params


def test_text_param() -> None:
    assert text_param({"content": ""}, "content") == ""
    for garbage in ({}, {"content": None}, {"content": 1}, {"content": ["a"]}):
        with pytest.raises(CallRefused):
            text_param(garbage, "content")


def test_args_param() -> None:
    assert args_param({}) == [] and args_param({"args": None}) == []
    assert args_param({"args": ["-l", "", "ü"]}) == ["-l", "", "ü"]
    for garbage in ("ls -l", ["a", 1], ["a\0b"], {"a": 1}, [None], ["x"] * 5000):
        with pytest.raises(CallRefused) as info:
            args_param({"args": garbage})
        assert info.value.bad_params


def test_env_param() -> None:
    assert env_param({}) == {}
    given = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": ""}]}
    assert env_param(given) == {"A": "1", "B": ""}
    garbage: list[Any] = [
        {"A": "1"},
        ["A=1"],
        [{"name": "A"}],
        [{"name": "", "value": "1"}],
        [{"name": "A=B", "value": "1"}],
        [{"name": "A\0", "value": "1"}],
        [{"name": "A", "value": "1\0"}],
        [{"name": 1, "value": "1"}],
        [{"name": "A", "value": None}],
        [None],
    ]
    for env in garbage:
        with pytest.raises(CallRefused) as info:
            env_param({"env": env})
        assert info.value.bad_params


def test_a_command_line_without_args_is_run_by_a_shell() -> None:
    assert not needs_shell("ls", [])
    assert not needs_shell("/usr/bin/git", [])
    assert not needs_shell("ls -la", ["x"])  # args given: the command is a program name
    for line in ("ls -la", "a | b", "echo $HOME", "cd x && make", "rm *.o", "a;b", "x\ty"):
        assert needs_shell(line, [])


# --- line slices --------------------------------------------------------------------------

TEXT = "one\ntwo\nthree\n"


@pytest.mark.parametrize(
    ("line", "limit", "expected"),
    [
        (None, None, TEXT),
        (1, None, TEXT),
        (0, None, TEXT),  # 0 is not a line: read from the first, as editors do
        (2, None, "two\nthree\n"),
        (2, 1, "two\n"),
        (1, 2, "one\ntwo\n"),
        (3, 5, "three\n"),
        (4, None, ""),  # after the last newline: nothing
        (5, 1, ""),
        (10**18, 10**18, ""),  # huge values cost one pass at most
        (None, 0, ""),
        (None, 1, "one\n"),
    ],
)
def test_slice_lines(line: int | None, limit: int | None, expected: str) -> None:
    assert slice_lines(TEXT, line, limit) == expected


def test_slice_lines_keeps_endings_and_a_last_line_without_newline() -> None:
    text = "a\r\nb\rc\nlast"
    assert slice_lines(text, 1, 1) == "a\r\n"
    assert slice_lines(text, 2, 1) == "b\rc\n"  # a lone \r does not end a line
    assert slice_lines(text, 3, 10) == "last"
    assert slice_lines("", 1, 1) == ""


# --- terminal output ----------------------------------------------------------------------


def test_output_limit_bounds() -> None:
    assert output_limit(None) == DEFAULT_OUTPUT_LIMIT
    assert output_limit(0) == 0
    assert output_limit(10) == 10
    assert output_limit(1 << 40) == MAX_OUTPUT_LIMIT


def test_output_keeps_the_newest_bytes() -> None:
    out = OutputBuffer(5)
    out.feed(b"abc")
    assert (out.text(final=False), out.truncated) == ("abc", False)
    out.feed(b"defg")
    assert (out.text(final=True), out.truncated, len(out)) == ("cdefg", True, 5)


def test_truncation_starts_at_a_character_boundary() -> None:
    euro = "€".encode()  # 3 bytes
    out = OutputBuffer(7)
    out.feed(euro * 3)  # 9 bytes: the first kept byte is the middle of a €
    assert len(out) == 7
    assert out.text(final=True) == "€€"  # 6 bytes, within the limit, no broken char
    emoji = OutputBuffer(2)
    emoji.feed("😀".encode())  # 4 bytes, limit 2: nothing whole is left
    assert emoji.truncated and emoji.text(final=True) == ""
    assert OutputBuffer(0).text(final=True) == ""


def test_a_character_being_written_is_left_out_until_it_is_whole() -> None:
    out = OutputBuffer(100)
    out.feed(b"ok " + "é".encode()[:1])
    assert out.text(final=False) == "ok "  # the command is still writing it
    assert out.text(final=True) == "ok \ufffd"  # it ended: the broken byte is shown
    out.feed("é".encode()[1:])
    assert out.text(final=False) == "ok é"


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    out = OutputBuffer(100)
    out.feed(b"\xff\xfe bin \x80\x80\x80\x80")
    text = out.text(final=False)
    assert "bin" in text and "\ufffd" in text
    out = OutputBuffer(3)
    out.feed(b"ab\x80\x80\x80\x80")  # continuation bytes only: at most 3 are skipped
    assert out.text(final=True) == ""


def test_every_cut_of_mixed_text_decodes_within_the_limit() -> None:
    data = "a€😀é\nb".encode() * 3
    for limit in range(len(data) + 2):
        out = OutputBuffer(limit)
        for i in range(0, len(data), 5):
            out.feed(data[i : i + 5])
        text = out.text(final=True)
        assert "\ufffd" not in text
        assert len(text.encode()) <= limit
        assert data.endswith(text.encode())


def test_confinement_root_is_its_real_path(tmp_path: Path) -> None:
    assert Confinement(str(tmp_path) + "/./").root == os.path.realpath(tmp_path)
