"""What the editor bridge asks the I/O around it to do: its effects. Sans-IO.

:class:`agenthost.acp.bridge.Bridge` answers each input with a list of these;
:mod:`agenthost.acp.editor` carries them out, in order, and feeds the outcomes of host
requests back to the bridge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from agenthost.acp.jsonrpc import RequestId


@dataclass(frozen=True, slots=True)
class Write:
    """Write this line to the editor."""

    data: bytes


@dataclass(frozen=True, slots=True)
class StartFollow:
    """Follow the host's stream (instead of any follow running): after ``after``
    (``(epoch, offset)``; None: from the start), or from its current head."""

    after: tuple[str, int] | None = None
    from_head: bool = False


@dataclass(frozen=True, slots=True)
class Send:
    """``host.send`` of the editor's prompt ``rid``: then :meth:`Bridge.sent` with the
    offset of the recorded message, or :meth:`Bridge.failed`."""

    rid: RequestId
    text: str


@dataclass(frozen=True, slots=True)
class Interrupt:
    """``host.interrupt`` (its outcome changes nothing here)."""


@dataclass(frozen=True, slots=True)
class Respond:
    """``host.respond`` to a permission request (an ``unknown_request`` answer is a race
    lost to another client: not an error)."""

    request_id: str
    behavior: Literal["allow", "deny"]
    option_id: str | None = None


@dataclass(frozen=True, slots=True)
class ListSessions:
    """``host.status`` for ``session/list`` ``rid``: then :meth:`Bridge.listed`, or
    :meth:`Bridge.failed`."""

    rid: RequestId
    cwd: str | None = None


Effect: TypeAlias = Write | StartFollow | Send | Interrupt | Respond | ListSessions
