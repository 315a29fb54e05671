"""Shared fixtures: a short private home directory and real host processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from daemontools import DaemonWorld, daemon_world
from forkhosts import ExecdFactory
from hosttools import HostProc, kill_tree, short_tmp_dir, start_host
from sshtools import Sshd, start_sshd


@pytest.fixture
def home() -> Iterator[Path]:
    """A fresh home directory under /tmp (AF_UNIX paths must stay under 108 bytes)."""
    with short_tmp_dir("ah-") as path:
        yield path


HostFactory = Callable[..., HostProc]


@pytest.fixture(scope="session")
def sshd() -> Iterator[Sshd]:
    """One OpenSSH server on 127.0.0.1 for the session, this machine as the remote
    (tests/sshtools.py; skipped, or failed in CI, without openssh-server)."""
    yield from start_sshd()


@pytest.fixture
def start_by() -> str:
    """How ``host_factory`` starts hosts: ``exec`` (``python -m agenthost serve``) or
    ``fork`` (from a real host factory). A module runs its tests on both kinds by
    overriding this fixture with ``params=["exec", "fork"]``."""
    return "exec"


@pytest.fixture(scope="session")
def execd_factory() -> Iterator[ExecdFactory]:
    """One host factory for the session's forked hosts."""
    factory = ExecdFactory()
    yield factory
    factory.close()


@pytest.fixture
def host_factory(
    home: Path, start_by: str, request: pytest.FixtureRequest
) -> Iterator[HostFactory]:
    """Start hosts in ``home``; every one (and its agent group) is killed at teardown."""
    started: list[HostProc] = []
    forker = request.getfixturevalue("execd_factory") if start_by == "fork" else None

    def factory(
        agent_id: str = "a1",
        *args: str,
        command: Sequence[str] = (),
        env: dict[str, str] | None = None,
        wait_ready: bool = True,
        wrapper: Sequence[str] = (),
    ) -> HostProc:
        host = start_host(
            home,
            agent_id,
            *args,
            command=command,
            env=env,
            wait_ready=wait_ready,
            wrapper=wrapper,
            factory=forker,
        )
        started.append(host)
        return host

    yield factory
    for host in started:
        kill_tree(host.proc)


@pytest.fixture
def world(home: Path) -> Iterator[DaemonWorld]:
    """A home with a subreaper for daemons; everything started in it is killed at
    teardown."""
    with daemon_world(home) as started:
        yield started
