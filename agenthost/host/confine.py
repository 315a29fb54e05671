"""The rules of the calls an ACP agent makes to its client (``fs/*``, ``terminal/*``).

Sans-IO apart from resolving paths (``os.path.realpath`` reads symlinks): what a call
may touch, how its parameters are checked, which lines of a file a read returns, and how
much of a terminal's output is kept. :mod:`agenthost.host.clientcalls` does the I/O.

Confinement is the contract the host advertises to the agent ("files under your working
directory"), applied after every symlink is resolved: it keeps an agent's file calls
where its user expects them. It is not a sandbox: the same agent may run any command
through a terminal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

from agenthost.agents.base import CallFailed
from agenthost.agents.streamjson import clip
from agenthost.errors import AgentHostError

MAX_PATH_BYTES: Final = 4096
"""Longer paths are refused (Linux's PATH_MAX)."""
MAX_READ_BYTES: Final = 4 << 20
"""A file read whole may be at most this big: the answer travels as one JSON-RPC line."""
DEFAULT_OUTPUT_LIMIT: Final = 1 << 20
"""Bytes of a terminal's output kept when the agent names no ``outputByteLimit``."""
MAX_OUTPUT_LIMIT: Final = 4 << 20
"""The most output kept per terminal, whatever the agent asks (memory: 32 terminals)."""
MAX_TERMINALS: Final = 32
"""Terminals one agent may hold at once (running or exited, until released)."""
MAX_ARGS: Final = 4096
MAX_ENV: Final = 1024

# A command with one of these and no args is a shell command line ("ls -la | head"), as
# agents that drive a shell send it: it runs with /bin/sh -c, as editors run it.
_SHELL_SYNTAX: Final = frozenset("|&;<>()$`\\\"'*?[]#~={}%!")


class CallRefused(AgentHostError):
    """A client call the host will not or cannot do; :meth:`failure` is its answer."""

    def __init__(self, message: str, *, not_found: bool = False, bad_params: bool = False):
        super().__init__(message)
        self.not_found = not_found
        self.bad_params = bad_params

    def failure(self) -> CallFailed:
        """The :class:`CallFailed` the adapter turns into the JSON-RPC error."""
        return CallFailed(self.message, not_found=self.not_found, bad_params=self.bad_params)


class Confinement:
    """Paths an agent may name: absolute, and inside ``root`` once resolved."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)

    def resolve(self, path: object, what: str = "path") -> str:
        """The real path (symlinks resolved) of ``path``, which must be absolute and lie
        in the root (the root itself included); CallRefused otherwise. The path need not
        exist: its missing part is kept as given."""
        if not isinstance(path, str) or not path:
            raise CallRefused(f"{what} must be a non-empty string", bad_params=True)
        if "\0" in path:
            raise CallRefused(f"{what} contains a NUL byte", bad_params=True)
        if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
            raise CallRefused(f"{what} is longer than {MAX_PATH_BYTES} bytes", bad_params=True)
        if not os.path.isabs(path):
            raise CallRefused(f"{what} must be absolute: {clip(path)}", bad_params=True)
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError) as exc:  # e.g. a component over NAME_MAX
            raise CallRefused(f"cannot resolve {what} {clip(path)}: {exc}") from exc
        if not self.contains(real):
            raise CallRefused(
                f"{what} {clip(path)} is outside the agent's working directory {self.root}"
            )
        return real

    def contains(self, real: str) -> bool:
        """Whether the resolved path ``real`` is the root or under it (``/wt2`` is not
        under ``/wt``)."""
        root = self.root
        return real == root or real.startswith(root if root == os.sep else root + os.sep)


# --- parameters -------------------------------------------------------------------------


def text_param(params: Mapping[str, Any], key: str) -> str:
    """A required string parameter."""
    value = params.get(key)
    if not isinstance(value, str):
        raise CallRefused(f"{key} must be a string", bad_params=True)
    return value


def count_param(params: Mapping[str, Any], key: str) -> int | None:
    """An optional non-negative integer parameter (None or absent: None)."""
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CallRefused(f"{key} must be a non-negative integer", bad_params=True)
    return value


def args_param(params: Mapping[str, Any]) -> list[str]:
    """A terminal's ``args``: a list of strings without NUL bytes (absent: empty)."""
    args = params.get("args")
    if args is None:
        return []
    if not isinstance(args, list) or len(args) > MAX_ARGS:
        raise CallRefused(f"args must be a list of at most {MAX_ARGS} strings", bad_params=True)
    for arg in args:
        if not isinstance(arg, str) or "\0" in arg:
            raise CallRefused("every arg must be a string without NUL bytes", bad_params=True)
    return args


def env_param(params: Mapping[str, Any]) -> dict[str, str]:
    """A terminal's extra environment, from ACP's ``[{"name", "value"}]`` (absent: none)."""
    env = params.get("env")
    if env is None:
        return {}
    if not isinstance(env, list) or len(env) > MAX_ENV:
        raise CallRefused(
            f'env must be a list of at most {MAX_ENV} {{"name", "value"}} objects',
            bad_params=True,
        )
    extra: dict[str, str] = {}
    for item in env:
        name = item.get("name") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(item, dict) else None
        if not isinstance(name, str) or not isinstance(value, str):
            raise CallRefused('each env item must be {"name": str, "value": str}', bad_params=True)
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise CallRefused(
                f"bad environment variable name or value: {clip(name)}", bad_params=True
            )
        extra[name] = value
    return extra


def needs_shell(command: str, args: list[str]) -> bool:
    """Whether ``command`` is a shell command line rather than a program: no args, and
    shell syntax or spaces in it. Agents that drive a shell send ``"ls -la | head"``."""
    return not args and any(c in _SHELL_SYNTAX or c.isspace() for c in command)


# --- reading --------------------------------------------------------------------------


def slice_lines(text: str, line: int | None, limit: int | None) -> str:
    """The part of ``text`` from 1-based ``line`` (None or 0: the first), at most
    ``limit`` lines (None: to the end), line endings kept. Lines end at ``\\n`` only
    (a ``\\r`` stays with its line). Past the end: the empty string."""
    start = max(line or 1, 1) - 1
    pos = 0
    for _ in range(start):  # at most one pass over the text, however big ``line`` is
        found = text.find("\n", pos)
        if found < 0:
            return ""
        pos = found + 1
    if limit is None:
        return text[pos:]
    end = pos
    for _ in range(limit):
        found = text.find("\n", end)
        if found < 0:
            return text[pos:]
        end = found + 1
    return text[pos:end]


# --- terminal output ------------------------------------------------------------------


def output_limit(requested: int | None) -> int:
    """Bytes of output a terminal keeps: what the agent asked, within our bounds."""
    return DEFAULT_OUTPUT_LIMIT if requested is None else min(requested, MAX_OUTPUT_LIMIT)


class OutputBuffer:
    """The newest ``limit`` bytes of a terminal's output, and whether older ones were
    dropped."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.truncated = False
        self._data = bytearray()

    def feed(self, data: bytes) -> None:
        """Append output; drop the oldest bytes beyond the limit."""
        self._data += data
        excess = len(self._data) - self.limit
        if excess > 0:
            del self._data[:excess]  # cheap: bytearray moves its start, not its bytes
            self.truncated = True

    def __len__(self) -> int:
        return len(self._data)

    def text(self, final: bool) -> str:
        """The kept output as text: it starts at a character boundary when older bytes
        were dropped; while the command runs (not ``final``) a character still being
        written is left out rather than shown broken. Invalid UTF-8 is replaced."""
        data = memoryview(self._data)
        start = 0
        if self.truncated:
            while start < min(len(data), 3) and _is_continuation(data[start]):
                start += 1
        end = len(data) if final else _complete_end(data, start)
        return str(data[start:end], "utf-8", "replace")


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _sequence_size(lead: int) -> int:
    """Bytes of the UTF-8 sequence ``lead`` begins (1 for ASCII and invalid leads)."""
    if lead >> 5 == 0b110:
        return 2
    if lead >> 4 == 0b1110:
        return 3
    return 4 if lead >> 3 == 0b11110 else 1


def _complete_end(data: memoryview, start: int) -> int:
    """The end of ``data`` without a UTF-8 sequence that is begun but not finished."""
    end = len(data)
    for back in range(1, min(4, end - start) + 1):
        byte = data[end - back]
        if _is_continuation(byte):
            continue
        size = (
            2
            if byte >> 5 == 0b110
            else 3
            if byte >> 4 == 0b1110
            else 4
            if byte >> 3 == 0b11110
            else 1
        )
        return end - back if size > back else end
    return end
