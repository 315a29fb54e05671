"""``python -P -m agenthost.terminal.hook KIND``: what a terminal agent's CLI runs to tell
the host something (set up by :mod:`agenthost.terminal.hooksetup`).

It reads the payload (Claude Code: JSON on stdin; Codex's ``notify``: JSON in the last
argument), sends one JSON line ``{"token", "kind", "payload"}`` to the host's hook
socket (``AGENTHOST_HOOK_SOCKET``, ``AGENTHOST_HOOK_TOKEN``), reads one JSON line back
(``{"output": {...} | null}`` or ``{"error": "..."}``) and prints ``output`` when there
is one: the CLI reads it as the hook's answer.

A hook never allows anything by itself. Whatever goes wrong (no socket, no host, a
refused token, garbage, a deadline) it prints nothing and exits 0, which Claude Code
reads as "no opinion": its own permission dialog decides (exit code 2 would be a
blocking error, and 1 is shown to the user as a failed hook; CLAUDE_FINDINGS.md).

It starts often (every tool call runs two or three hooks), so it imports only json,
os, socket and sys (benchmarks/bench_hook.py measures it).
"""

from __future__ import annotations

import json
import os
import socket
import sys

DECIDING = frozenset({"PermissionRequest"})
"""Kinds whose answer may take a person's time: no deadline but the CLI's own."""

QUICK_DEADLINE = 5.0
"""Seconds a reporting hook waits for the host before it gives up silently."""

MAX_ANSWER = 1 << 20
MAX_PAYLOAD = 1 << 20


def _note(message: str) -> None:
    # stderr of an exit-0 hook is only shown in the CLI's debug output
    try:
        sys.stderr.write(f"agenthost hook: {message}\n")
    except OSError:
        pass


def _payload(kind: str, argv: list[str]) -> object:
    if kind == "notify":  # Codex: the JSON is the last argument
        text = argv[-1] if argv else ""
    else:
        text = sys.stdin.read(MAX_PAYLOAD + 1)
        if len(text) > MAX_PAYLOAD:
            raise ValueError("payload over 1 MiB")
    return json.loads(text)


def _ask(path: str, line: bytes, deadline: float | None) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(deadline)
        sock.connect(path)
        sock.sendall(line)
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if b"\n" in chunk or size > MAX_ANSWER:
                break
        return b"".join(chunks)


def run(argv: list[str]) -> str | None:
    """The text to print for ``argv`` (``KIND [PAYLOAD]``), or None: print nothing."""
    if not argv:
        _note("no hook kind given")
        return None
    kind = argv[0]
    path = os.environ.get("AGENTHOST_HOOK_SOCKET", "")
    token = os.environ.get("AGENTHOST_HOOK_TOKEN", "")
    if not path or not token:
        _note("AGENTHOST_HOOK_SOCKET or AGENTHOST_HOOK_TOKEN is not set")
        return None
    try:
        payload = _payload(kind, argv[1:])
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        _note(f"unreadable payload: {exc}")
        return None
    line = json.dumps({"token": token, "kind": kind, "payload": payload}) + "\n"
    deadline = None if kind in DECIDING else QUICK_DEADLINE
    try:
        raw = _ask(path, line.encode(), deadline)
    except OSError as exc:  # no host, refused, timed out: the CLI decides itself
        _note(f"the host did not answer: {exc}")
        return None
    try:
        answer = json.loads(raw)
    except ValueError:
        _note("the host closed the connection without an answer")
        return None
    if not isinstance(answer, dict):
        return None
    if "error" in answer:
        _note(f"the host refused: {answer['error']}")
        return None
    output = answer.get("output")
    if isinstance(output, dict) and output:
        return json.dumps(output)
    return None


def main() -> None:
    """Entry point: never fails in a way the CLI would read as a decision."""
    try:
        text = run(sys.argv[1:])
    except Exception as exc:  # noqa: BLE001 - a hook must fall back, whatever happened
        _note(f"failed: {exc!r}")
        text = None
    if text:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    sys.exit(0)


if __name__ == "__main__":
    main()
