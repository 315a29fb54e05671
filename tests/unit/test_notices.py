"""When notices are due (agenthost.attention.notices): event sequences -> notices, on a
fake clock, table-driven."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from agenthost.attention.links import verify
from agenthost.attention.notices import Notice, Notices, sample_notice, window, with_links
from agenthost.config import AgentNotify, NoticeKind, parse_config
from agenthost.models import StreamEvent

ALL: tuple[NoticeKind, ...] = ("waiting", "failed", "died", "finished")
DEFAULT: tuple[NoticeKind, ...] = ("waiting", "failed", "died")
T0 = 1_800_000_000.0


class World:
    """A Notices on a fake clock; steps feed it events at given times."""

    def __init__(self, events: tuple[NoticeKind, ...] = DEFAULT, delay: float = 10.0) -> None:
        self.now = T0
        self.offset = 0
        self.setting = AgentNotify(events, delay, ("sink",))
        self.notices = Notices(lambda agent, project: self.setting, lambda: self.now)
        self.notices.attached("a1", "e1", "proj", "idle")
        self.out: list[Notice] = []

    def emit(self, type_: str, age: float = 0.0, **fields: Any) -> None:
        self.offset += 1
        stamp = datetime.fromtimestamp(self.now - age, UTC)
        event = StreamEvent.model_validate(
            {"type": type_, "agent_id": "a1", "offset": self.offset, "timestamp": stamp, **fields}
        )
        self.out += self.notices.event(event)

    def step(self, step: tuple[Any, ...]) -> None:
        at, what, *args = step
        self.now = T0 + at
        self.out += self.notices.due()
        if what == "state":
            self.emit("state", state=args[0])
        elif what == "old-state":  # replayed: stamped long ago
            self.emit("state", age=1000.0, state=args[0])
        elif what == "ask":
            request = {
                "request_id": args[0],
                "tool_name": "Bash",
                "tool_input": f"touch {args[0]}",
                "created_at": datetime.fromtimestamp(self.now, UTC),
            }
            self.emit("permission_request", request=request)
        elif what == "answer":
            self.emit("permission_response", decision={"request_id": args[0], "behavior": "allow"})
        elif what == "error":  # a failed turn, as every adapter reports it
            self.emit("error", error="boom", turn_failed=True)
        elif what == "host-error":  # what the host saw: here the agent's death
            self.emit("error", error="agent exited with signal SIGKILL")
        elif what == "old-error":
            self.emit("error", age=1000.0, error="boom", turn_failed=True)
        elif what == "result-error":
            self.emit("result", result={"is_error": True, "result": "API error"})
        elif what == "result-interrupted":
            self.emit("result", result={"is_error": True, "interrupted": True})
        elif what == "result-ok":
            self.emit("result", result={"is_error": False})
        elif what == "exit":
            state, stop = args
            self.out += self.notices.exited(
                "a1", state=state, exit_code=1, signal=None, stop_requested=stop, at=self.now
            )
        elif what == "gone":
            lost, stop = args
            self.out += self.notices.gone("a1", lost=lost, stop_requested=stop, at=self.now)
        elif what == "attach":
            self.notices.attached("a1", args[0], "proj", "idle")
        else:
            assert what == "tick"

    def run(self, steps: list[tuple[Any, ...]]) -> list[tuple[float, str, int]]:
        for step in steps:
            self.step(step)
        return [(self.now - T0, n.kind, n.offset) for n in self.out]


def ask_steps(answer_at: float | None) -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = [
        (0, "state", "running"),
        (1, "ask", "r1"),
        (1, "state", "waiting"),
    ]
    if answer_at is not None:
        steps += [(answer_at, "answer", "r1"), (answer_at, "state", "running")]
    return steps


# (name, events, steps, expected notices as (kind, offset of the opening event))
CASES: list[tuple[str, tuple[NoticeKind, ...], list[tuple[Any, ...]], list[tuple[str, int]]]] = [
    ("answered within the delay", DEFAULT, [*ask_steps(5), (30, "tick")], []),
    ("still waiting after the delay", DEFAULT, [*ask_steps(None), (11, "tick")], [("waiting", 3)]),
    ("not before the delay", DEFAULT, [*ask_steps(None), (10.5, "tick")], []),
    ("one per episode", DEFAULT, [*ask_steps(None), (11, "tick"), (50, "tick"), (99, "tick")],
     [("waiting", 3)]),
    ("answered after the notice", DEFAULT, [*ask_steps(None), (12, "tick"), (13, "answer", "r1"),
     (13, "state", "running"), (40, "tick")], [("waiting", 3)]),
    ("two episodes, two notices", DEFAULT, [*ask_steps(None), (12, "answer", "r1"),
     (12, "state", "running"), (13, "ask", "r2"), (13, "state", "waiting"), (30, "tick")],
     [("waiting", 3), ("waiting", 7)]),
    ("a quick second episode", DEFAULT, [*ask_steps(2), (3, "ask", "r2"), (3, "state", "waiting"),
     (12, "tick"), (14, "tick")], [("waiting", 7)]),
    ("waiting not chosen", ("failed",), [*ask_steps(None), (30, "tick")], []),
    ("a replayed waiting state", DEFAULT, [(0, "old-state", "waiting"), (30, "tick")], []),
    ("an error in a turn", DEFAULT, [(0, "state", "running"), (1, "error")], [("failed", 2)]),
    ("one failure per turn", DEFAULT, [(0, "state", "running"), (1, "error"), (2, "error"),
     (3, "result-error")], [("failed", 2)]),
    ("a failure in each turn", DEFAULT, [(0, "state", "running"), (1, "error"),
     (2, "state", "idle"), (3, "state", "running"), (4, "result-error")],
     [("failed", 2), ("failed", 5)]),
    ("a result that is not an error", DEFAULT, [(0, "state", "running"), (1, "result-ok")], []),
    ("an error while idle is no failed turn", DEFAULT, [(0, "state", "idle"), (1, "error")], []),
    ("a replayed error", DEFAULT, [(0, "state", "running"), (1, "old-error")], []),
    ("failed not chosen", ("waiting",), [(0, "state", "running"), (1, "error")], []),
    ("killed mid-turn: one notice, died", DEFAULT, [(0, "state", "running"), (1, "host-error"),
     (1, "state", "error"), (1, "exit", "error", False)], [("died", 0)]),
    ("an error the host saw is no failed turn", DEFAULT, [(0, "state", "running"),
     (1, "host-error"), (2, "state", "idle")], []),
    ("an interrupt is no failure", DEFAULT, [(0, "state", "running"), (1, "result-interrupted")],
     []),
    ("died in error", DEFAULT, [(0, "state", "error"), (0, "exit", "error", False)], [("died", 0)]),
    ("a stop is no death", DEFAULT, [(0, "state", "error"), (0, "exit", "error", True)], []),
    ("a clean exit is no death", DEFAULT, [(0, "state", "done"), (0, "exit", "done", False)], []),
    ("a host vanished", DEFAULT, [(0, "gone", True, False)], [("died", 0)]),
    ("a host stopped", DEFAULT, [(0, "gone", False, True)], []),
    ("exited then gone: one death", DEFAULT, [(0, "exit", "error", False),
     (1, "gone", True, False)], [("died", 0)]),
    ("a new host run may die again", DEFAULT, [(0, "exit", "error", False), (1, "attach", "e2"),
     (2, "exit", "error", False)], [("died", 0), ("died", 0)]),
    ("death ends the episode", DEFAULT, [*ask_steps(None), (5, "gone", True, False), (30, "tick")],
     [("died", 0)]),
    ("finished is opt-in", DEFAULT, [(0, "state", "running"), (1, "state", "idle")], []),
    ("finished", ALL, [(0, "state", "running"), (1, "state", "idle")], [("finished", 2)]),
    ("idle to idle is no finish", ALL, [(0, "state", "idle"), (1, "state", "idle")], []),
]  # fmt: skip


@pytest.mark.parametrize(("events", "steps", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_sequences(
    events: tuple[NoticeKind, ...], steps: list[tuple[Any, ...]], expected: list[tuple[str, int]]
) -> None:
    world = World(events)
    got = world.run(steps)
    assert [(kind, offset) for _, kind, offset in got] == expected


def test_waiting_notice_names_the_pending_requests_and_when() -> None:
    world = World()
    world.run(
        [(0, "state", "running"), (1, "ask", "r1"), (1, "ask", "r2"), (1, "state", "waiting")]
    )
    assert world.notices.next_due() == T0 + 11
    world.run([(11, "tick")])
    (notice,) = world.out
    assert notice.title == "a1 (proj) asks to use Bash: touch r1"
    assert notice.message == "Bash: touch r1 (and 1 more)"
    assert [r.request_id for r in notice.requests] == ["r1", "r2"]
    assert notice.at == T0 + 1 and notice.key == "a1|e1|4|waiting"
    assert world.notices.next_due() is None


def test_a_question_without_request() -> None:
    world = World()
    world.run([(0, "state", "waiting"), (10, "tick")])
    (notice,) = world.out
    assert notice.title == "a1 (proj) waits for an answer" and notice.requests == ()


def test_a_new_epoch_forgets_the_open_episode() -> None:
    world = World()
    world.run([*ask_steps(None), (5, "attach", "e2"), (30, "tick")])
    assert world.out == []


def test_muted_after_the_episode_opened() -> None:
    world = World()
    world.run(ask_steps(None))
    world.setting = AgentNotify((), 10.0, ())
    world.run([(30, "tick")])
    assert world.out == []


def test_window_grows_with_the_delay() -> None:
    assert window(10) == 80 and window(0) == 60
    world = World(delay=100)
    world.emit("state", age=250.0, state="running")
    world.emit("error", age=250.0, error="x", turn_failed=True)  # 250 s old, window 260 s
    assert [n.kind for n in world.out] == ["failed"]


def test_links_bind_the_oldest_request() -> None:
    world = World()
    world.run([*ask_steps(None), (2, "ask", "r2"), (11, "tick")])
    (notice,) = world.out
    key = b"k" * 32
    linked = with_links(notice, "https://box.example:8765/", key, now=T0, ttl=60)
    assert linked.page_url == "https://box.example:8765/#/agent/a1"
    assert linked.approve_url and linked.deny_url
    assert linked.approve_url.startswith("https://box.example:8765/l/")
    allow = verify(linked.approve_url.rsplit("/", 1)[1], key, now=T0)
    deny = verify(linked.deny_url.rsplit("/", 1)[1], key, now=T0)
    assert (allow.decision, deny.decision) == ("allow", "deny")
    assert allow.request_id == "r1" and allow.agent_id == "a1"
    assert datetime.fromisoformat(allow.created_at) == datetime.fromtimestamp(T0 + 1, UTC)
    assert allow.expires == int(T0 + 60)
    assert with_links(notice, None, key, now=T0, ttl=60) == notice


def test_no_links_without_a_request() -> None:
    notice = sample_notice(T0)
    linked = with_links(notice, "https://x.example", b"k" * 32, now=T0, ttl=60)
    assert linked.approve_url is None and linked.page_url == "https://x.example/#/agent/notify-test"


def test_notice_json() -> None:
    world = World()
    world.run([*ask_steps(None), (11, "tick")])
    data = world.out[0].to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["kind"] == "waiting" and data["agent_id"] == "a1" and data["project"] == "proj"
    assert data["at"] == datetime.fromtimestamp(T0 + 1, UTC).isoformat().replace("+00:00", "Z")
    assert data["requests"][0]["tool"] == "Bash" and data["test"] is False


def test_overrides_from_the_config() -> None:
    config = parse_config(
        """
[notify]
delay = "5s"
[notify.channels.hook]
type = "webhook"
url = "http://127.0.0.1:1/"
[notify.channels.phone]
type = "ntfy"
url = "https://ntfy.example/t"
[[notify.override]]
agent = "quiet-*"
mute = true
[[notify.override]]
project = "web"
channels = ["phone"]
"""
    )
    now = [T0]
    notices = Notices(config.notify.for_agent, lambda: now[0])
    notices.attached("quiet-1", "e", "web", "idle")
    notices.attached("loud", "e", "web", "idle")
    for agent_id in ("quiet-1", "loud"):
        stamp = datetime.fromtimestamp(T0, UTC)
        event = {"type": "state", "agent_id": agent_id, "offset": 1, "timestamp": stamp}
        notices.event(StreamEvent.model_validate({**event, "state": "waiting"}))
    now[0] = T0 + 5
    assert [n.agent_id for n in notices.due()] == ["loud"]
    assert config.notify.for_agent("loud", "web").channels == ("phone",)
    assert config.notify.for_agent("other", "api").channels == ("hook", "phone")


def test_a_restarted_daemon_replaying_an_open_episode() -> None:
    """The same events seen again by a new tracker: the notice is due at the same time,
    with the same key (the ledger then sends it once)."""
    first, second = World(), World()
    steps = ask_steps(None)
    first.run(steps)
    second.now = T0 + 6  # restarted 5 s into the episode: replays what it missed
    for _, what, *args in steps:
        if what == "state":
            second.emit("state", age=5.0 if args[0] == "waiting" else 6.0, state=args[0])
        elif what == "ask":
            second.emit(
                "permission_request",
                age=5.0,
                request={
                    "request_id": args[0],
                    "tool_name": "Bash",
                    "tool_input": "touch r1",
                    "created_at": datetime.fromtimestamp(T0 + 1, UTC),
                },
            )
    assert second.notices.next_due() == first.notices.next_due() == T0 + 11
    first.run([(11, "tick")])
    second.run([(11, "tick")])
    assert [n.key for n in second.out] == [n.key for n in first.out] == ["a1|e1|3|waiting"]
    assert second.out[0].requests == first.out[0].requests


def test_a_crossed_budget_needs_a_person_other_records_do_not() -> None:
    world = World()
    crossed = {"action": "budget_exceeded", "actor": "host", "reason": "spent $5.10 of $5.00"}
    world.emit("governance", governance=crossed)
    world.emit("governance", governance={"action": "budget_changed", "actor": "cli"})
    world.emit("governance", governance={"action": "paused", "actor": "host"})
    assert [(n.kind, n.offset) for n in world.out] == [("failed", 1)]
    assert "over budget: spent $5.10 of $5.00" in world.out[0].title
    muted = World(("waiting",))
    muted.emit("governance", governance=crossed)
    assert muted.out == []


def test_output_events_are_not_looked_at() -> None:
    """The daemon's hot path: an output event costs no settings lookup (a stat)."""
    calls: list[str] = []

    def settings(agent_id: str, project: str) -> AgentNotify:
        calls.append(agent_id)
        return AgentNotify(DEFAULT, 10.0, ())

    notices = Notices(settings, lambda: T0)
    stamp = datetime.fromtimestamp(T0, UTC)
    for offset in range(1, 101):
        event = {"type": "output", "agent_id": "a1", "offset": offset, "timestamp": stamp}
        assert notices.event(StreamEvent.model_validate({**event, "data": "x"})) == []
    assert calls == []
    event = {"type": "state", "agent_id": "a1", "offset": 101, "timestamp": stamp}
    notices.event(StreamEvent.model_validate({**event, "state": "running"}))
    assert calls == ["a1"]
