"""Terminal agents (issue 30) side by side in one run: the host, a plain PTY relay, tmux.

    .venv/bin/python benchmarks/terminal.py [--mb 50] [--repeat 3] [--no-docs] [--quick]
    .venv/bin/python benchmarks/terminal.py --baseline /tmp/old   # + an older host

``--baseline DIR`` adds the host of the ``agenthost`` package in DIR (e.g. ``git archive
COMMIT | tar -x -C DIR``) as a fourth system, alternating with the others.

* **Floods.** One producer floods its terminal: ``cat`` of a file of mixed text (words,
  some UTF-8, SGR colours on a third of the lines; ``--mb`` MB) or ``yes`` through
  ``head -c`` (2-byte lines). It waits on a FIFO, so the clock starts when the FIFO is
  written, and ends with a marker line. Behind each system, in the same round:
  - **host**: ``agenthost serve --agent pty`` (default ring, journal on, the emulator
    fed); 1 or 10 raw connections ``host.attach`` and decode every ``terminal`` event
    (JSON, ``event_bytes``), check the offsets follow on, count the bytes; client 0
    hashes every byte and must equal the terminal's bytes exactly;
  - **relay**: ``term_relay.py``, the floor (a Python process owning the pty, writing
    each read to every Unix-socket client, no JSON, no emulator); same checks;
  - **tmux**: ``tmux -L bench-PID new-session -d`` running the producer (status line
    off, so the pane is the same 80x24), 1 or 10 ``tmux attach`` clients, each in a
    pty of its own (80x24, TERM=xterm-256color) drained by this process; a client is
    done when the marker is on its screen. tmux sends each client its *rendering* of
    the pane, not the program's bytes, so "bytes to each client" differs.
  MB/s is the terminal's bytes (what the master side reads: the producer's output with
  ``\\n`` made ``\\r\\n``) divided by the wall time from the FIFO write to the last
  client done: compare it only as a ratio within the run. CPU is the kernel's clock
  of the process (``/proc``, every thread): the host; the relay; tmux's server (its
  attach clients apart). Median of ``--repeat`` rounds; the systems alternate.
* **Snapshots.** A pty host of 80x24 and one of 200x60 (``--size``) paint 2,000 lines
  of the mixed text (so the emulator's 1,000 lines of scrollback are full); then
  ``host.screen`` 20 times on one connection: the response's bytes and the host's CPU
  per request. Also ``Screen.snapshot`` alone, in this process.
* **Memory.** 5 idle pty hosts and 5 idle lines hosts side by side (``sleep infinity``
  each): PSS (``/proc/PID/smaps_rollup``, shared pages split between the sharers) and
  private memory of each host process; and a pty host of 200x60 after the snapshot's
  2,000 lines (full scrollback).
* **The emulator's share.** ``Screen.feed`` alone, in this process, on the same bytes
  cut as the host cut them (the mean event size of the host run): its CPU per MB.

Prints the tables; rewrites the figures of docs/performance.md's "Terminal agents
(issue 30)" section (between its ``terminal-bench`` markers) unless ``--no-docs`` or
``--quick``; ``--out`` writes the raw results as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import random
import secrets
import selectors
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import PY, Procs, kill_all, process_cpu_ns, request  # noqa: E402

from agenthost.terminal.chunks import event_bytes  # noqa: E402
from agenthost.terminal.screen import Screen  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RELAY = str(HERE / "term_relay.py")
DOC = ROOT / "docs" / "performance.md"
START, END = "<!-- terminal-bench:start -->", "<!-- terminal-bench:end -->"
MB = 1e6
MiB = 1 << 20
COLS, ROWS = 80, 24
DEADLINE = 600.0  # seconds for one flood to reach every client
SYSTEMS = ("host", "relay", "tmux")


# --- the producers --------------------------------------------------------------------


def mixed_text(size: int, seed: int = 30) -> bytes:
    """``size`` bytes of lines of words: some UTF-8, a third with an SGR colour."""
    rnd = random.Random(seed)
    words = (
        "the host keeps a screen for every terminal agent and its clients attach by "
        "offset exactly once while a daemon may die"
    ).split() + ["café", "naïve", "größe", "日本語", "→", "✓", "—"]
    colours = ["\x1b[31m", "\x1b[32m", "\x1b[1;33m", "\x1b[38;5;208m", "\x1b[38;2;9;200;90m"]
    lines, total = [], 0
    while total < size:
        picked = [rnd.choice(words) for _ in range(rnd.randint(2, 18))]
        if rnd.random() < 0.3:
            i = rnd.randrange(len(picked))
            picked[i] = rnd.choice(colours) + picked[i] + "\x1b[0m"
        line = (" ".join(picked) + "\n").encode()
        lines.append(line)
        total += len(line)
    data = b"".join(lines)[:size]
    return data[: data.rindex(b"\n") + 1]


@dataclass
class Producer:
    """A program that floods its terminal once the FIFO ``go`` is written."""

    name: str
    body: str  # shell code that floods
    content: bytes  # what it writes before the marker
    token: str = field(default_factory=lambda: secrets.token_hex(4))

    @property
    def marker(self) -> bytes:
        return f"BENCH-END-{self.token}".encode()

    def argv(self, fifo: Path, data: Path) -> list[str]:
        script = (
            f'read go < "$0"; {self.body}; '
            f"printf '\\033[0m\\nBENCH-END-{self.token}\\n'; exec sleep 86400"
        )
        return ["sh", "-c", script, str(fifo), str(data)]

    def terminal_bytes(self) -> bytes:
        """What the master side reads: the pty's output processing makes \\n \\r\\n."""
        return (self.content + b"\x1b[0m\n" + self.marker + b"\n").replace(b"\n", b"\r\n")


# --- clients: one selectors loop over sockets and pty masters ----------------------------


class Sink:
    """One client: a host connection (``events``), a relay connection or a tmux client's
    pty master (``raw``)."""

    def __init__(self, fd: int, mode: str, hasher: bool = False) -> None:
        self.fd = fd
        self.mode = mode
        self.hasher = hashlib.sha256() if hasher else None
        self.buf = b""
        self.tail = b""
        self.bytes = 0
        self.events = 0
        self.next_offset: int | None = None
        self.error: str | None = None
        self.done_ns = 0
        self.counting = False

    def feed(self, chunk: bytes, marker: bytes, expect: int) -> None:
        if self.mode == "raw":
            self._data(chunk, marker)
        else:
            self._events(chunk, marker)
        if not self.done_ns and self.counting:
            whole = self.mode != "tmux" and self.bytes >= expect
            if whole or (self.mode == "tmux" and marker in self.tail):
                self.done_ns = time.monotonic_ns()

    def _events(self, chunk: bytes, marker: bytes) -> None:
        lines = (self.buf + chunk).split(b"\n")
        self.buf = lines.pop()
        for line in lines:
            event = json.loads(line)
            if event.get("kind") != "event":
                continue
            offset = event["offset"]
            if self.next_offset is not None and offset != self.next_offset and not self.error:
                self.error = f"offset {offset} after {self.next_offset - 1}"
            self.next_offset = offset + 1
            if event["type"] == "terminal":
                self.events += 1
                self._data(event_bytes(event), marker)

    def _data(self, data: bytes, marker: bytes) -> None:
        if not self.counting:
            return
        self.bytes += len(data)
        if self.hasher is not None:
            self.hasher.update(data)
        self.tail = (self.tail + data)[-(len(marker) + 64) :]


def pump(sinks: list[Sink], marker: bytes, expect: int, until: float) -> None:
    """Read every sink until each is done (or ``until``, monotonic seconds)."""
    sel = selectors.DefaultSelector()
    for sink in sinks:
        if not sink.done_ns:
            sel.register(sink.fd, selectors.EVENT_READ, sink)
    buffer = bytearray(1 << 18)
    view = memoryview(buffer)
    try:
        while sel.get_map() and time.monotonic() < until:
            for key, _ in sel.select(0.5):
                sink = key.data
                try:
                    n = os.readv(sink.fd, [buffer])
                except BlockingIOError:
                    continue
                except OSError:
                    n = 0
                if not n:
                    sink.error = sink.error or "closed"
                    sel.unregister(sink.fd)
                    continue
                sink.feed(bytes(view[:n]), marker, expect)
                if sink.done_ns:
                    sel.unregister(sink.fd)
    finally:
        sel.close()


def settle(sinks: list[Sink], quiet: float = 0.3, limit: float = 10.0) -> None:
    """Drain what the clients were sent before the flood (a replay, tmux's first
    paint) until none received anything for ``quiet`` seconds."""
    sel = selectors.DefaultSelector()
    for sink in sinks:
        sel.register(sink.fd, selectors.EVENT_READ, sink)
    end = time.monotonic() + limit
    try:
        while time.monotonic() < end:
            ready = sel.select(quiet)
            if not ready:
                return
            for key, _ in ready:
                with contextlib.suppress(BlockingIOError):
                    key.data.feed(os.read(key.fd, 1 << 18), b"\0", 1 << 62)
    finally:
        sel.close()


# --- one flood behind each system ---------------------------------------------------------


@dataclass
class Setup:
    """Where a round's files are."""

    tmp: Path
    fifo: Path
    data: Path


def trigger(fifo: Path) -> int:
    with open(fifo, "w") as fh:
        start = time.monotonic_ns()
        fh.write("go\n")
    return start


def result(
    system: str,
    sinks: list[Sink],
    producer: Producer,
    start_ns: int,
    cpu_ns: int,
    other_ns: int,
    clients_ns: int,
) -> dict[str, Any]:
    expected = producer.terminal_bytes()
    done = [s.done_ns for s in sinks]
    complete = all(done) and not any(s.error for s in sinks)
    if system != "tmux":
        complete = complete and all(s.bytes == len(expected) for s in sinks)
        digest = sinks[0].hasher.hexdigest() if sinks[0].hasher else ""
        complete = complete and digest == hashlib.sha256(expected).hexdigest()
    wall = (max(done) - start_ns) / 1e9 if all(done) else float("nan")
    megabytes = len(expected) / MB
    events = [s.events for s in sinks if s.events]
    return {
        "system": system,
        "clients": len(sinks),
        "mb": megabytes,
        "wall_s": wall,
        "mb_per_s": megabytes / wall,
        "cpu_ms_per_mb": cpu_ns / 1e6 / megabytes,
        "other_cpu_ms_per_mb": other_ns / 1e6 / megabytes,
        "clients_busy": clients_ns / 1e9 / wall,
        "bytes_per_client": statistics.fmean(s.bytes for s in sinks),
        "events": statistics.fmean(events) if events else 0,
        "complete": complete,
        "errors": sorted({s.error for s in sinks if s.error}),
    }


def start_pty_host(procs: Procs, argv: list[str], tree: str | None) -> Any:
    """A pty host, of this checkout or of the ``agenthost`` package in ``tree``."""
    if tree is None:
        return procs.start_host("pty", argv)
    saved, cwd = os.environ.get("PYTHONPATH"), os.getcwd()
    # ``python -m`` looks in its working directory first, then PYTHONPATH
    os.environ["PYTHONPATH"] = str(Path(tree).resolve())
    os.chdir(tree)
    try:
        return procs.start_host("pty", argv)
    finally:
        os.chdir(cwd)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def run_host(
    procs: Procs,
    setup: Setup,
    producer: Producer,
    clients: int,
    profile: str | None,
    tree: str | None = None,
) -> dict[str, Any]:
    host = start_pty_host(procs, producer.argv(setup.fifo, setup.data), tree)
    conns, sinks = [], []
    try:
        for i in range(clients):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(host.socket)
            conn.sendall(b'{"type":"host.attach","id":"a","payload":{"offset":0}}\n')
            conns.append(conn)
            sinks.append(Sink(conn.fileno(), "events", hasher=i == 0))
        settle(sinks)
        for conn in conns:
            conn.setblocking(False)
        for sink in sinks:
            sink.counting = True
        spy = _profile(host.proc.pid, profile)
        cpu, mine = process_cpu_ns(host.proc.pid), time.process_time_ns()
        start = trigger(setup.fifo)
        pump(sinks, producer.marker, len(producer.terminal_bytes()), time.monotonic() + DEADLINE)
        cpu, mine = process_cpu_ns(host.proc.pid) - cpu, time.process_time_ns() - mine
        if spy is not None:
            spy.send_signal(2)
            spy.wait(60)
        name = "host" if tree is None else "baseline host"
        return result(name, sinks, producer, start, cpu, 0, mine)
    finally:
        for conn in conns:
            conn.close()
        procs.stop_host(host)


def _profile(pid: int, path: str | None) -> subprocess.Popen[bytes] | None:
    if path is None:
        return None
    if path.endswith(".perf"):  # on-CPU samples, C and kernel included
        argv = ["perf", "record", "-F", "999", "-g", "-p", str(pid), "-o", path]
    else:  # py-spy samples wall time: a read that waits for the kernel counts
        spy = shutil.which("py-spy", path=str(Path(PY).parent)) or "py-spy"
        argv = [spy, "record", "-p", str(pid), "-f", "raw", "-r", "250", "-o", path]
        argv.append("--nonblocking")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)  # py-spy attaches
    return proc


def run_relay(procs: Procs, setup: Setup, producer: Producer, clients: int) -> dict[str, Any]:
    path = setup.tmp / "relay.sock"
    path.unlink(missing_ok=True)  # a killed relay leaves it
    argv = [PY, RELAY, "--socket", str(path), "--clients", str(clients)]
    relay = procs.popen(
        [*argv, "--", *producer.argv(setup.fifo, setup.data)], stdout=subprocess.PIPE
    )
    assert relay.stdout is not None
    conns, sinks, kids = [], [], []
    try:
        for i in range(clients):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conns.append(conn)
            _connect(conn, str(path))
            sinks.append(Sink(conn.fileno(), "raw", hasher=i == 0))
        if relay.stdout.readline().strip() != b"READY":
            raise RuntimeError("the relay did not start")
        kids = psutil.Process(relay.pid).children(recursive=True)
        for conn in conns:
            conn.setblocking(False)
        for sink in sinks:
            sink.counting = True
        cpu, mine = process_cpu_ns(relay.pid), time.process_time_ns()
        start = trigger(setup.fifo)
        pump(sinks, producer.marker, len(producer.terminal_bytes()), time.monotonic() + DEADLINE)
        cpu, mine = process_cpu_ns(relay.pid) - cpu, time.process_time_ns() - mine
        return result("relay", sinks, producer, start, cpu, 0, mine)
    finally:
        for conn in conns:
            conn.close()
        relay.kill()
        relay.wait()
        kill_all(kids)


def _connect(conn: socket.socket, path: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.connect(path)
            return
        except (FileNotFoundError, ConnectionRefusedError):  # not listening yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _ctty() -> None:  # runs in the child before exec: the pty becomes its terminal
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def run_tmux(setup: Setup, producer: Producer, clients: int) -> dict[str, Any]:
    name = f"bench-{os.getpid()}"
    tmux = ["tmux", "-L", name]
    conf = setup.tmp / "tmux.conf"
    conf.write_text("set -g status off\n")
    env = dict(os.environ, TERM="xterm-256color")
    new = ["-f", str(conf), "new-session", "-d", "-s", "b", "-x", str(COLS), "-y", str(ROWS)]
    subprocess.run([*tmux, *new, *producer.argv(setup.fifo, setup.data)], check=True, env=env)
    attached: list[subprocess.Popen[bytes]] = []
    masters: list[int] = []
    try:
        server = int(subprocess.check_output([*tmux, "display", "-p", "-t", "b", "#{pid}"]))
        sinks = []
        for _ in range(clients):
            master, slave = os.openpty()
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
            attached.append(
                subprocess.Popen(
                    [*tmux, "attach", "-t", "b"],
                    stdin=slave,
                    stdout=slave,
                    stderr=slave,
                    env=env,
                    preexec_fn=_ctty,  # noqa: PLW1509 - a single-threaded benchmark
                )
            )
            os.close(slave)
            os.set_blocking(master, False)
            masters.append(master)
            sinks.append(Sink(master, "tmux"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            listed = subprocess.check_output([*tmux, "list-clients"]).splitlines()
            if len(listed) >= clients:
                break
            time.sleep(0.02)
        for sink in sinks:
            sink.mode = "raw"
        settle(sinks)
        for sink in sinks:
            sink.mode, sink.counting = "tmux", True
        cpu, mine = process_cpu_ns(server), time.process_time_ns()
        other = sum(process_cpu_ns(p.pid) for p in attached)
        start = trigger(setup.fifo)
        for sink in sinks:
            sink.mode = "tmux"
        pump_tmux(sinks, producer.marker, time.monotonic() + DEADLINE)
        cpu, mine = process_cpu_ns(server) - cpu, time.process_time_ns() - mine
        other = sum(process_cpu_ns(p.pid) for p in attached) - other
        return result("tmux", sinks, producer, start, cpu, other, mine)
    finally:
        subprocess.run([*tmux, "kill-server"], stderr=subprocess.DEVNULL, check=False)
        for proc in attached:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for master in masters:
            os.close(master)


def pump_tmux(sinks: list[Sink], marker: bytes, until: float) -> None:
    """:func:`pump` for tmux clients: raw bytes, done when the marker was drawn."""
    for sink in sinks:
        sink.mode = "raw"
    sel = selectors.DefaultSelector()
    for sink in sinks:
        sel.register(sink.fd, selectors.EVENT_READ, sink)
    try:
        while sel.get_map() and time.monotonic() < until:
            for key, _ in sel.select(0.5):
                sink = key.data
                try:
                    data = os.read(sink.fd, 1 << 18)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sink.error = sink.error or "closed"
                    sel.unregister(sink.fd)
                    continue
                sink._data(data, marker)
                if marker in sink.tail:
                    sink.done_ns = time.monotonic_ns()
                    sel.unregister(sink.fd)
    finally:
        sel.close()


# --- snapshots, memory, the emulator alone -------------------------------------------------


def smaps(pid: int) -> dict[str, float]:
    """Rss, Pss and private memory of a process, in MiB (``/proc/PID/smaps_rollup``)."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1])
    private = fields["Private_Clean"] + fields["Private_Dirty"]
    return {"rss": fields["Rss"] / 1024, "pss": fields["Pss"] / 1024, "private": private / 1024}


def painted_host(procs: Procs, tmp: Path, size: tuple[int, int], lines: int) -> Any:
    """A pty host of ``size`` whose agent printed ``lines`` lines of mixed text."""
    text = b"\n".join(mixed_text(lines * 120, seed=size[0]).split(b"\n")[:lines]) + b"\n"
    path = tmp / f"paint-{size[0]}x{size[1]}.txt"
    path.write_bytes(text)
    token = secrets.token_hex(4)
    script = f"cat \"$0\"; printf 'PAINTED-{token}\\n'; exec sleep 86400"
    host = procs.start_host(
        "pty", ["sh", "-c", script, str(path)], ["--size", f"{size[0]}x{size[1]}"]
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        screen = request(host.socket, "host.screen")
        if any(f"PAINTED-{token}" in line for line in screen["lines"]):
            return host, text
        time.sleep(0.05)
    raise RuntimeError("the pty host did not paint its text")


def snapshots(procs: Procs, tmp: Path, count: int = 20) -> list[dict[str, Any]]:
    """``host.screen`` on 80x24 and 200x60 hosts with full scrollback."""
    out = []
    for size in ((80, 24), (200, 60)):
        host, text = painted_host(procs, tmp, size, 2000)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(host.socket)
                reader = conn.makefile("rb")
                ask = b'{"type":"host.screen","id":"s","payload":{}}\n'
                conn.sendall(ask)
                first = reader.readline()  # warm-up: the models are built at first use
                cpu = process_cpu_ns(host.proc.pid)
                sizes = []
                for _ in range(count):
                    conn.sendall(ask)
                    sizes.append(len(reader.readline()))
                cpu = process_cpu_ns(host.proc.pid) - cpu
            screen = json.loads(first)["payload"]
            local = Screen(*size)
            local.feed(text.replace(b"\n", b"\r\n"))
            spent = time.process_time_ns()
            for _ in range(count):
                snap = local.snapshot(1)
            spent = time.process_time_ns() - spent
            out.append(
                {
                    "size": f"{size[0]}x{size[1]}",
                    "response_bytes": statistics.median(sizes),
                    "dump_bytes": len(screen["dump"].encode()),
                    "host_cpu_ms": cpu / 1e6 / count,
                    "screen_cpu_ms": spent / 1e6 / count,
                    "snapshot_json_bytes": len(json.dumps(snap, ensure_ascii=False).encode()),
                }
            )
        finally:
            procs.stop_host(host)
    return out


def memory(procs: Procs, tmp: Path, count: int = 5) -> dict[str, Any]:
    """PSS and private memory of idle pty and lines hosts, and of two pty hosts whose
    scrollback is full, all side by side (so the shared pages are split alike)."""
    hosts = []
    for _ in range(count):
        hosts.append(("pty, idle", procs.start_host("pty", ["sleep", "infinity"])))
        hosts.append(("lines, idle", procs.start_host("lines", ["sleep", "infinity"])))
    for size in ((80, 24), (200, 60)):
        label = f"pty {size[0]}x{size[1]}, after 2,000 lines (scrollback full)"
        hosts.append((label, painted_host(procs, tmp, size, 2000)[0]))
    deadline = time.monotonic() + 30
    for _, host in hosts:
        while time.monotonic() < deadline:
            if request(host.socket, "host.status")["agent"]["state"] in ("running", "idle"):
                break
            time.sleep(0.05)
    time.sleep(1)  # idle, as issue 8's memory figures
    figures: dict[str, Any] = {}
    for label in dict.fromkeys(k for k, _ in hosts):
        rows = [smaps(h.proc.pid) for k, h in hosts if k == label]
        figures[label] = {key: statistics.fmean(r[key] for r in rows) for key in rows[0]}
        figures[label]["hosts"] = len(rows)
    for _, host in hosts:
        procs.stop_host(host)
    return figures


def emulator_alone(data: bytes, chunk: int) -> float:
    """CPU ms per MB of ``Screen.feed`` on ``data`` cut in ``chunk``-byte events, each
    fed whole, as the host feeds it (the screen cuts it for avt itself)."""
    screen = Screen(COLS, ROWS)
    spent = time.process_time_ns()
    for i in range(0, len(data), chunk):
        screen.feed(data[i : i + chunk])
    return (time.process_time_ns() - spent) / 1e6 / (len(data) / MB)


# --- the run, the tables -------------------------------------------------------------------


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over the rounds of one cell."""
    out = dict(runs[0])
    for key in ("wall_s", "mb_per_s", "cpu_ms_per_mb", "other_cpu_ms_per_mb", "clients_busy"):
        out[key] = statistics.median(r[key] for r in runs)
    for key in ("bytes_per_client", "events"):
        out[key] = statistics.median(r[key] for r in runs)
    out["complete"] = all(r["complete"] for r in runs)
    out["runs"] = [round(r["mb_per_s"], 1) for r in runs]
    out["cpu_runs"] = [round(r["cpu_ms_per_mb"], 1) for r in runs]
    return out


def flood_table(cells: list[dict[str, Any]]) -> str:
    head = (
        "| flood | clients | system | MB/s to each client | ÷ tmux | CPU ms/MB | "
        "bytes each client got | mean event | our clients busy | complete |\n"
        "|---|--:|---|--:|--:|--:|--:|--:|--:|---|"
    )
    rows = [head]
    for c in cells:
        ratio = f"{c['vs_tmux']:.2f}" if "vs_tmux" in c else "–"
        cpu = f"{c['cpu_ms_per_mb']:.1f}"
        if c["system"] == "tmux":
            cpu += f" (+ attach clients {c['other_cpu_ms_per_mb']:.1f})"
        event = f"{c['mb'] * MB / max(c['events'], 1) / 1024:.1f} KiB" if c["events"] else "–"
        got = c["bytes_per_client"] / MB
        rows.append(
            f"| {c['flood']} | {c['clients']} | {c['system']} | {c['mb_per_s']:.1f} | {ratio} "
            f"| {cpu} | {got:.1f} MB | {event} | {c['clients_busy']:.0%} "
            f"| {'yes' if c['complete'] else '**no** ' + ', '.join(c['errors'])} |"
        )
    return "\n".join(rows)


def goal_lines(cells: list[dict[str, Any]]) -> list[str]:
    out = []
    for flood in sorted({c["flood"] for c in cells}):
        by = {c["system"]: c for c in cells if c["flood"] == flood and c["clients"] == 10}
        if "host" not in by or "tmux" not in by:
            continue
        host, tmux = by["host"], by["tmux"]
        speed = host["vs_tmux"]
        cpu = host["cpu_ms_per_mb"] / tmux["cpu_ms_per_mb"]
        out.append(
            f"- {flood}, 10 clients: throughput {speed:.2f}× tmux's (goal ≥ 1: "
            f"{'met' if speed >= 1 else '**not met**'}); host CPU per MB {cpu:.2f}× the "
            f"tmux server's (goal ≤ 2: {'met' if cpu <= 2 else '**not met**'})"
        )
    return out


def render(results: dict[str, Any]) -> str:
    cells = results["floods"]
    parts = [
        f"{results['when']}, {results['machine']}; `{results['command']}`",
        "Floods (median of the rounds; ÷ tmux: the median of each round's ratio; "
        "MB = 10^6 bytes of the terminal's output):",
        flood_table(cells),
        "\n".join(goal_lines(cells)),
        "The emulator alone (`Screen.feed` in one process, the same bytes cut as the host "
        "cut them): "
        + "; ".join(f"{k} {v:.1f} ms/MB" for k, v in results["emulator_ms_per_mb"].items()),
        "Snapshots (`host.screen`, 1,000 lines of scrollback painted):",
        "| size | response | of which `dump` | host CPU per request | `Screen.snapshot` alone |"
        "\n|---|--:|--:|--:|--:|\n"
        + "\n".join(
            f"| {s['size']} | {s['response_bytes'] / 1024:.1f} KiB | "
            f"{s['dump_bytes'] / 1024:.1f} KiB | {s['host_cpu_ms']:.2f} ms | "
            f"{s['screen_cpu_ms']:.2f} ms |"
            for s in results["snapshots"]
        ),
        "Memory of a host process (all these hosts side by side; idle ones run "
        "`sleep infinity`; mean):",
        "| host | hosts | PSS | private | RSS |\n|---|--:|--:|--:|--:|\n"
        + "\n".join(
            f"| {k} | {m['hosts']} | {m['pss']:.1f} MiB | {m['private']:.1f} MiB "
            f"| {m['rss']:.1f} MiB |"
            for k, m in results["memory"].items()
        ),
    ]
    return "\n\n".join(parts)


def write_docs(text: str) -> None:
    page = DOC.read_text()
    start, end = page.index(START) + len(START), page.index(END)
    DOC.write_text(page[:start] + "\n" + text + "\n" + page[end:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=50, help="MB of mixed text per flood")
    parser.add_argument("--yes-mb", type=float, default=20, help="MB of `yes` per flood")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (median)")
    parser.add_argument("--clients", default="1,10", help="client counts")
    parser.add_argument("--floods", default="text,yes", help="which floods")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="which systems")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, no docs")
    parser.add_argument("--no-docs", action="store_true", help=f"leave {DOC.name} alone")
    parser.add_argument("--skip-extras", action="store_true", help="floods only")
    parser.add_argument(
        "--profile",
        help="profile the host in the first round of the largest client count: "
        "py-spy raw output, or `perf record` when the name ends in .perf",
    )
    parser.add_argument("--out", help="write the results JSON here")
    parser.add_argument(
        "--baseline",
        metavar="TREE",
        help="also run the host of the agenthost package in TREE (an older checkout, "
        "e.g. from git archive): system 'baseline', alternating with the others",
    )
    args = parser.parse_args()
    if args.quick:
        args.mb, args.yes_mb, args.repeat = 2, 1, 1
    systems = args.systems.split(",")
    if args.baseline:
        systems.append("baseline")
    counts = [int(n) for n in args.clients.split(",")]
    floods = {
        "text": Producer("text", 'cat "$1"', mixed_text(int(args.mb * MB))),
        "yes": Producer("yes", f"yes | head -c {int(args.yes_mb * MB)}", b""),
    }
    floods["yes"].content = (b"y\n" * int(args.yes_mb * MB // 2 + 1))[: int(args.yes_mb * MB)]
    results: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        + subprocess.check_output(["tmux", "-V"], text=True).strip(),
        "command": " ".join(["benchmarks/terminal.py", *sys.argv[1:]]),
        "floods": [],
    }
    with Procs() as procs:
        tmp = procs.tempdir()
        setup = Setup(tmp, tmp / "go", tmp / "flood.txt")
        os.mkfifo(setup.fifo)
        for name in args.floods.split(","):
            producer = floods[name]
            setup.data.write_bytes(producer.content)
            for clients in counts:
                runs: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
                for round_ in range(args.repeat):
                    for system in systems:
                        first = system == "host" and clients == counts[-1] and not round_
                        profile = args.profile if first else None
                        if system == "host":
                            one = run_host(procs, setup, producer, clients, profile)
                        elif system == "baseline":
                            one = run_host(procs, setup, producer, clients, None, args.baseline)
                        elif system == "relay":
                            one = run_relay(procs, setup, producer, clients)
                        else:
                            one = run_tmux(setup, producer, clients)
                        print(
                            f"{name} {clients} {system}: {one['mb_per_s']:.1f} MB/s, "
                            f"{one['cpu_ms_per_mb']:.1f} ms/MB, complete {one['complete']}",
                            file=sys.stderr,
                        )
                        runs[system].append(one)
                for system in systems:
                    cell = medians(runs[system])
                    cell["flood"] = name
                    if "tmux" in runs:  # each round's ratio: the pairs ran a minute apart
                        pairs = zip(runs[system], runs["tmux"], strict=True)
                        cell["vs_tmux"] = statistics.median(
                            r["mb_per_s"] / t["mb_per_s"] for r, t in pairs
                        )
                    results["floods"].append(cell)
        host_events = {
            c["flood"]: c for c in results["floods"] if c["system"] == "host" and c["events"]
        }
        results["emulator_ms_per_mb"] = {}
        for name, cell in host_events.items():
            chunk = max(1, round(cell["mb"] * MB / cell["events"]))
            data = floods[name].terminal_bytes()
            results["emulator_ms_per_mb"][f"{name} ({chunk} B pieces)"] = emulator_alone(
                data, chunk
            )
        if not args.skip_extras:
            results["snapshots"] = snapshots(procs, tmp)
            results["memory"] = memory(procs, tmp)
        else:
            results["snapshots"], results["memory"] = [], {}
    text = render(results)
    print(text)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    if not (args.quick or args.no_docs):
        write_docs(text)
    return 0 if all(c["complete"] for c in results["floods"]) else 2


if __name__ == "__main__":
    sys.exit(main())
