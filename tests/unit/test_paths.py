"""agenthost.paths: agent ids, home resolution, socket paths, private directories."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agenthost.errors import ConfigError, InvalidAgentId
from agenthost.paths import (
    AGENT_ID_MAX,
    SUN_PATH_MAX,
    agent_id_from_socket,
    check_home,
    check_socket_path,
    ensure_private_dir,
    hosts_dir,
    lock_path,
    log_path,
    logs_dir,
    resolve_home,
    socket_path,
    validate_agent_id,
)

GOOD_IDS = [
    "a",
    "A",
    "0",
    "agent-1",
    "my_agent.v2",
    "a..b",
    "a.",
    "a-",
    "x" * 64,
    "9lives",
    "UPPER_lower-09.",
]

BAD_IDS = [
    "",
    "../x",
    "..",
    ".",
    "x/y",
    "/abs",
    "x\\y",
    ".hidden",
    "-dash",
    "_under",
    "x" * 65,
    "héllo",
    "agent✓",
    "ａ",  # fullwidth a
    "٣",  # arabic-indic digit
    "a\x00b",
    "a\x00",
    "has space",
    " lead",
    "trail ",
    "tab\tx",
    "new\nline",
    "abc\n",  # a trailing newline must not slip past the pattern's end anchor
    "a:b",
    "a*b",
]


@pytest.mark.parametrize("agent_id", GOOD_IDS)
def test_validate_agent_id_accepts(agent_id: str) -> None:
    assert validate_agent_id(agent_id) == agent_id


@pytest.mark.parametrize("agent_id", BAD_IDS)
def test_validate_agent_id_rejects(agent_id: str) -> None:
    with pytest.raises(InvalidAgentId) as info:
        validate_agent_id(agent_id)
    assert isinstance(info.value, ConfigError)
    assert info.value.hint


@pytest.mark.parametrize("value", [None, 5, b"abc", ["a"]])
def test_validate_agent_id_rejects_non_strings(value: object) -> None:
    with pytest.raises(InvalidAgentId):
        validate_agent_id(value)  # type: ignore[arg-type]


def test_agent_id_max() -> None:
    assert AGENT_ID_MAX == 64


@pytest.mark.parametrize("agent_id", ["../x", ".hidden", ""])
def test_path_builders_validate(agent_id: str, tmp_path: Path) -> None:
    for build in (socket_path, lock_path, log_path):
        with pytest.raises(InvalidAgentId):
            build(tmp_path, agent_id)


def test_layout(tmp_path: Path) -> None:
    assert hosts_dir(tmp_path) == tmp_path / "hosts"
    assert logs_dir(tmp_path) == tmp_path / "logs"
    assert socket_path(tmp_path, "a1") == tmp_path / "hosts" / "a1.sock"
    assert lock_path(tmp_path, "a1") == tmp_path / "hosts" / "a1.lock"
    assert log_path(tmp_path, "a1") == tmp_path / "logs" / "a1.log"


# --- resolve_home ------------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.delenv("AGENTHOST_HOME", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def test_home_argument_wins(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("AGENTHOST_HOME", str(tmp_path / "env"))
    clean_env.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert resolve_home(tmp_path / "arg") == tmp_path / "arg"
    assert resolve_home(str(tmp_path / "arg2")) == tmp_path / "arg2"


def test_home_env_over_xdg(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("AGENTHOST_HOME", str(tmp_path / "env"))
    clean_env.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert resolve_home() == tmp_path / "env"


def test_home_xdg_state(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert resolve_home() == tmp_path / "xdg" / "agenthost"


def test_home_default(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert resolve_home() == tmp_path / "home" / ".local" / "state" / "agenthost"


def test_home_empty_env_is_unset(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("AGENTHOST_HOME", "")
    clean_env.setenv("XDG_STATE_HOME", "")
    assert resolve_home() == tmp_path / "home" / ".local" / "state" / "agenthost"


@pytest.mark.parametrize("blank", ["", " ", "\t", " \n "])
def test_home_argument_empty_or_blank_is_refused(clean_env: pytest.MonkeyPatch, blank: str) -> None:
    # Path("") is the current directory: it must never become the home by accident
    with pytest.raises(ConfigError, match="the home directory is (empty|blank)"):
        resolve_home(blank)
    with pytest.raises(ConfigError):
        check_home(blank)


@pytest.mark.parametrize("blank", ["", "  ", "\t"])
def test_home_env_empty_or_blank_is_unset(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, blank: str
) -> None:
    clean_env.setenv("AGENTHOST_HOME", blank)
    assert resolve_home() == tmp_path / "home" / ".local" / "state" / "agenthost"


def test_home_expands_user_and_is_absolute(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert resolve_home("~/h") == tmp_path / "home" / "h"
    clean_env.setenv("AGENTHOST_HOME", "~/from-env")
    assert resolve_home() == tmp_path / "home" / "from-env"
    clean_env.chdir(tmp_path)
    relative = resolve_home("rel/dir")
    assert relative.is_absolute()
    assert relative == tmp_path / "rel" / "dir"


def test_resolve_home_does_not_create(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = resolve_home(tmp_path / "nothing")
    assert not home.exists()


@pytest.mark.parametrize("given", ["argument", "string", "AGENTHOST_HOME", "XDG_STATE_HOME"])
def test_a_home_that_is_a_file_is_refused_however_given(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, given: str
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    home = afile / "agenthost" if given == "XDG_STATE_HOME" else afile
    said = f"the home directory {home} " + ("cannot be made: " if home != afile else "is a file")
    with pytest.raises(ConfigError, match=said) as refused:
        if given == "argument":
            resolve_home(afile)
        elif given == "string":
            resolve_home(str(afile))
        else:
            clean_env.setenv(given, str(afile))
            resolve_home()
    assert refused.value.hint is not None and "AGENTHOST_HOME" in refused.value.hint


@pytest.mark.parametrize("special", ["/dev/null", "/proc/self/status/x"])
def test_a_home_that_is_no_directory_is_refused(special: str) -> None:
    with pytest.raises(ConfigError, match="the home directory"):
        resolve_home(special)


def test_a_home_that_does_not_exist_yet_is_fine(tmp_path: Path) -> None:
    assert resolve_home(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert check_home(str(tmp_path)) == tmp_path


# --- sockets -----------------------------------------------------------------------------


def test_check_socket_path_limit() -> None:
    assert SUN_PATH_MAX == 107
    check_socket_path(Path("/" + "a" * 106))  # 107 bytes
    with pytest.raises(ConfigError) as info:
        check_socket_path(Path("/" + "a" * 107))  # 108 bytes
    assert "108" in info.value.message
    assert info.value.hint


def test_check_socket_path_counts_bytes_not_characters() -> None:
    path = Path("/" + "é" * 53 + "x")  # 55 characters, 1 + 106 + 1 = 108 bytes
    assert len(str(path)) < SUN_PATH_MAX
    with pytest.raises(ConfigError):
        check_socket_path(path)


@pytest.mark.parametrize(
    ("name", "agent_id"),
    [
        ("a1.sock", "a1"),
        ("my.agent.sock", "my.agent"),
        ("a1.lock", None),
        ("a1", None),
        (".sock", None),
        (".hidden.sock", None),
        ("x" * 65 + ".sock", None),
        ("a1.sock.bak", None),
        ("héllo.sock", None),
    ],
)
def test_agent_id_from_socket(name: str, agent_id: str | None, tmp_path: Path) -> None:
    assert agent_id_from_socket(tmp_path / "hosts" / name) == agent_id


# --- private directories -----------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_ensure_private_dir_creates_0700(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        target = tmp_path / "a" / "b" / "hosts"
        assert ensure_private_dir(target) == target
    finally:
        os.umask(old)
    assert target.is_dir()
    assert _mode(target) == 0o700


def test_ensure_private_dir_fixes_group_and_other_bits(tmp_path: Path) -> None:
    target = tmp_path / "open"
    target.mkdir()
    target.chmod(0o755)
    ensure_private_dir(target)
    assert _mode(target) == 0o700
    target.chmod(0o777)
    ensure_private_dir(target)
    assert _mode(target) == 0o700


def test_ensure_private_dir_is_idempotent(tmp_path: Path) -> None:
    target = tmp_path / "d"
    ensure_private_dir(target)
    (target / "keep").write_text("x")
    ensure_private_dir(target)
    assert (target / "keep").read_text() == "x"
    assert _mode(target) == 0o700


def test_ensure_private_dir_refuses_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(ConfigError):
        ensure_private_dir(target)


def test_ensure_private_dir_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError):
        ensure_private_dir(tmp_path / "file" / "sub")
