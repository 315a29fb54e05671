"""Shared fixtures: a short private home directory and real host processes."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from hosttools import HostProc, kill_tree, start_host


@pytest.fixture
def home() -> Iterator[Path]:
    """A fresh home directory under /tmp (AF_UNIX paths must stay under 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="ah-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


HostFactory = Callable[..., HostProc]


@pytest.fixture
def host_factory(home: Path) -> Iterator[HostFactory]:
    """Start hosts in ``home``; every one (and its agent group) is killed at teardown."""
    started: list[HostProc] = []

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
        )
        started.append(host)
        return host

    yield factory
    for host in started:
        kill_tree(host.proc)
