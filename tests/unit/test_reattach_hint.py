"""The command the detach line names to come back (issue 28: it named none)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenthost.cli.session import AttachSession, Start
from agenthost.remote import parse_remote


def command(home: Path | None, remote: str | None = None) -> str:
    session = AttachSession(
        "web-1",
        home,
        start=Start(),
        follow=True,
        as_json=False,
        remote=parse_remote(remote) if remote else None,
    )
    return session.attach_command()


def test_the_default_home_goes_without_saying(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTHOST_HOME", "/tmp/ah-mine")
    assert command(Path("/tmp/ah-mine")) == "agenthost attach web-1"
    assert command(Path("/tmp/other home")) == "agenthost attach --home '/tmp/other home' web-1"


def test_another_machine_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTHOST_HOME", "/tmp/ah-mine")
    assert command(None, "me@box:2222") == "agenthost attach --remote me@box:2222 web-1"
    assert command(Path("/srv/ah"), "box") == "agenthost attach --remote box --home /srv/ah web-1"
