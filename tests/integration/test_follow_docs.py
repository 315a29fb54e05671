"""The "Following a stream" examples of docs/python.md, run as printed against the
demo agent, through ``Client.follow`` and ``AsyncClient.follow``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import HostFactory
from hosttools import DEADLINE

PYTHON_MD = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def follow_examples() -> list[str]:
    """The Python blocks of the section "Following a stream", in order."""
    text = PYTHON_MD.read_text()
    section = text.split("## Following a stream", 1)[1].split("\n## ", 1)[0]
    return [str(b) for b in re.findall(r"```python\n(.*?)```", section, re.DOTALL)]


def run(code: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "AGENTHOST_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=DEADLINE,  # each example follows until its own stop condition
        stdin=subprocess.DEVNULL,
    )


def test_the_blocking_follow_example_prints_the_turn(host_factory: HostFactory) -> None:
    host = host_factory("demo", "--agent", "demo")
    blocking, _ = follow_examples()
    done = run(blocking, host.home)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"#\d+ chat_entry user: hello", lines[0])
    assert re.fullmatch(r"#\d+ chat_entry assistant: You said \"hello\"\. .*", lines[-1])
    offsets = [int(line.split()[0][1:]) for line in lines]
    assert offsets == sorted(set(offsets))


def test_the_async_follow_example_ends_at_the_result(host_factory: HostFactory) -> None:
    host = host_factory("demo", "--agent", "demo")
    with host.client() as client:
        client.send("hi")
    _, asynchronous = follow_examples()
    done = run(asynchronous, host.home)
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert re.fullmatch(r"#\d+ result .* at Position\(epoch='[0-9a-f]+', offset=\d+\)", last), last
