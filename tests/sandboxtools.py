"""Helpers of the sandbox tests: whether this machine confines (skip, or fail in CI,
without bubblewrap), a planted user home, and small HTTP servers on 127.0.0.1 that
stand for a model API and for anything else an agent should not reach."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from e2e.clis import unavailable

from hosttools import short_tmp_dir

PROBE = (Path(__file__).parent / "fixtures" / "sandbox_probe.py").read_text()
"""The hostile agent's code (``python -c``: the tests directory is not in a sandbox)."""
SECRET_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- planted -----END OPENSSH PRIVATE KEY-----\n"


def require_sandbox() -> None:
    """Skip the test where agents cannot be confined (fail it in CI)."""
    from agenthost.sandbox.machine import check

    report = check()
    if not report.ok:
        unavailable(f"agents cannot be confined here: {report.reason}")


@pytest.fixture
def user_home() -> Iterator[Path]:
    """A user's home with a planted ssh key, a git config and a Codex directory."""
    with short_tmp_dir("ah-user-") as path:
        (path / ".ssh").mkdir(mode=0o700)
        key = path / ".ssh" / "id_ed25519"
        key.write_text(SECRET_KEY)
        key.chmod(0o600)
        (path / ".gitconfig").write_text("[user]\n\tname = Sandbox Test\n\temail = t@example.com\n")
        yield path


@pytest.fixture
def worktree() -> Iterator[Path]:
    """An agent's worktree."""
    with short_tmp_dir("ah-wt-") as path:
        yield path


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = b"the server answered\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextmanager
def http_server() -> Iterator[int]:
    """A plain HTTP server on 127.0.0.1 (answers 200 to any GET); yields its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def is_root() -> bool:
    return os.geteuid() == 0
