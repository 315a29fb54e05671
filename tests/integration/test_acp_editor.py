"""``agenthost acp ID`` against real hosts, with the official ACP SDK as the editor.

The SDK's client connection runs the bridge as a subprocess (as Zed would); a raw
observer records every message the bridge writes, in order, so what an editor received
can be compared, offset by offset, with what the host's stream and history hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from acp import schema as sdk
from acp import spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.exceptions import RequestError

from agenthost.client import AsyncClient
from agenthost.protocol import HistoryEntry

from conftest import HostFactory
from hosttools import DEADLINE, PY, lines_agent, start_host

T = TypeVar("T")
SESSION_UPDATE = "session/update"


async def until(probe: Callable[[], Awaitable[T]], what: str) -> T:
    """Poll the async ``probe`` until it gives a truthy value; fail after DEADLINE."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not (value := await probe()):
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)  # polling interval of a condition wait
    return value


class Editor:
    """An ACP client (the SDK's) recording what the bridge sent; answers permission
    questions with ``answer`` (an optionId; None: never)."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.answer: str | None = "allow"
        self.asked: list[dict[str, Any]] = []
        self.conn: ClientSideConnection | None = None
        self.proc: asyncio.subprocess.Process | None = None

    # the SDK's Client interface
    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> sdk.RequestPermissionResponse:
        if self.answer is None:
            await asyncio.Future()  # never answered (until the bridge withdraws it)
        outcome = sdk.AllowedOutcome(outcome="selected", option_id=self.answer)
        return sdk.RequestPermissionResponse(outcome=outcome)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None  # read from the raw messages (in order, with their _meta)

    def observe(self, event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING:
            self.received.append(event.message)
            if event.message.get("method") == "session/request_permission":
                self.asked.append(event.message)

    # what it received
    def updates(self) -> list[dict[str, Any]]:
        return [m["params"] for m in self.received if m.get("method") == SESSION_UPDATE]

    def offsets(self) -> list[int]:
        return [u["_meta"]["agenthost"]["offset"] for u in self.updates()]

    def kinds_after(self, offset: int) -> list[tuple[int, str]]:
        return [
            (u["_meta"]["agenthost"]["offset"], u["update"]["sessionUpdate"])
            for u in self.updates()
            if u["_meta"]["agenthost"]["offset"] > offset
        ]

    def cancelled_requests(self) -> list[Any]:
        return [
            m["params"]["requestId"] for m in self.received if m.get("method") == "$/cancel_request"
        ]

    @property
    def c(self) -> ClientSideConnection:
        assert self.conn is not None
        return self.conn


@contextlib.asynccontextmanager
async def editor(home: Path, agent_id: str, log: str = "editor") -> AsyncIterator[Editor]:
    """``agenthost acp agent_id`` run by the SDK's client; its stderr in a log file."""
    ed = Editor()
    err = os.open(home / f"{log}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        async with spawn_agent_process(
            ed,
            PY,
            "-m",
            "agenthost",
            "acp",
            agent_id,
            "--home",
            str(home),
            "--log-level",
            "info",
            env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
            transport_kwargs={"stderr": err, "shutdown_timeout": 10.0},
            observers=[ed.observe],
        ) as (conn, proc):
            ed.conn, ed.proc = conn, proc
            await conn.initialize(protocol_version=1)
            yield ed
    finally:
        os.close(err)


async def history(client: AsyncClient) -> list[HistoryEntry]:
    return (await client.history()).entries


async def turn_done(client: AsyncClient, turns: int) -> None:
    agent = None

    async def idle() -> bool:
        nonlocal agent
        agent = (await client.status()).agent
        return agent.state == "idle" and (agent.turns or 0) >= turns

    try:
        await until(idle, f"{turns} turns done")
    except AssertionError:
        raise AssertionError(f"{turns} turns not done: {agent!r}") from None


def expected_kind(entry: HistoryEntry) -> str:
    if entry.role == "user":
        return "user_message_chunk"
    if entry.role == "assistant":
        return "agent_message_chunk"
    return "tool_call" if entry.tool_result is None else "tool_call_update"


@pytest.mark.asyncio
async def test_load_replays_the_journal_then_a_prompt_runs_live(
    home: Path, host_factory: HostFactory
) -> None:
    host_factory("ed")
    async with AsyncClient("ed", home=home) as client:
        await client.send("hello there agent")
        await turn_done(client, 1)
        before = await history(client)
        async with editor(home, "ed") as ed:
            listed = await ed.c.list_sessions()
            assert [s.session_id for s in listed.sessions] == ["ed"]
            assert listed.sessions[0].cwd == (await client.status()).agent.worktree
            loaded = await ed.c.load_session(cwd="/", session_id="ed")  # (null: no fields)
            assert loaded is None or loaded.model_dump(exclude_none=True) == {}
            # the replay is the conversation, one update per history entry, in order
            assert [
                (u["_meta"]["agenthost"]["offset"], u["update"]["sessionUpdate"])
                for u in ed.updates()
            ] == [(e.offset, expected_kind(e)) for e in before]
            assert ed.updates()[0]["update"]["content"]["text"] == "hello there agent"
            head = ed.offsets()[-1]
            answer = await ed.c.prompt(session_id="ed", prompt=[text_block("/tool echo hi")])
            assert answer.stop_reason == "end_turn"
            turn = [e for e in await history(client) if e.offset is not None and e.offset > head]
            assert turn[0].role == "user" and turn[0].content == "/tool echo hi"
            # its own message is not echoed; the rest of the turn is there, live
            assert ed.kinds_after(head) == [(e.offset, expected_kind(e)) for e in turn[1:]]
            epochs = {u["_meta"]["agenthost"]["epoch"] for u in ed.updates()}
            assert epochs == {(await client.attach(0)).response.epoch}
        assert ed.proc is not None and ed.proc.returncode == 0  # EOF: a quiet exit
        assert (await client.status()).agent.state == "idle"  # the agent is unaffected


@pytest.mark.asyncio
@pytest.mark.parametrize(("option", "result"), [("allow", "(demo) ran"), ("deny", "denied")])
async def test_a_permission_round_trip(
    home: Path, host_factory: HostFactory, option: str, result: str
) -> None:
    host_factory("perm")
    async with AsyncClient("perm", home=home) as client, editor(home, "perm") as ed:
        await ed.c.new_session(cwd="/")
        ed.answer = option
        answer = await ed.c.prompt(session_id="perm", prompt=[text_block("/ask")])
        assert answer.stop_reason == "end_turn"
        assert len(ed.asked) == 1
        params = ed.asked[0]["params"]
        assert params["toolCall"]["title"] == "Bash: touch demo-was-here"
        assert {o["optionId"]: o["kind"] for o in params["options"]} == {
            "allow": "allow_once",
            "deny": "reject_once",
        }
        tool = [e for e in await history(client) if e.tool_result is not None]
        assert result in (tool[-1].tool_result or "")
        final = [
            u["update"] for u in ed.updates() if u["update"]["sessionUpdate"] == "tool_call_update"
        ]
        assert final[-1]["status"] == ("completed" if option == "allow" else "failed")


@pytest.mark.asyncio
async def test_a_request_answered_elsewhere_first_is_withdrawn(
    home: Path, host_factory: HostFactory
) -> None:
    host_factory("race")
    async with AsyncClient("race", home=home) as client, editor(home, "race") as ed:
        await ed.c.new_session(cwd="/")
        ed.answer = None  # the editor's user is away
        prompt = asyncio.create_task(ed.c.prompt(session_id="race", prompt=[text_block("/ask")]))
        await until(lambda: _true(ed.asked), "the editor is asked")
        pending = await client.pending()
        await client.respond(pending[0].request_id, "allow")  # another client answers
        assert (await prompt).stop_reason == "end_turn"
        assert ed.cancelled_requests() == [ed.asked[0]["id"]]
        assert any("(demo) ran" in (e.tool_result or "") for e in await history(client))


@pytest.mark.asyncio
@pytest.mark.parametrize("command", ["/sleep 60", "/ask"])
async def test_cancel_mid_turn_answers_cancelled(
    home: Path, host_factory: HostFactory, command: str
) -> None:
    host_factory("cancel")
    async with AsyncClient("cancel", home=home) as client, editor(home, "cancel") as ed:
        await ed.c.new_session(cwd="/")
        ed.answer = None  # (/ask: the question stays open until the cancel)
        prompt = asyncio.create_task(ed.c.prompt(session_id="cancel", prompt=[text_block(command)]))
        await until(
            lambda: _true([k for _, k in ed.kinds_after(0) if k == "tool_call"]),
            "the turn's tool call",
        )
        if command == "/ask":
            await until(lambda: _true(ed.asked), "the question")
        await ed.c.cancel(session_id="cancel")
        assert (await prompt).stop_reason == "cancelled"
        assert (await client.status()).agent.state == "idle"
        assert await client.pending() == []
        # an open question the interrupt withdrew is withdrawn from the editor too
        assert ed.cancelled_requests() == [m["id"] for m in ed.asked]


@pytest.mark.asyncio
async def test_a_killed_editor_resumes_exactly_after_what_it_saw(
    home: Path, host_factory: HostFactory
) -> None:
    host_factory("kill")
    async with AsyncClient("kill", home=home) as client:
        await client.send("before the editors")
        await turn_done(client, 1)
        async with editor(home, "kill", "first") as first:
            await first.c.load_session(cwd="/", session_id="kill")
            loaded = first.offsets()[-1]
            running = asyncio.create_task(
                first.c.prompt(session_id="kill", prompt=[text_block("/sleep 60")])
            )
            await until(
                lambda: _true([k for _, k in first.kinds_after(loaded) if k == "tool_call"]),
                "the turn's first update",
            )
            assert first.proc is not None
            first.proc.send_signal(signal.SIGKILL)  # mid-turn
            await first.proc.wait()
            with pytest.raises(ConnectionError):
                await running  # the editor is gone: no answer
            seen = list(first.updates())
        own = [e.offset for e in await history(client) if e.content == "/sleep 60"]
        await client.interrupt()  # the turn goes on without the editor, then ends

        async def interrupted() -> bool:
            entries = await history(client)
            idle = (await client.status()).agent.state == "idle"
            return idle and any(e.model_extra and e.model_extra.get("interrupted") for e in entries)

        await until(interrupted, "the interrupted turn's end")
        await client.send("/tool echo after")
        await turn_done(client, 2)
        head = (await client.history(1)).offset
        last = seen[-1]["_meta"]["agenthost"]
        async with editor(home, "kill", "second") as second:
            meta = {"agenthost": {"after": last["offset"], "epoch": last["epoch"]}}
            await second.c.load_session(cwd="/", session_id="kill", **meta)
            rest = second.updates()
        union = [u["_meta"]["agenthost"]["offset"] for u in seen + rest]
        assert union == sorted(set(union))  # none repeated, in stream order
        # what the stream holds that an editor shows: every chat entry (but the first
        # editor's own prompt) and every error
        events = []
        async for event in client.attach(0):
            events.append(event)
            if event.offset >= head:
                break
        shown = [
            e.offset
            for e in events
            if (e.type == "chat_entry" and e.offset not in own) or e.type == "error"
        ]
        assert union == shown
        assert rest[0]["_meta"]["agenthost"]["offset"] > last["offset"]


@pytest.mark.asyncio
async def test_two_editors_at_once_see_each_others_messages(
    home: Path, host_factory: HostFactory
) -> None:
    host_factory("two")
    async with editor(home, "two", "a") as a, editor(home, "two", "b") as b:
        await a.c.load_session(cwd="/", session_id="two")
        await b.c.new_session(cwd="/")
        answer = await a.c.prompt(session_id="two", prompt=[text_block("hello from a")])
        assert answer.stop_reason == "end_turn"
        await until(lambda: _true(b.offsets() and b.offsets()[-1] >= a.offsets()[-1]), "b")
        user = [u for u in b.updates() if u["update"]["sessionUpdate"] == "user_message_chunk"]
        assert [u["update"]["content"]["text"] for u in user] == ["hello from a"]
        assert not [u for u in a.updates() if u["update"]["sessionUpdate"] == "user_message_chunk"]
        others = [
            o for o in b.offsets() if o not in {u["_meta"]["agenthost"]["offset"] for u in user}
        ]
        assert others == a.offsets()


@pytest.mark.asyncio
async def test_an_agent_without_turns(home: Path, host_factory: HostFactory) -> None:
    code = "import sys\nfor line in sys.stdin:\n    print(line.strip().upper(), flush=True)\n"
    host_factory("plain", "--agent", "lines", command=lines_agent(code))
    async with editor(home, "plain") as ed:
        await ed.c.new_session(cwd="/")
        answer = await ed.c.prompt(session_id="plain", prompt=[text_block("shout this")])
        assert answer.stop_reason == "end_turn"  # no turns: answered once sent
        await until(lambda: _true(ed.updates()), "the agent's output")
        texts = [u["update"]["content"]["text"] for u in ed.updates()]
        assert texts == ["SHOUT THIS\n"]
        assert ed.updates()[0]["update"]["sessionUpdate"] == "agent_message_chunk"


@pytest.mark.asyncio
async def test_a_host_restart_loses_and_repeats_nothing(home: Path) -> None:
    host = start_host(home, "boot")
    try:
        async with editor(home, "boot") as ed:
            await ed.c.load_session(cwd="/", session_id="boot")
            first = await ed.c.prompt(session_id="boot", prompt=[text_block("one")])
            assert first.stop_reason == "end_turn"
            host.proc.send_signal(signal.SIGTERM)
            host.proc.wait(DEADLINE)
            with pytest.raises(RequestError) as failed:  # no host: the editor is told
                await ed.c.prompt(session_id="boot", prompt=[text_block("two")])
            assert "no host" in str(failed.value.data or failed.value)
            host = start_host(home, "boot")  # the same journal: the same stream goes on
            again = await ed.c.prompt(session_id="boot", prompt=[text_block("three")])
            assert again.stop_reason == "end_turn"
            offsets = ed.offsets()
            assert offsets == sorted(set(offsets))
            async with AsyncClient("boot", home=home) as client:
                entries = await history(client)
            own = {e.offset for e in entries if e.role == "user"}
            assert offsets == [e.offset for e in entries if e.offset not in own]
    finally:
        if host.proc.poll() is None:
            host.proc.kill()
            host.proc.wait(DEADLINE)


@pytest.mark.asyncio
async def test_no_host_fails_the_load_with_the_reason(home: Path) -> None:
    async with editor(home, "nobody") as ed:
        with pytest.raises(RequestError) as failed:
            await ed.c.load_session(cwd="/", session_id="nobody")
        assert "no host is running" in json.dumps(failed.value.to_error_obj())
        with pytest.raises(RequestError) as unknown:
            await ed.c.load_session(cwd="/", session_id="somebody-else")
        assert unknown.value.code == -32002


@pytest.mark.asyncio
async def test_garbage_from_the_editor_is_answered_and_the_bridge_goes_on(
    home: Path, host_factory: HostFactory
) -> None:
    host_factory("junk")
    proc = await asyncio.create_subprocess_exec(
        PY, "-m", "agenthost", "acp", "junk", "--home", str(home),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    garbage = [
        b"this is not json",
        b"[1, 2, 3]",
        b'{"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": "x"}',
        b'{"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": 5}}',
        b'{"jsonrpc": "2.0", "id": 3, "method": "nope/nope"}',
        b'{"jsonrpc": "2.0", "id": 4, "method": "initialize", "pad": "' + b"x" * (9 << 20) + b'"}',
        b"\xff\xfe not utf-8 \x00",
    ]
    for line in garbage:
        proc.stdin.write(line + b"\n")
    proc.stdin.write(b'{"jsonrpc": "2.0", "id": 5, "method": "initialize", '
                     b'"params": {"protocolVersion": 1}}\n')  # fmt: skip
    await proc.stdin.drain()
    answers = [json.loads(await proc.stdout.readline()) for _ in range(len(garbage) + 1)]
    codes = [a["error"]["code"] for a in answers[:-1]]
    assert codes == [-32700, -32600, -32602, -32602, -32601, -32600, -32700]
    assert answers[-1]["id"] == 5 and answers[-1]["result"]["protocolVersion"] == 1
    proc.stdin.close()
    assert await proc.wait() == 0
    assert await proc.stdout.read() == b""


async def _true(value: Any) -> Any:
    return value


ACP_AGENT = Path(__file__).resolve().parent.parent / "fixtures" / "acp_agent.py"


@pytest.mark.asyncio
async def test_a_hosted_acp_agent_is_served_with_its_own_options_and_stop_reasons(
    home: Path, host_factory: HostFactory
) -> None:
    worktree = home / "wt"
    worktree.mkdir()
    command = [PY, "-u", str(ACP_AGENT), "--state", str(home / "sessions")]
    host = host_factory("inner", "--agent", "acp", "--cwd", str(worktree), command=command)
    host.wait_state("idle")
    async with AsyncClient("inner", home=home) as client, editor(home, "inner") as ed:
        await ed.c.new_session(cwd=str(worktree))
        start = (await client.history(1)).offset
        planned = await ed.c.prompt(session_id="inner", prompt=[text_block("/plan")])
        assert planned.stop_reason == "end_turn"
        kinds = [k for _, k in ed.kinds_after(start)]
        assert kinds == ["agent_thought_chunk", "plan", "agent_message_chunk"]
        plan = [u["update"] for u in ed.updates() if u["update"]["sessionUpdate"] == "plan"]
        assert [e["status"] for e in plan[0]["entries"]] == [
            "completed",
            "in_progress",
            "pending",
        ]
        refused = await ed.c.prompt(session_id="inner", prompt=[text_block("/refuse")])
        assert refused.stop_reason == "refusal"  # the agent's own stop reason
        ed.answer = "allow-always"  # one of the agent's options, by its id
        asked = await ed.c.prompt(session_id="inner", prompt=[text_block("/ask")])
        assert asked.stop_reason == "end_turn"
        options = ed.asked[0]["params"]["options"]
        assert [(o["optionId"], o["kind"]) for o in options] == [
            ("allow-once", "allow_once"),
            ("allow-always", "allow_always"),
            ("reject-once", "reject_once"),
            ("reject-always", "reject_always"),
        ]
        results = [e.tool_result for e in await history(client) if e.tool_result]
        assert results and "ran: touch asked.txt" in results[-1]


async def bridge_process(home: Path, agent_id: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        PY, "-m", "agenthost", "acp", agent_id, "--home", str(home),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.asyncio
async def test_what_was_asked_before_the_editor_left_is_still_answered(
    home: Path, host_factory: HostFactory
) -> None:
    host_factory("bye")
    proc = await bridge_process(home, "bye")
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "session/list"}\n')
    proc.stdin.close()  # at once: the status request is still to be made
    assert await proc.wait() == 0
    answer = json.loads(await proc.stdout.readline())
    assert [s["sessionId"] for s in answer["result"]["sessions"]] == ["bye"]


@pytest.mark.asyncio
async def test_an_editor_that_closes_its_end_of_stdout_ends_the_bridge(
    home: Path, host_factory: HostFactory
) -> None:
    host_factory("deaf")
    read_end, write_end = os.pipe()
    proc = await asyncio.create_subprocess_exec(
        PY, "-m", "agenthost", "acp", "deaf", "--home", str(home),
        stdin=asyncio.subprocess.PIPE, stdout=write_end, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    os.close(write_end)
    assert proc.stdin is not None
    init = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}\n'
    )
    proc.stdin.write(init)
    with os.fdopen(read_end, "rb") as out:
        first = await asyncio.get_running_loop().run_in_executor(None, out.readline)
    assert json.loads(first)["id"] == 1  # (and now the editor's end is closed)
    assert await asyncio.wait_for(proc.wait(), DEADLINE) == 0  # with stdin still open


def test_regular_files_as_stdin_and_stdout(home: Path, host_factory: HostFactory) -> None:
    # not pipes (uvloop aborts on a regular file given to a pipe transport): read and
    # written directly
    host_factory("files")
    requests = home / "in.jsonl"
    requests.write_bytes(
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}\n'
        b'{"jsonrpc": "2.0", "id": 2, "method": "session/list"}'  # (no newline at the end)
    )
    answers = home / "out.jsonl"
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        argv = [PY, "-m", "agenthost", "acp", "files", "--home", str(home)]
        assert subprocess.run(argv, stdin=stdin, stdout=stdout, timeout=DEADLINE).returncode == 0
    got = [json.loads(line) for line in answers.read_bytes().splitlines()]
    assert [m["id"] for m in got] == [1, 2]
    assert got[1]["result"]["sessions"][0]["sessionId"] == "files"
