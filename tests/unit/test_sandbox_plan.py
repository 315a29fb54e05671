"""The sandbox's plan without running it: profiles, what each kind may reach, the
bubblewrap command line of a layout, the environment inside, the exit status through
bubblewrap, and the ``[sandbox]`` section of config.toml (garbage included)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agenthost.config import parse_config
from agenthost.errors import AgentCannotStart, ConfigError, SandboxUnavailable
from agenthost.sandbox import kinds
from agenthost.sandbox.bwrapargs import Layout, Mount, bwrap_argv
from agenthost.sandbox.layout import Request, build_layout, git_common_dir
from agenthost.sandbox.profiles import PROFILES, Profile, parse_profile
from agenthost.sandbox.runner import SANDBOX_VAR, exit_code, inside_env


@pytest.mark.parametrize("name", PROFILES)
def test_every_profile_parses_whatever_its_case(name: str) -> None:
    assert parse_profile(name) == Profile(name)
    assert parse_profile(f" {name.upper()} ") == Profile(name)


def test_off_is_no_sandbox_and_garbage_is_a_usage_error() -> None:
    assert parse_profile("off") is None
    for bad in ["", "strictt", "docker", "strict,net", "\x1b[2Jnone", "none\n"]:
        if bad.strip().lower() in PROFILES:
            continue
        with pytest.raises(ConfigError) as caught:
            parse_profile(bad)
        assert "strict" in (caught.value.hint or "")


def test_a_container_is_refused_as_not_built_here() -> None:
    with pytest.raises(SandboxUnavailable) as caught:
        parse_profile("container:debian")
    assert isinstance(caught.value, AgentCannotStart)  # exit 13, cannot_start on the wire


def test_api_hosts_are_the_kinds_and_the_base_urls() -> None:
    assert kinds.api_hosts("claude", {}) == ("api.anthropic.com",)
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8123/v1", "OPENAI_BASE_URL": "https://[::1]/x"}
    assert kinds.api_hosts("claude", env) == ("api.anthropic.com", "127.0.0.1:8123", "[::1]")
    assert kinds.api_hosts("demo", {}) == ()
    # garbage in the variables reaches nothing
    for bad in ["", "not a url", "ftp://x.example", "http://", "http://h:99999999", "\x00"]:
        assert kinds.api_hosts("demo", {"OPENAI_BASE_URL": bad}) == ()


def test_the_command_line_unshares_everything_but_the_network_of_net() -> None:
    mounts = (Mount("ro", "/usr", "/usr"), Mount("tmpfs", "/tmp"), Mount("mask", "/etc/shadow"))
    argv = bwrap_argv("/usr/bin/bwrap", Layout(mounts, "/w", "strict"), ["a", "b"], seccomp_fd=7)
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"):
        assert flag in argv
    assert "--unshare-net" in argv and "--die-with-parent" in argv and "--new-session" in argv
    assert argv[argv.index("--seccomp") + 1] == "7"
    assert argv[-3:] == ["--", "a", "b"]
    i = argv.index("--tmpfs")
    assert argv[i + 1] == "/tmp"
    assert argv[argv.index("/etc/shadow") - 2 :][:2] == ["--ro-bind", "/dev/null"]
    net = bwrap_argv("/usr/bin/bwrap", Layout(mounts, "/w", "net"), ["a"], seccomp_fd=None)
    assert "--unshare-net" not in net and "--seccomp" not in net


def _request(tmp: Path, **kw: object) -> Request:
    user = tmp / "user"
    (user / ".ssh").mkdir(parents=True)
    (user / ".ssh" / "id_ed25519").write_text("key")
    wt = tmp / "wt"
    wt.mkdir()
    home = tmp / "agenthost-home"
    home.mkdir()
    fields: dict[str, object] = {
        "profile": Profile("none"),
        "kind": "codex",
        "command": ["sh"],
        "worktree": wt,
        "home": home,
        "env": {"PATH": os.environ["PATH"], "HOME": str(user)},
        "user_home": user,
    }
    fields.update(kw)
    return Request(**fields)  # type: ignore[arg-type]


def test_the_layout_hides_the_home_and_the_user_files(tmp_path: Path) -> None:
    request = _request(tmp_path)
    layout = build_layout(request)
    by_dest = {m.dest: m for m in layout.mounts}
    assert by_dest[str(request.user_home)].kind == "tmpfs"
    assert by_dest[str(request.worktree)].kind == "rw"
    codex = request.user_home / ".codex"
    assert by_dest[str(codex)].kind == "rw" and codex.is_dir()  # made for its sessions
    bound = [Path(m.source or "") for m in layout.mounts if m.kind in ("ro", "rw")]
    for path in bound:  # nothing bound holds the agenthost home or the user's home
        assert request.home != path and request.home not in path.parents
        assert path != request.user_home
    assert layout.cwd == str(request.worktree)


@pytest.mark.parametrize(
    ("program", "made"),
    [
        ("/x/node_modules/.bin/claude-agent-acp", ".claude"),
        ("codex-acp", ".codex"),
        ("gemini", ".gemini"),
        ("other-acp-agent", None),
        ("", None),
        ("claude-agent-acp/../sh", None),  # by the program's name, not a part of its path
    ],
)
def test_an_acp_agents_own_directory_is_made_for_its_sessions(
    tmp_path: Path, program: str, made: str | None
) -> None:
    request = _request(tmp_path, kind="acp", command=[program] if program else [])
    layout = build_layout(request)
    rw = {m.dest for m in layout.mounts if m.kind == "rw"}
    for name in (".claude", ".codex", ".gemini"):
        path = request.user_home / name
        assert path.is_dir() is (name == made) and (str(path) in rw) is (name == made)
    # shown, not run: nothing is made
    shown = tmp_path / "shown"
    shown.mkdir()
    request = _request(shown, kind="acp", command=["claude-agent-acp"], create=False)
    build_layout(request)
    assert not (request.user_home / ".claude").exists()


def test_secrets_under_a_bound_path_are_masked(tmp_path: Path) -> None:
    request = _request(tmp_path)
    # the worktree is the user's whole home, and holds the agenthost home
    home = request.user_home / ".local" / "state" / "agenthost"
    home.mkdir(parents=True)
    masked = build_layout(_with(request, worktree=request.user_home, home=home))
    kinds_at = {m.dest: m.kind for m in masked.mounts}
    assert kinds_at[str(home)] == "tmpfs"
    assert kinds_at[str(request.user_home / ".ssh")] == "tmpfs"
    # masks come after what they cover
    order = [m.dest for m in masked.mounts]
    assert order.index(str(home)) > order.index(str(request.user_home))


def _with(request: Request, **changes: object) -> Request:
    from dataclasses import replace

    return replace(request, **changes)  # type: ignore[arg-type]


def test_a_program_in_the_home_binds_only_its_own_directory(tmp_path: Path) -> None:
    request = _request(tmp_path)
    bin_dir = request.user_home / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "agent"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    env = {**request.env, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    layout = build_layout(_with(request, command=["agent"], env=env))
    ro = [m.dest for m in layout.mounts if m.kind == "ro"]
    assert str(request.user_home) not in ro  # ~/bin's prefix is ~: never bound whole


def test_the_environment_inside_leads_nowhere_outside() -> None:
    env = {
        "PATH": "/usr/bin",
        "AGENTHOST_HOME": "/h",
        "AGENTHOST_AGENT_RUN": "abc",
        "AGENTHOST_DEMO_PACE": "0",
        "AGENTHOST_SSH": "ssh -i key",
        "SSH_AUTH_SOCK": "/tmp/ssh",
        "HTTPS_PROXY": "http://corp:3128",
        "TMPDIR": "/home/u/tmp",
    }
    strict = inside_env(env, Profile("strict"), ["api.openai.com"])
    assert "AGENTHOST_HOME" not in strict and "SSH_AUTH_SOCK" not in strict
    assert strict["AGENTHOST_AGENT_RUN"] == "abc"  # the watchdog's marker stays
    assert strict["AGENTHOST_DEMO_PACE"] == "0" and "AGENTHOST_SSH" not in strict
    assert strict[SANDBOX_VAR] == "strict" and strict["TMPDIR"] == "/tmp"
    assert strict["HTTPS_PROXY"] == strict["http_proxy"] == "http://127.0.0.1:3128"
    assert "127.0.0.1" in strict["NO_PROXY"]
    # an allowed loopback host must go through the proxy: no NO_PROXY then
    assert "NO_PROXY" not in inside_env(env, Profile("strict"), ["127.0.0.1:8123"])
    assert "NO_PROXY" not in inside_env(env, Profile("strict"), ["[::1]:8123"])
    none = inside_env(env, Profile("none"), [])
    assert not any(k.lower().endswith("_proxy") for k in none)


@pytest.mark.parametrize(
    ("code", "reported"),
    [(0, 0), (1, 1), (127, 127), (128, 128), (143, -15), (137, -9), (200, 200)],
)
def test_bubblewraps_exit_status_is_the_agents(code: int, reported: int) -> None:
    assert exit_code(code) == reported


def test_the_sandbox_section_of_config_toml() -> None:
    config = parse_config(
        '[sandbox]\ndefault = "strict"\nallow_hosts = ["registry.npmjs.org"]\n'
        'read_only = ["~/tools"]\n'
        '[[sandbox.override]]\nproject = "web*"\nprofile = "net"\nallow_hosts = ["x.example"]\n'
    ).sandbox
    assert config.for_agent("a1", "shop") == ("strict", ("registry.npmjs.org",))
    assert config.for_agent("a1", "webshop") == ("net", ("registry.npmjs.org", "x.example"))
    assert config.read_only == [Path("~/tools").expanduser()]
    for bad in [
        '[sandbox]\ndefault = "docker"\n',
        '[sandbox]\nread_only = ["relative/path"]\n',
        '[sandbox]\nallow_hosts = [""]\n',
        '[sandbox]\nallow_hosts = "x.example"\n',
        '[sandbox]\ndefualt = "strict"\n',
        '[[sandbox.override]]\nprofile = "open"\n',
    ]:
        with pytest.raises(ConfigError):
            parse_config(bad)


def test_a_linked_git_worktree_gets_its_repository(tmp_path: Path) -> None:
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    linked = tmp_path / "linked"
    subprocess.run([*git, "-C", str(repo), "worktree", "add", "-q", str(linked)], check=True)
    request = _request(tmp_path)
    layout = build_layout(_with(request, worktree=linked))
    rw = [m.dest for m in layout.mounts if m.kind == "rw"]
    assert str(linked) in rw and str((repo / ".git").resolve()) in rw
    # a plain checkout's .git is inside it; garbage in .git binds nothing more
    assert git_common_dir(repo) is None
    for junk in ["", "gitdir:", "gitdir: /nonexistent", "not git at all", "gitdir: ../../.."]:
        (request.worktree / ".git").write_text(junk)
        assert git_common_dir(request.worktree) is None


@pytest.mark.parametrize(
    ("text", "has"),
    [
        ("bubblewrap 0.8.0", True),
        ("bubblewrap 0.11.0", True),
        ("bubblewrap 1.0", True),
        ("bubblewrap 0.6.1", False),
        ("", False),
        ("garbage", False),
        ("? (Permission denied)", False),
    ],
)
def test_disable_userns_is_used_from_the_release_that_has_it(text: str, has: bool) -> None:
    from agenthost.sandbox.machine import DISABLE_USERNS_SINCE, _version_at_least

    assert _version_at_least(text, DISABLE_USERNS_SINCE) is has
