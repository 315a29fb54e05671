"""The fast path of the commands scripts call most: ``status``, ``ping``, ``pending``,
``send``, ``respond`` of a local agent, and ``list`` of this machine
(:mod:`agenthost.cli.fastlist`), on the standard library alone.

Click, pydantic and asyncio cost a few hundred milliseconds of CPU to import; a shell
prompt or ``watch`` calling ``agenthost status`` pays them every time. Here the plain,
well-formed command line of those verbs is run with :class:`QuickClient`, printed by
the same code as the click commands (:mod:`agenthost.cli.views`), and reported with
the same errors and exit statuses (:mod:`agenthost.cli.exits`).

Anything else is not ours (:func:`run_fast` returns None) and runs the click way as it
always did: help, ``--remote``, an option this module does not know, a value it would
read differently, shell completion, a home or an agent id that is refused, no host, a
host of another version, ``AGENTHOST_NO_FAST=1``. Giving up happens only before the
verb's own request is sent (the handshake's ping changes nothing), so a ``send`` is
never sent twice; after it, the host's answer and its errors are reported here. A
read-only verb (``status``, ``ping``, ``pending``) that meets an error other than a timeout is
simply run again the click way, which says it in its words.
"""

from __future__ import annotations

import os
import sys

from agenthost.cli.quickclient import NotMine, QuickClient
from agenthost.errors import (
    AgentHostError,
    Forbidden,
    NotConnected,
    ProtocolError,
    RequestTimeout,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import TextIO

READ_ONLY = frozenset({"status", "ping", "pending"})
"""Verbs that change nothing: run again the click way on any error but a timeout."""

_OPTIONS: dict[str, tuple[int, frozenset[str], frozenset[str]]] = {
    # verb: (arguments (-1: two or more), flags, options with a value)
    "status": (1, frozenset({"--json"}), frozenset({"--home"})),
    "ping": (1, frozenset({"--json"}), frozenset({"--home"})),
    "pending": (1, frozenset({"--json"}), frozenset({"--home"})),
    "send": (-1, frozenset({"--json"}), frozenset({"--home", "--key"})),
    "respond": (3, frozenset({"--json", "--session"}), frozenset({"--home", "--message"})),
}


class Args:
    """A command line of one of the fast verbs, as click would read it."""

    def __init__(self, verb: str, args: list[str], flags: set[str], values: dict[str, str]):
        self.verb = verb
        self.args = args
        self.as_json = "--json" in flags
        self.flags = flags
        self.values = values


def parse(argv: list[str]) -> Args | None:
    """The command line if it is a plain one of a fast verb, else None. Plain: only the
    options of :data:`_OPTIONS`, each value given once as the next word and not
    looking like an option, no ``--``, and the right number of arguments."""
    if not argv or argv[0] not in _OPTIONS:
        return None
    verb, rest = argv[0], argv[1:]
    count, flag_names, value_names = _OPTIONS[verb]
    args: list[str] = []
    flags: set[str] = set()
    values: dict[str, str] = {}
    words = iter(rest)
    for word in words:
        if word in flag_names:
            flags.add(word)
        elif word in value_names:
            value = next(words, None)
            if value is None or value.startswith("-") or word in values:
                return None
            values[word] = value
        elif word.startswith("-") and word != "-":
            return None  # help, --remote, --opt=value, --, an unknown option: click's
        else:
            args.append(word)
    if len(args) != count and not (count < 0 and len(args) >= 2):
        return None
    if verb == "respond" and (
        args[2] not in ("allow", "deny") or ("--session" in flags and args[2] != "allow")
    ):
        return None
    return Args(verb, args, flags, values)


def run_fast(argv: list[str]) -> int | None:
    """Run the command line if it is the fast path's: return its exit status (its
    output printed), or None when the click path must run it (nothing was done that
    changes anything)."""
    if any(name.startswith("_AGENTHOST_COMPLETE") for name in os.environ):
        return None  # shell completion
    try:
        if argv[:1] == ["list"]:
            from agenthost.cli.fastlist import run_list

            return run_list(argv[1:])
        return _verb(argv)
    except NotMine:
        return None
    # what click's main does with these two
    except BrokenPipeError:  # (`agenthost status ID | head -1`): quietly, status 1
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # (nothing left to flush at exit)
        return 1
    except (EOFError, KeyboardInterrupt):
        _write(sys.stderr, "\nAborted!")
        return 1


def _verb(argv: list[str]) -> int | None:
    parsed = parse(argv)
    if parsed is None:
        return None
    try:
        home, path = _where(parsed)
    except AgentHostError:
        return None  # a home or an id the click path refuses, in its words
    with QuickClient(path, parsed.args[0]) as client:
        try:
            client.connect()
        except (RequestTimeout, Forbidden) as exc:
            return _report(exc, parsed, home)
        return _run(parsed, client, home)


def _where(parsed: Args) -> tuple[Path, str]:
    from agenthost.paths import check_home, resolve_home, socket_path

    given = parsed.values.get("--home")
    home = resolve_home(check_home(given) if given is not None else None)
    return home, str(socket_path(home, parsed.args[0]))


def _run(parsed: Args, client: QuickClient, home: Path) -> int:
    from agenthost.cli import views

    agent_id, verb = parsed.args[0], parsed.verb
    message = ""
    if verb == "send":
        words = parsed.args[1:]
        # a message read from stdin ends with the newline of its last line: not part of it
        message = sys.stdin.read().rstrip("\n") if words == ["-"] else " ".join(words)
    try:
        if verb == "ping":
            answer = client.request("host.ping")
            text = views.json_text(answer) if parsed.as_json else views.ping_text(agent_id, answer)
        elif verb == "status":
            answer = client.request("host.status")
            text = views.json_text(answer) if parsed.as_json else _status(answer, home, agent_id)
        elif verb == "pending":
            requests = client.request("host.pending")["requests"]
            if not isinstance(requests, list):
                raise TypeError("requests is not a list")
            if parsed.as_json:
                text = views.json_text(requests)
            else:
                table = views.pending_text(requests)
                if table is None:
                    _write(sys.stderr, "no pending requests")
                    return 0
                text = table
        elif verb == "send":
            payload: dict[str, object] = {"input": message}
            if "--key" in parsed.values:
                payload["key"] = parsed.values["--key"]
            answer = client.request("host.send", payload)
            text = _answer(answer, parsed, views.sent_text(agent_id, answer))
        else:
            answer = client.request("host.respond", _respond_payload(parsed))
            session = "--session" in parsed.flags
            text = _answer(answer, parsed, views.responded_text(agent_id, answer, session))
    except AgentHostError as exc:
        if verb in READ_ONLY and not isinstance(exc, RequestTimeout):
            raise NotMine from exc
        return _report(exc, parsed, home)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # not the shape we know
        if verb in READ_ONLY:
            raise NotMine from exc
        # (applied by the host, whatever it answered: reported, never sent again)
        return _report(ProtocolError(f"malformed host.{verb} response: {exc!r}"), parsed, home)
    _write(sys.stdout, text)
    return 0


def _respond_payload(parsed: Args) -> dict[str, object]:
    request_id, behavior = parsed.args[1], parsed.args[2]
    payload: dict[str, object] = {"request_id": request_id, "behavior": behavior}
    if "--message" in parsed.values:
        payload["message"] = parsed.values["--message"]
    payload["actor"] = "cli"
    if "--session" in parsed.flags:
        payload["remember"] = "session"
    return payload


def _answer(answer: dict[str, object], parsed: Args, text: str) -> str:
    from agenthost.cli.views import json_text

    return json_text({"ok": True, **answer}) if parsed.as_json else text


def _status(answer: dict[str, object], home: Path, agent_id: str) -> str:
    from agenthost.cli.branch import worktree_branch
    from agenthost.cli.views import Style, status_text, use_color

    agent = answer["agent"]
    worktree = agent.get("worktree", "") if isinstance(agent, dict) else ""
    branch = worktree_branch(home, agent_id, worktree if isinstance(worktree, str) else "")
    return status_text(answer, Style(use_color()), branch)


def _report(exc: AgentHostError, parsed: Args, home: Path) -> int:
    from agenthost.cli.exits import error_report, exit_code_for

    hint = exc.hint
    if isinstance(exc, NotConnected):
        from agenthost.cli.hints import diagnose

        hint = diagnose(home, parsed.args[0]) or hint
    text, on_stderr = error_report(exc, hint, as_json=parsed.as_json)
    _write(sys.stderr if on_stderr else sys.stdout, text)
    return int(exit_code_for(exc))


def _write(stream: TextIO, text: str) -> None:
    stream.write(text + "\n")
    stream.flush()
