"""Forks: where a forked agent's conversation comes from, and who can fork. Sans-IO.

``agenthost fork ID NEW [--at OFFSET]`` starts NEW on a copy of ID's conversation
(docs/forks.md). What a fork needs from each kind of agent:

* Claude Code: ``--resume SESSION --fork-session``; ``--at`` becomes
  ``--resume-session-at UUID``, the uuid of the last assistant message at or before the
  offset (every stream-json line is journaled as an ``output`` event, uuid and all);
* Codex: ``thread/fork`` of the parent's thread; ``--at`` becomes its ``lastTurnId``,
  the last turn completed at or before the offset (its ``turn/completed`` notification
  is journaled as raw output too);
* ACP agents: ``session/fork`` (unstable in the ACP schema) where the agent offers it
  (its host reports ``session_fork``); no ``--at``;
* every other kind is refused, with the reason (:func:`refusal`).

This module reads journal events as dicts (``offset``, ``type``, ``data``: an ``output``
event's line): the caller reads the journal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from agenthost.errors import ForkRefused

FORKABLE: Final = frozenset({"acp", "claude", "codex"})
"""Agent kinds whose sessions agenthost can fork."""

_WHY_NOT: Final = {
    "demo": "the demo agent keeps no session to fork",
    "lines": "a lines agent is any program: it has no conversation agenthost can copy",
    "pty": "a terminal agent's conversation is inside its own TUI: agenthost cannot copy it",
}


def refusal(
    kind: str, session_id: str | None, tui: bool = False, info: Mapping[str, Any] | None = None
) -> str | None:
    """Why an agent of ``kind`` with this session cannot be forked; None when it can.
    ``info`` is what its host reports (AgentInfo fields), when it runs: the host of an
    ACP agent that offers ``session/fork`` says so (``session_fork``)."""
    if tui:
        return "the agent runs its CLI's own TUI now (agenthost switch): switch it back first"
    if kind not in FORKABLE:
        return _WHY_NOT.get(kind, f"agents of kind {kind!r} cannot be forked")
    if not session_id:
        return "the agent has no session yet: send it a message first"
    if kind == "acp" and info is not None and info.get("session_fork") is not True:
        name = info.get("agent_name") or "the agent"
        return f"{name} does not offer session/fork (an unstable part of ACP)"
    return None


def check_offset(offset: int, last_offset: int) -> None:
    """ForkRefused unless ``offset`` is a journal offset of the agent (1 to its last)."""
    if offset < 1:
        raise ForkRefused(f"--at {offset}: offsets start at 1")
    if offset > last_offset:
        raise ForkRefused(
            f"--at {offset} is beyond the agent's journal (its last offset is {last_offset})",
            hint="agenthost history ID --json shows the offsets",
        )


def fork_point(kind: str, events: Iterable[Mapping[str, Any]], offset: int) -> str:
    """The agent's own name of the point at ``offset`` of its journal (``events`` in
    order): Claude Code's assistant message uuid, Codex's completed turn id. ForkRefused
    when nothing before the offset is such a point (no answer yet), and for an ACP
    agent, whose fork copies the whole session."""
    if kind not in ("claude", "codex"):
        raise ForkRefused(f"--at: a fork of an {kind} agent copies the whole session")
    finder = _claude_point if kind == "claude" else _codex_point
    found: str | None = None
    for event in events:
        at = event.get("offset")
        if not isinstance(at, int) or at > offset:
            break
        if event.get("type") != "output" or event.get("continued"):
            continue  # (a cut line of over 1 MiB names no point)
        line = event.get("data")
        msg = _json(line) if isinstance(line, str) else None
        point = finder(msg) if msg is not None else None
        found = point or found
    if found is None:
        what = "assistant message" if kind == "claude" else "completed turn"
        raise ForkRefused(
            f"--at {offset}: the agent's journal has no {what} at or before that offset",
            hint="choose an offset after a turn's end (agenthost history ID --json shows them)",
        )
    return found


def _json(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


def _claude_point(msg: dict[str, Any]) -> str | None:
    uuid = msg.get("uuid")
    if msg.get("type") == "assistant" and isinstance(uuid, str) and uuid:
        return uuid
    return None


def _codex_point(msg: dict[str, Any]) -> str | None:
    if msg.get("method") != "turn/completed":
        return None
    params = msg.get("params")
    turn = params.get("turn") if isinstance(params, dict) else None
    if not isinstance(turn, dict) or turn.get("status") != "completed":
        return None
    tid = turn.get("id")
    return tid if isinstance(tid, str) and tid else None


def inherit_env(given: Mapping[str, str], parent: Mapping[str, str], hidden: str) -> dict[str, str]:
    """The forked agent's environment: the parent's, whose values ``daemon.list`` shows
    as ``hidden`` (its client cannot copy them); a value given for a name is kept. A name
    the parent does not have is refused: a fork never gets more than its parent."""
    extra = sorted(set(given) - set(parent))
    if extra:
        raise ForkRefused(
            f"a fork runs with its parent's environment; the parent has no {', '.join(extra)}"
        )
    return {k: parent[k] if v == hidden else v for k, v in given.items()}
