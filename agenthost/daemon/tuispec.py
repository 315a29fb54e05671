"""One session, both ways: the spawn spec of a structured agent's own TUI, and back. Sans-IO.

``agenthost tui ID`` stops a structured Claude Code or Codex agent and starts, under
the same id (the same journal), a terminal agent running the CLI's own resume of the
agent's session: ``claude --resume SESSION`` or ``codex resume SESSION``, with the
same working directory, environment, sandbox, budget and worktree. When the TUI ends,
the structured agent starts again with ``--resume`` of the newest session. This module
only turns one spec into the other; :mod:`agenthost.daemon.switching` does the rest.

What the structured spec's ``command`` holds is the user's own flags (the adapter adds
its protocol flags around them). The ones that make sense in the TUI too (``--model``,
``--permission-mode``, ``--add-dir``, Codex's ``-c key=value`` ...) go along; the ones
of the structured mode (``-p``, ``--output-format``, ...) and any session choice of the
user's (``--resume X``, ``--continue``: the session is the agent's) are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

from agenthost.daemon.protocol import RestartPolicy, SpawnSpec
from agenthost.errors import ConfigError

Mode = Literal["tui", "structured"]

TUI_KINDS: Final = ("claude", "codex")
"""The structured agents whose CLI has a TUI that resumes their session."""

PROGRAM_ENV: Final = {"claude": "AGENTHOST_CLAUDE_BIN", "codex": "AGENTHOST_CODEX_BIN"}
"""The variable that names each CLI instead of PATH (as its adapter reads it)."""

# Claude Code flags that take a value and belong to the structured mode or name a
# session: dropped with their value. (`--resume` may also come without one.)
_CLAUDE_DROP_VALUE: Final = frozenset(
    {
        "--input-format",
        "--output-format",
        "--permission-prompt-tool",
        "--session-id",
        "--resume",
        "-r",
        "--max-turns",
    }
)
_CLAUDE_DROP_FLAG: Final = frozenset(
    {
        "-p",
        "--print",
        "--verbose",
        "--replay-user-messages",
        "--include-partial-messages",
        "--continue",
        "-c",
        "--fork-session",
    }
)

# `codex app-server` options that the TUI's `resume` also takes (with their value)
_CODEX_KEEP_VALUE: Final = frozenset({"-c", "--config", "--enable", "--disable"})

# the codex adapter's --agent-opt keys -> the TUI's flag (`-c` ones are config keys)
_CODEX_OPT_FLAGS: Final = {
    "approval_policy": ("-a",),
    "sandbox": ("-s",),
    "model": ("-m",),
    "model_provider": ("-c", "model_provider"),
    "developer_instructions": ("-c", "developer_instructions"),
    "effort": ("-c", "model_reasoning_effort"),
}
_CODEX_DEFAULTS: Final = {"approval_policy": "on-request", "sandbox": "workspace-write"}
"""What the codex adapter asks for when its options say nothing (its DEFAULT_PARAMS):
the TUI gets the same, not the user's config.toml defaults."""


def check_kind(spec: SpawnSpec | None) -> SpawnSpec:
    """``spec`` if its agent has a TUI of its own; else ConfigError saying why."""
    if spec is None:
        raise ConfigError(
            "the daemon has no spawn spec for this agent (it was started with `serve`)",
            hint="start it through the daemon: agenthost run --agent claude|codex",
        )
    if spec.agent not in TUI_KINDS:
        raise ConfigError(
            f"a {spec.agent} agent has no TUI of its own to open",
            hint="only structured Claude Code (--agent claude) and Codex (--agent codex) "
            "agents have one; attach to it instead: agenthost attach " + spec.agent_id,
        )
    return spec


def check_switchable(spec: SpawnSpec | None, session_id: str | None) -> SpawnSpec:
    """``spec`` if its agent can open its TUI on ``session_id``; else ConfigError saying why."""
    spec = check_kind(spec)
    if not session_id:
        raise ConfigError(
            f"agent {spec.agent_id!r} has no session yet",
            hint=f"send it a message first (agenthost send {spec.agent_id} ...): its "
            "first turn makes the session the TUI resumes",
        )
    if session_id.startswith("-") or not session_id.isprintable() or len(session_id) > 200:
        raise ConfigError(
            f"agent {spec.agent_id!r} reported an unusable session id",
            hint=f"send it a message (agenthost send {spec.agent_id} ...): a new turn "
            "reports its session again",
        )
    return spec


def program_for(kind: str, env: Mapping[str, str], daemon_env: Mapping[str, str]) -> str:
    """The CLI's program, as the structured adapter finds it: ``AGENTHOST_*_BIN`` of the
    agent's ``env``, else of the daemon's (which is its hosts'), else its name on PATH."""
    var = PROGRAM_ENV[kind]
    return env.get(var) or daemon_env.get(var) or kind


def to_tui(spec: SpawnSpec, session_id: str | None, program: str | None = None) -> SpawnSpec:
    """The terminal agent's spec that opens ``spec``'s CLI in its TUI on ``session_id``.

    ``program``: the CLI to run (see :func:`program_for`; its name by default). The TUI
    is never restarted by the restart policy: when it ends, the daemon returns to the
    structured agent instead. ``hooks`` is set, so a program whose name is not
    ``claude`` or ``codex`` still reports its state through the CLI's hooks."""
    check_switchable(spec, session_id)
    assert session_id is not None
    kind = spec.agent
    program = program or kind
    if kind == "claude":
        command = [program, "--resume", session_id, *_claude_args(spec.command)]
    else:
        command = [program, "resume", *_codex_args(spec), session_id]
    return spec.model_copy(
        update={
            "agent": "pty",
            "command": command,
            "agent_opts": {"hooks": kind},
            "resume": None,
            "restart": RestartPolicy(),
            "size": None,
            "setup": None,  # the worktree exists: its setup ran once already
            "fork": None,  # a fork's TUI resumes its own session (the fork is done)
        }
    )


def to_structured(original: SpawnSpec, session_id: str | None) -> SpawnSpec:
    """The structured spec ``original`` again, resuming the newest session
    (``session_id``, the one the TUI reported last; the original's when None)."""
    resume = session_id or original.resume
    return original.model_copy(update={"resume": resume, "setup": None})


def _claude_args(args: Sequence[str]) -> list[str]:
    kept: list[str] = []
    skip_value = False
    for i, arg in enumerate(args):
        if skip_value:
            skip_value = False
            continue
        name = arg.split("=", 1)[0]
        if name in _CLAUDE_DROP_VALUE:
            if "=" not in arg:
                # `--resume` may stand alone (then Claude Code shows its picker)
                nxt = args[i + 1] if i + 1 < len(args) else None
                skip_value = nxt is not None and not nxt.startswith("-")
            continue
        if arg in _CLAUDE_DROP_FLAG:
            continue
        kept.append(arg)
    return kept


def _codex_args(spec: SpawnSpec) -> list[str]:
    args: list[str] = []
    opts = {**_CODEX_DEFAULTS, **spec.agent_opts}
    for key, flag in _CODEX_OPT_FLAGS.items():
        value = opts.get(key)
        if value is None:
            continue
        if flag[0] == "-c":
            args += ["-c", f"{flag[1]}={_toml_string(value)}"]
        else:
            args += [flag[0], value]
    command = spec.command
    i = 0
    while i < len(command):
        arg = command[i]
        name = arg.split("=", 1)[0]
        if name in _CODEX_KEEP_VALUE:
            if "=" in arg and arg.startswith("--"):
                args.append(arg)
            elif i + 1 < len(command):
                args += [arg, command[i + 1]]
                i += 1
        i += 1  # anything else is app-server's own: left out
    return args


def _toml_string(value: str) -> str:
    import json

    return json.dumps(value)  # a JSON string is a TOML basic string
