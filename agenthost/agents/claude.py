"""The ``claude`` adapter: the real Claude Code CLI in stream-json mode.

Runs ``claude -p --input-format stream-json --output-format stream-json --verbose
--replay-user-messages`` (plus ``--permission-prompt-tool stdio`` and ``--resume`` when
they apply, then the user's flags) in the worktree. The CLI reads one JSON user message
per stdin line and prints one JSON message per stdout line;
:mod:`agenthost.agents.streamjson` parses them. ``--replay-user-messages`` makes each
``result`` name the user messages it answered, which is how the adapter knows when the
agent is idle again: a message sent while a tool runs is folded into the running turn
(one result for two sends). Everything the host writes is a well-formed JSON line: the
CLI dies on any other stdin line, and no client input can produce one.

Permission requests: unless the user chose otherwise, tools that are not allowed
already are asked about through the control protocol (``can_use_tool``), which the
host turns into pending permission requests any client can answer (protocol 1.1). Set
``--agent-opt permission_prompt=off`` (or pass your own ``--permission-prompt-tool``,
``--dangerously-skip-permissions``, or ``--permission-mode bypassPermissions``) to let
the CLI decide on its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import ClassVar

from agenthost.agents.demo import REPLAY_FLAG, StreamJsonAdapter
from agenthost.agents.programs import Program
from agenthost.errors import ConfigError

BINARY_ENV = "AGENTHOST_CLAUDE_BIN"
BASE_ARGS = ("-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")
OWN_SANDBOX_OFF = '{"sandbox":{"enabled":false}}'
"""``--settings`` of a Claude Code inside agenthost's sandbox: its own off (it uses
bubblewrap too, which cannot nest there)."""
# user flags that mean "the CLI decides about permissions itself"
_OWN_PERMISSIONS = ("--permission-prompt-tool", "--dangerously-skip-permissions")


class ClaudeAdapter(StreamJsonAdapter):
    """Claude Code (``claude``) in stream-json mode."""

    kind = "claude"
    resumable: ClassVar[bool] = True
    forkable: ClassVar[bool] = True
    program: ClassVar[Program] = Program("Claude Code", BINARY_ENV)
    known_params: ClassVar[frozenset[str]] = frozenset({"permission_prompt", "own_sandbox"})

    @classmethod
    def inside_sandbox(cls, params: Mapping[str, str]) -> dict[str, str]:
        """Claude Code's own sandbox off (``own_sandbox=off``: its ``sandbox.enabled``
        setting false for this run, whatever its settings files say), where it could not
        nest; its permissions unchanged."""
        return {**params, "own_sandbox": "off"}

    def build_command(self, command: Sequence[str]) -> list[str]:
        prompt = self.options.params.get("permission_prompt", "stdio")
        if prompt not in ("stdio", "off"):
            raise ConfigError(
                f"permission_prompt must be 'stdio' or 'off', not {prompt!r}",
                hint="--agent-opt permission_prompt=off lets the CLI decide on its own",
            )
        own = self.options.params.get("own_sandbox", "as-configured")
        if own not in ("as-configured", "off"):
            raise ConfigError(
                f"own_sandbox must be 'as-configured' or 'off', not {own!r}",
                hint="agenthost sets it to off inside its own sandbox (docs/sandbox.md)",
            )
        argv = [os.environ.get(BINARY_ENV) or "claude", *BASE_ARGS]
        if REPLAY_FLAG not in command:
            argv.append(REPLAY_FLAG)
        if self.options.resume:
            argv += ["--resume", self.options.resume]
        elif self.options.fork:  # a new session id, on a copy of the parent's messages
            argv += ["--resume", self.options.fork, "--fork-session"]
            if self.options.fork_at:  # (a flag Claude Code's --help leaves out)
                argv += ["--resume-session-at", self.options.fork_at]
        if prompt == "stdio" and not _decides_itself(command):
            argv += ["--permission-prompt-tool", "stdio"]
        if own == "off":  # the command line is the settings layer above the files
            argv += ["--settings", OWN_SANDBOX_OFF]
        return argv + list(command)


def _decides_itself(command: Sequence[str]) -> bool:
    for i, arg in enumerate(command):
        if arg.startswith(_OWN_PERMISSIONS):
            return True
        if arg == "--permission-mode" and i + 1 < len(command):
            return command[i + 1] == "bypassPermissions"
        if arg == "--permission-mode=bypassPermissions":
            return True
    return False
