"""agenthost.hostoptions: one options object for ``serve``, ``serve --detach`` and the
daemon's spawner. Its command line, parsed by ``serve``, gives the same options back."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenthost.agentenv import AGENT_ENV_VAR
from agenthost.agents import AGENT_KINDS
from agenthost.cli.serve import options_from_params, serve
from agenthost.daemon.protocol import SpawnSpec
from agenthost.daemon.spawner import host_options
from agenthost.host.host import HostConfig
from agenthost.hostoptions import DEFAULTS, HostOptions
from agenthost.journal.writer import JournalConfig, SyncPolicy
from agenthost.log import LEVELS

HOME = Path(tempfile.mkdtemp(prefix="ah-opts-", dir="/tmp"))
CWD = HOME / "work"
CWD.mkdir(exist_ok=True)

# what a command line can carry: no NUL, no lone surrogate
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))
KEYS = TEXT.filter(lambda k: k != "" and "=" not in k)
SECONDS = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)

JOURNALS = st.none() | st.builds(
    JournalConfig,
    sync=st.sampled_from(SyncPolicy),
    sync_interval=st.floats(min_value=0.01, max_value=1e6),
    segment_bytes=st.integers(4096, 1 << 40),
    max_bytes=st.integers(0, 1 << 50),
    max_age=SECONDS,
)

OPTIONS = st.builds(
    HostOptions,
    agent_id=st.from_regex(r"[a-z][a-z0-9_-]{0,20}", fullmatch=True),
    home=st.just(HOME),
    agent=st.sampled_from(AGENT_KINDS),
    command=st.lists(TEXT, max_size=4).map(tuple),
    cwd=st.sampled_from([None, CWD]),
    env=st.dictionaries(KEYS, TEXT, max_size=3),
    project=TEXT,
    task=st.none() | TEXT,
    description=st.none() | TEXT,
    agent_opts=st.dictionaries(KEYS, TEXT, max_size=3),
    resume=st.none() | TEXT,
    fork=st.none() | TEXT,
    fork_at=st.none() | TEXT,
    forked_from=st.none() | st.from_regex(r"[a-z][a-z0-9_-]{0,20}", fullmatch=True),
    linger=SECONDS,
    stop_timeout=SECONDS,
    ring_size=st.integers(1, 1 << 31),
    ring_bytes=st.integers(1024, 1 << 40),
    client_buffer=st.integers(4096, 1 << 40),
    journal=JOURNALS,
    log_level=st.sampled_from(LEVELS),
)


def parse(options: HostOptions) -> HostOptions:
    """What ``agenthost serve`` makes of the command line and environment of ``options``."""
    argv = options.to_argv()
    assert argv[-len(options.command) - 1] == "--"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(AGENT_ENV_VAR, raising=False)
        for name, value in options.to_env().items():
            patch.setenv(name, value)
        ctx = serve.make_context("serve", argv)
        return options_from_params(ctx.params)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=OPTIONS)
def test_the_command_line_gives_the_same_options_back(options: HostOptions) -> None:
    assert parse(options) == options


def test_the_defaults_are_serves_and_stay_off_the_command_line() -> None:
    options = replace(DEFAULTS, agent_id="a1", home=HOME)
    argv = options.to_argv()
    assert argv == ["--agent-id", "a1", "--home", str(HOME), "--agent", DEFAULTS.agent, "--"]
    assert parse(options) == options


def test_the_agents_environment_never_goes_on_the_command_line() -> None:
    options = HostOptions("a1", HOME, env={"API_KEY": "s3cret"})
    assert not any("s3cret" in arg for arg in options.command_line())
    assert "s3cret" in options.to_env()[AGENT_ENV_VAR]


def test_the_daemons_spec_becomes_options_with_serves_defaults() -> None:
    spec = SpawnSpec(
        agent_id="d1",
        agent="lines",
        command=["cat", "-"],
        cwd=str(CWD),
        env={"K": "V"},
        project="p",
        task="t",
        agent_opts={"b": "2", "a": "1"},
        resume="s0",
        ring_size=50,
    )
    options = host_options(spec, HOME, log_level="debug")
    assert options == replace(
        DEFAULTS,
        agent_id="d1",
        home=HOME,
        agent="lines",
        command=("cat", "-"),
        cwd=CWD,
        env={"K": "V"},
        project="p",
        task="t",
        agent_opts={"a": "1", "b": "2"},
        resume="s0",
        ring_size=50,
        log_level="debug",
    )
    assert host_options(spec, HOME, resume="s1").resume == "s1"
    argv = options.to_argv()
    assert argv[argv.index("--agent-opt") :][:4] == ["--agent-opt", "a=1", "--agent-opt", "b=2"]
    assert argv[-3:] == ["--", "cat", "-"]


def test_the_foreground_host_is_configured_from_the_same_options() -> None:
    options = HostOptions(
        "f1",
        HOME,
        agent="lines",
        command=("cat",),
        cwd=CWD,
        env={"K": "V"},
        project="p",
        task="t",
        description="d",
        agent_opts={"x": "y"},
        resume="r",
        linger=1.5,
        stop_timeout=2.5,
        ring_size=7,
        ring_bytes=4096,
        client_buffer=8192,
        journal=None,
    )
    config = HostConfig.from_options(options)
    assert config == HostConfig(
        agent_id="f1",
        home=HOME,
        agent="lines",
        command=("cat",),
        cwd=CWD,
        project="p",
        task="t",
        description="d",
        env={"K": "V"},
        linger=1.5,
        stop_timeout=2.5,
        ring_size=7,
        ring_bytes=4096,
        client_buffer=8192,
        resume="r",
        agent_params={"x": "y"},
        journal=None,
    )
    # and a HostConfig left at its defaults is a host started with serve's defaults
    assert HostConfig.from_options(HostOptions("f1", HOME)) == HostConfig("f1", HOME)
