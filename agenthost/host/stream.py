"""An agent's event stream: numbering, encoding, retention, and what it implies.

:class:`AgentStream` turns adapter events into numbered stream events, encodes each to
bytes exactly once, appends each batch to the journal (when there is one), keeps the
events in the ring and then hands the batch to a broadcast callback: a client never
sees an event the journal does not have. It also keeps what the stream implies: the
agent's state, the additive AgentInfo fields, the chat history and the pending
permission requests. No sockets,
no processes: the host feeds it lines and adapter events.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

import structlog

from agenthost.agents.base import (
    Adapter,
    AdapterEvent,
    Chat,
    ClientCall,
    ErrorNote,
    Governed,
    InfoUpdate,
    Output,
    PermissionAsk,
    PermissionDecided,
    StateChange,
    TerminalOutput,
    TerminalResized,
    TurnResult,
    UsageLimited,
    Write,
)
from agenthost.journal import JournalFailed, JournalReader, JournalWriter, Recovery
from agenthost.journal.segments import record_offset
from agenthost.linesplit import Fragment
from agenthost.protocol import (
    FINAL_STATES,
    AgentState,
    EventEncoder,
    EventType,
    MessageType,
    encode_response_pieces,
)
from agenthost.ringbuffer import RingBuffer
from agenthost.terminal.chunks import json_text, term_fields
from agenthost.timefmt import now_rfc3339
from agenthost.wire.stream import plan_attach

if TYPE_CHECKING:  # the models are loaded by the first request that needs them
    from agenthost.models import AttachResponse, PermissionRequest

log = structlog.get_logger("agenthost.stream")

Broadcast = Callable[[int, bytes, int], None]
"""``broadcast(first_offset, batch_bytes, count)``: hand a batch to every client."""

HISTORY_PIECE: Final = 256 << 10
"""Bytes of history entries encoded per piece of a ``host.history`` answer."""

Writer = Callable[[bytes], None]
"""``write(data)``: queue bytes for the agent's stdin (must not raise)."""

Caller = Callable[[ClientCall], None]
"""``call(request)``: start what the agent asked of its client (must not raise)."""

AskHook = Callable[[PermissionAsk, dict[str, Any]], list[AdapterEvent]]
"""``on_ask(ask, request)``: events that follow a new permission request at once (the
approval policy's answer and its decision, notes); none leaves it to a person. It
must not publish: it runs inside :meth:`AgentStream.publish`."""


class AgentStream:
    """The numbered events of one agent and the state they imply."""

    def __init__(
        self,
        agent_id: str,
        broadcast: Broadcast,
        write: Writer,
        *,
        ring_size: int,
        ring_bytes: int,
        history_size: int,
        history_bytes: int,
        journal: JournalWriter | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.broadcast = broadcast
        self.write = write
        self.call: Caller = _no_calls
        """Where the adapter's :class:`ClientCall` events go (the host sets it)."""
        self.on_ask: AskHook | None = None
        """Decides a permission request before anyone is asked (the host sets it)."""
        self.on_decided: Callable[[str], None] | None = None
        """Told the id of every request that stops being pending."""
        self.on_result: Callable[[TurnResult], list[AdapterEvent]] | None = None
        """Sees every turn's result in its batch; what it returns follows it (the
        budget's crossing: :mod:`agenthost.host.budgets`)."""
        self.on_limited: Callable[[UsageLimited], list[AdapterEvent]] | None = None
        """Decides what a usage limit does (a pause: :mod:`agenthost.host.pauses`)."""
        self.hold: AgentState | None = None
        """A state the agent stays in when the adapter says ``idle`` (``paused``)."""
        self.journal = journal
        self.journal_reader = JournalReader(journal.directory, journal) if journal else None
        self.epoch = uuid.uuid4().hex
        self.ring: RingBuffer[bytes] = RingBuffer(ring_size, ring_bytes)
        self.history: RingBuffer[dict[str, Any]] = RingBuffer(history_size, history_bytes)
        self.encoder = EventEncoder(agent_id)
        self.state = AgentState.STARTING
        self.info: dict[str, Any] = {}  # additive AgentInfo fields
        self.last_event_at: str | None = None
        """When the newest event was published (RFC 3339): the agent's last activity."""
        # request id -> (what the adapter needs to answer, what clients see)
        self.pending: dict[str, tuple[PermissionAsk, dict[str, Any]]] = {}

    def restore(self, recovery: Recovery) -> None:
        """Continue the journal's stream: its epoch, its offsets, its newest events in
        the ring and its newest chat entries in the history."""
        self.epoch = recovery.epoch
        self.ring.restart_at(recovery.next_offset)
        reader = self.journal_reader
        if reader is None or recovery.next_offset == 1:
            return
        oldest = reader.oldest_offset() or recovery.next_offset
        start = max(oldest, recovery.next_offset - self.ring.max_entries)
        self.ring.restart_at(start)
        for record in reader.iter_records(start):  # the ring keeps what fits
            if record_offset(record) != self.ring.next_offset:
                log.error("journal.preload_mismatch", expected=self.ring.next_offset)
                break
            self.ring.append(record, len(record))
        if self.ring.next_offset != recovery.next_offset:
            self.ring.clear()  # serve from the journal rather than from a wrong ring
            self.ring.restart_at(recovery.next_offset)
        entries, _ = reader.chat_entries(
            before=recovery.next_offset,
            limit=self.history.max_entries,
            max_segments=2,
            max_bytes=self.history.max_bytes,  # what the memory keeps, not a page's 4 MiB
        )
        for entry in entries:
            self.history.append(entry, len(entry.get("content") or "") + 200)

    def _commit(self, first: int, chunks: list[bytes], timestamp: str) -> None:
        """Journal a batch, then broadcast it (the journal first: see the module doc)."""
        self.last_event_at = timestamp
        data = b"".join(chunks)
        failure = None
        if self.journal is not None:
            try:
                self.journal.append(data, first, len(chunks))
            except JournalFailed as exc:
                failure = exc.message
        self.broadcast(first, data, len(chunks))
        if failure is not None:  # the journal is off now: this cannot recurse
            self.info["journal_error"] = failure
            self.publish([ErrorNote(f"{failure}; the journal is off until the host restarts")])

    # --- publishing ------------------------------------------------------------------

    def publish_lines(self, lines: list[bytes], stream: str) -> None:
        """The hot path: one ``output`` event per raw line, no adapter involved."""
        first = self.ring.next_offset
        timestamp = now_rfc3339()
        chunks = self.encoder.output_lines(first, timestamp, lines, stream)
        self.ring.extend(chunks, list(map(len, chunks)))
        self._commit(first, chunks, timestamp)

    def publish_stdout(self, lines: list[bytes], adapter: Adapter) -> None:
        """Stdout lines through the adapter (raw lines only, for passthrough ones)."""
        if adapter.passthrough:
            self.publish_lines(lines, "stdout")
            return
        events: list[AdapterEvent] = []
        for line in lines:
            text, escaped = decode_line(line)
            try:
                if type(line) is Fragment:
                    parsed = adapter.parse_fragment(text, True)
                else:
                    parsed = adapter.parse_line(text)
            except Exception as exc:  # an adapter bug must not lose the line
                log.exception("adapter.failed")
                parsed = [Output(text), ErrorNote(f"{adapter.kind} adapter failed: {exc!r}")]
            if escaped:
                parsed = [replace(e, escaped=True) if type(e) is Output else e for e in parsed]
            events.extend(parsed)
        self.publish(events)

    def publish(self, events: list[AdapterEvent]) -> int:
        """Number, encode, retain and broadcast adapter events; return the first offset."""
        timestamp = now_rfc3339()
        ring = self.ring
        first = ring.next_offset
        chunks: list[bytes] = []
        for ev in self._with_consequences(events):
            offset = ring.next_offset
            try:
                data = self._encode(ev, offset, timestamp)
            except (ValueError, TypeError) as exc:  # never a hole in the stream
                log.exception("event.unencodable")
                self.info["last_error"] = f"could not encode an event: {exc}"
                data = self.encoder.event(
                    EventType.ERROR, offset, timestamp, {"error": self.info["last_error"]}
                )
            if data is None:
                continue
            ring.append(data, len(data))
            chunks.append(data)
        if chunks:
            self._commit(first, chunks, timestamp)
        return first

    def _with_consequences(self, events: list[AdapterEvent]) -> Iterator[AdapterEvent]:
        # Lazy on purpose: what follows an event depends on the state it left behind.
        for ev in events:
            if type(ev) is PermissionDecided:
                asked = self.pending.get(ev.request_id)
                yield ev
                if asked is not None:  # the audit trail: history and export show it
                    yield Chat(decision_entry(asked[1], ev))
                if not self.pending and self.state is AgentState.WAITING:
                    yield StateChange(AgentState.RUNNING)
                continue
            yield ev
            if type(ev) is Governed:  # the audit trail, as for permission decisions
                yield Chat(governance_entry(ev))
                continue
            if type(ev) is TurnResult and self.on_result is not None:  # budgets
                yield from self._with_consequences(self.on_result(ev))
                continue
            if type(ev) is UsageLimited and self.on_limited is not None:  # pauses
                yield from self._with_consequences(self.on_limited(ev))
                continue
            if type(ev) is PermissionAsk:
                asked = self.pending.get(ev.request_id)
                # decided before anyone is asked: no waiting state, no notice, but the
                # request, the answer and the history entry are all in the journal
                if self.on_ask is not None and asked is not None:
                    yield from self._with_consequences(self.on_ask(ev, asked[1]))
                if ev.request_id in self.pending:
                    yield StateChange(AgentState.WAITING)

    def _encode(self, ev: AdapterEvent, offset: int, timestamp: str) -> bytes | None:
        """Bytes of one event, applying its effect on state, info, history, pending.

        None for what changes the stream's view without an event (an info update, a
        state it is already in, a decision on a request that is not pending).
        """
        encoder = self.encoder
        if type(ev) is Output:
            return encoder.output(offset, timestamp, ev.data, ev.stream, ev.continued, ev.escaped)
        if type(ev) is TerminalOutput:
            text = json_text(ev.data)
            if text is None:  # not UTF-8: data_b64
                return encoder.event(EventType.TERMINAL, offset, timestamp, term_fields(ev.data))
            # a flood's hot path: the bytes escaped as they are, not decoded, dumped by
            # json and encoded again (byte for byte the same event; its head is ours)
            head = encoder.event(EventType.TERMINAL, offset, timestamp, {})
            return b"".join((head[:-2], b',"data":"', text, b'"}\n'))
        if type(ev) is TerminalResized:
            size = {"cols": ev.cols, "rows": ev.rows}
            self.info["terminal"] = size
            return encoder.event(EventType.TERMINAL_SIZE, offset, timestamp, size)
        if type(ev) is Chat:
            entry = dict(ev.entry)
            entry["timestamp"] = timestamp
            data = encoder.event(EventType.CHAT_ENTRY, offset, timestamp, {"chat_entry": entry})
            entry["offset"] = offset
            self.history.append(entry, len(data))
            return data
        if type(ev) is StateChange:
            state = ev.state
            if self.pending and state not in FINAL_STATES:
                state = AgentState.WAITING  # nothing moves while a question is open
            elif self.hold is not None and state is AgentState.IDLE:
                state = self.hold  # paused for a usage limit: idle, but not for work
            if state is self.state:
                return None
            log.info("agent.state", state=state.value, previous=self.state.value)
            self.state = state
            return encoder.event(EventType.STATE, offset, timestamp, {"state": state.value})
        if type(ev) is InfoUpdate:
            self.info.update(ev.fields)
            return None
        if type(ev) is Write:
            self.write(ev.data)
            return None
        if type(ev) is ClientCall:
            self.call(ev)
            return None
        if type(ev) is ErrorNote:
            self.info["last_error"] = ev.message
            fields: dict[str, Any] = {"error": ev.message}
            if ev.http_status is not None:  # additive: a model API failure's status
                fields["http_status"] = ev.http_status
            if ev.turn_failed:  # additive: a failed turn's note, not the host's finding
                fields["turn_failed"] = True
            return encoder.event(EventType.ERROR, offset, timestamp, fields)
        if type(ev) is TurnResult:
            return encoder.event(EventType.RESULT, offset, timestamp, {"result": ev.result})
        if type(ev) is PermissionAsk:
            request: dict[str, Any] = {
                "request_id": ev.request_id,
                "tool_name": ev.tool_name,
                "tool_input": ev.tool_input,
                "input": ev.input,
                "created_at": timestamp,
            }
            if ev.tool_use_id is not None:
                request["tool_use_id"] = ev.tool_use_id
            if ev.options:  # additive (1.2): the answers the agent offers
                request["options"] = [dict(o) for o in ev.options]
            self.pending[ev.request_id] = (ev, request)
            log.info("permission.asked", request_id=ev.request_id, tool=ev.tool_name)
            return encoder.event(
                EventType.PERMISSION_REQUEST, offset, timestamp, {"request": request}
            )
        if type(ev) is UsageLimited:  # its consequences are the record (on_limited)
            return None
        if type(ev) is Governed:
            record = governance_fields(ev)
            log.info("governance", action=ev.action, actor=ev.actor)
            return encoder.event(EventType.GOVERNANCE, offset, timestamp, {"governance": record})
        if type(ev) is PermissionDecided:
            if self.pending.pop(ev.request_id, None) is None:
                return None
            if self.on_decided is not None:
                self.on_decided(ev.request_id)
            decision = decision_fields(ev)
            log.info(
                "permission.decided",
                request_id=ev.request_id,
                behavior=ev.behavior,
                actor=decision["actor"],
            )
            return encoder.event(
                EventType.PERMISSION_RESPONSE, offset, timestamp, {"decision": decision}
            )
        raise TypeError(f"unknown adapter event {ev!r}")  # pragma: no cover

    # --- reading -----------------------------------------------------------------------

    def oldest_offset(self) -> int:
        """The oldest offset still served: from the journal, else from the ring."""
        oldest = self.ring.oldest_offset
        if self.journal_reader is not None and self.journal is not None and not self.journal.failed:
            kept = self.journal_reader.oldest_offset()
            if kept is not None:
                oldest = min(oldest, kept)
        return oldest

    def attach_plan(self, offset: int) -> tuple[AttachResponse, int]:
        """The attach response for ``offset`` and the first offset to stream."""
        from agenthost.models import AttachResponse

        head = self.ring.last_offset
        oldest = self.oldest_offset()
        plan = plan_attach(offset, head=head, oldest=oldest)
        response = AttachResponse(
            agent_id=self.agent_id,
            stream_offset=head,
            oldest_offset=oldest,
            truncated=plan.truncated,
            epoch=self.epoch,
            pending=self.pending_requests(),
        )
        return response, plan.start

    def history_page(self, request_id: str | int | None, limit: int) -> Iterator[bytes]:
        """The ``host.history`` answer with the newest ``limit`` entries (all kept when
        0), oldest first, as frame pieces (see :func:`history_pieces`)."""
        kept = self.history.newest(limit) if limit else self.history.slice(0)
        return self.history_pieces(request_id, kept, total=len(self.history))

    def history_pieces(
        self,
        request_id: str | int | None,
        entries: list[dict[str, Any]],
        *,
        total: int,
        has_more: bool | None = None,
    ) -> Iterator[bytes]:
        """A ``host.history`` answer as pieces of about ``HISTORY_PIECE`` bytes.

        The history may hold 16 MiB: built at once, with a model per entry, one answer
        cost several times that, and a client pipelining such requests multiplied it.
        ``entries`` is a snapshot (a list of references, no copies); each entry is
        validated and encoded only when the connection can take its piece.
        """
        from agenthost.models import HistoryEntry, HistoryResponse

        head = HistoryResponse(
            agent_id=self.agent_id,
            entries=[],
            offset=self.ring.last_offset,
            total=total,
            has_more=has_more,
        )
        models = (HistoryEntry.model_validate(e) for e in entries)
        return encode_response_pieces(
            MessageType.HISTORY, request_id, head, "entries", models, HISTORY_PIECE
        )

    def pending_requests(self) -> list[PermissionRequest]:
        """Permission requests waiting for an answer, oldest first."""
        from agenthost.models import PermissionRequest

        return [PermissionRequest.model_validate(r) for _, r in self.pending.values()]


def decision_fields(ev: PermissionDecided) -> dict[str, Any]:
    """The ``decision`` of a ``permission_response`` event: who decided what, and why
    (an adapter's withdrawal is the agent's)."""
    decision: dict[str, Any] = {"request_id": ev.request_id, "behavior": ev.behavior}
    if ev.message is not None:
        decision["message"] = ev.message
    decision["actor"] = ev.actor or ("agent" if ev.behavior == "cancelled" else "client")
    if ev.reason is not None:
        decision["reason"] = ev.reason
    if ev.remember is not None:
        decision["remember"] = ev.remember
    return decision


_DONE: Final = {"allow": "allowed", "deny": "denied", "cancelled": "cancelled"}


def decision_entry(request: dict[str, Any], ev: PermissionDecided) -> dict[str, Any]:
    """The chat entry (role ``permission``) that records a decision in the history:
    ``allowed by policy: <reason>`` with the tool, its input and the decision."""
    decision = decision_fields(ev)
    why = ev.reason or ev.message
    content = f"{_DONE.get(ev.behavior, ev.behavior)} by {decision['actor']}"
    if ev.remember == "session":
        content += " (and for the rest of the session)"
    entry: dict[str, Any] = {
        "role": "permission",
        "content": f"{content}: {why}" if why else content,
        "tool_name": request.get("tool_name"),
        "tool_input": request.get("tool_input"),
        "decision": decision,
    }
    if request.get("tool_use_id") is not None:
        entry["tool_use_id"] = request["tool_use_id"]
    return entry


def governance_fields(ev: Governed) -> dict[str, Any]:
    """The ``governance`` object of a ``governance`` event (1.4)."""
    return {**ev.detail, "action": ev.action, "actor": ev.actor, "reason": ev.reason}


def governance_entry(ev: Governed) -> dict[str, Any]:
    """The chat entry (role ``governance``) that records a governance decision in the
    history: ``budget_exceeded by host: ...``."""
    return {
        "role": "governance",
        "content": f"{ev.action.replace('_', ' ')} by {ev.actor}: {ev.reason}",
        "governance": governance_fields(ev),
    }


def _no_calls(call: ClientCall) -> None:
    log.warning("client_call.unhandled", method=call.method)


def decode_line(raw: bytes) -> tuple[str, bool]:
    """Text of an output line and whether invalid UTF-8 bytes had to be escaped."""
    try:
        return raw.decode(), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", "backslashreplace"), True
