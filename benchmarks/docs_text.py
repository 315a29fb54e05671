"""The fixed prose of docs/performance.md; report.py fills in the figures around it."""

ABOUT = """\
*This page is written by the benchmark harness (`{command}`); edit
`benchmarks/docs_text.py` and `benchmarks/report.py`, not this file.*

How fast the host moves an agent's output to its clients, how much that costs, and how
quickly and lightly a host starts. Every figure is measured against a **minimal relay**
run in the same session on the same machine: a tiny Python program that copies the
agent's stdout to the same clients with no JSON, no offsets and no ring. The machine's
speed and whatever else runs on it move both; the ratio host ÷ relay moves much less,
so quote ratios rather than absolute numbers.

Run it with `{command}` (four to six minutes; besides the project's dependencies it
needs matplotlib for the plots, the `bench` extra, which `make` installs).
`.venv/bin/python benchmarks/run.py --quick` is a smoke run with tiny sizes whose
figures mean nothing. Every run also writes its raw results (every run, every error)
to `benchmarks/results/<date>.json`; see `benchmarks/README.md`. The plots are in
`docs/img/`, drawn from the same results."""

HOW = """\
- **Processes.** Each host is started exactly as a user would start it,
  `python -m agenthost serve --agent-id ID --home HOME --agent lines|demo --linger 0 --
  COMMAND`, and is ready when it sends `READY=1` to the `NOTIFY_SOCKET` we gave it.
  The clients all live in **one separate process** (`benchmarks/clients.py`): N raw
  AF_UNIX connections in one `selectors` loop, each read a `recv_into` of up to 256 KiB
  into one buffer shared by all connections (no allocation, no copy per read), newlines
  counted with numpy, no JSON decoding on the hot path. One process keeps the measuring
  work off the host and as small as it can be; on a 2-core machine more processes
  would only add context switches. With 100 clients it still receives gigabytes per
  flood: "clients CPU busy" in the throughput table says how close it came to being
  the limit.
  The orchestrator (`benchmarks/run.py`) just waits while a run is in progress.
- **Agents.** `benchmarks/agents/flood.py` for the `lines` adapter: short lines
  (`SEQ STAMP xxx…`, 64 bytes) written as fast as possible through an 8 KiB
  block-buffered stdout, like a real tool writing to a pipe, or at a fixed rate, each
  line flushed on its own and stamped with `time.monotonic_ns()`. The built-in demo
  agent (`--agent demo`, `/flood N` with `AGENTHOST_DEMO_PACE=0`) for the stream-json
  path: every message it prints becomes an `output` event *and* a `chat_entry` event,
  so its figures include the parsing. "Lines" below are the agent's lines (for the
  demo, its messages); "events" are stream events, two per demo message.
- **The relay** (`benchmarks/relay.py`) reads the same agent's stdout in 64 KiB chunks
  and writes each chunk to every client with a blocking `sendall`, so a slow client
  slows the agent: the backpressure a host must not apply. Host and relay runs
  alternate, and each throughput figure is the median of {repeat} runs.
- **Throughput.** One flood of N lines (N = {lines_count:,} for `lines`,
  {demo_count:,} demo messages) to {clients_text} attached clients; the rate is N
  divided by the time from the first event received by any client to the last event
  received by the last client, so it is the rate at which *each* client got the
  agent's lines (for the lines flood, one event per line: lines/s = events/s per
  client).
  Host CPU time is read before and after (see "CPU time" below; nanoseconds):
  "µs/line" is host CPU per agent line, "busy" is host CPU over wall time (100% = one
  core saturated). For this table the host runs with a ring that holds the whole
  flood (`--ring-size N+10000 --ring-bytes 1GiB`): a client that falls behind is
  caught up from the ring instead of being dropped, so the table shows the speed of
  the hot path. The next table shows what happens with the default ring (one run
  each).
- **Every event, checked.** On every read of every client the complete lines are
  counted, and the offset of the first and of the last line must be exactly the next
  expected offset and `first + lines - 1` (for the relay: the flood's sequence
  numbers). One client per run also parses every line (every offset, every sequence
  number of the flood, or every demo message), which proves that all of the agent's
  lines arrived, in order. A client that is disconnected, misses, repeats or reorders
  anything makes the run "incomplete", and the table says so.
- **Latency.** The flood agent writes lines at a fixed rate, each stamped with
  CLOCK_MONOTONIC (system-wide on Linux) just before its write; each client stamps
  each `recv` right after it returns. Latency = receipt - stamp, for every line and
  every client; p50 and p99 (nearest rank) over all of them. Each run lasts
  {latency_seconds:g} s, at {rates_text} lines/s, with {latency_clients_text} clients and
  the default ring.
- **Memory.** RSS and USS (memory unique to the process, from psutil) of the host
  process alone, not its agent: idle, {settle:g} s after its agent runs (`sleep infinity` for
  `lines`, the demo agent waiting for input), and after the default-ring floods. The
  relay's idle RSS is a bare Python interpreter with a socket, for scale. Then
  {pss_hosts} idle `lines` hosts (`sleep infinity`) run side by side and each host
  process's PSS is read (`memory_full_info().pss`: each shared page, the interpreter's
  and the libraries', is charged in equal parts to the processes that share it, so the
  PSS of all hosts adds up to what they cost together), with RSS and USS; mean and max
  over the hosts.
- **Memory after a flood.** {repeat} times, a fresh `lines` host with the default ring
  (as users run it): its RSS idle ({settle:g} s after its agent runs), then after a
  full-speed flood of {lines_count:,} lines to {flood_memory_clients} clients, once the
  flood is over and {settle:g} s passed; the run with the median ratio after ÷ idle.
- **CPU time.** Every CPU figure is read with `clock_gettime` on the process's CPU
  clock (`clock_getcpuclockid(pid)`): user + system time, in nanoseconds, of every
  thread of that process (a host's journal thread included, ended threads too) since
  the process was forked (for an exec'd host: the fork before the exec), not of its
  children (the agent). For a process whose threads all run, it is the first field of
  `/proc/PID/schedstat` summed over them. A busy machine inflates it much less than
  wall time.
- **Start-up.** Time from the exec of `serve` (a `lines` host running
  `sleep infinity`) to `READY=1`, and to the answer of a first `host.ping` on a new
  connection; median and 90th percentile over {startup_runs} starts; and the host's CPU
  time from its start to that answer.
- **Daemon-started hosts.** A daemon runs in a private home (`agenthost daemon --home
  H`); {spawned_hosts} idle `lines` hosts (`sleep infinity`) are spawned through it one
  after the other (`daemon.spawn`, as `agenthost run` does). Once each host answered a
  ping, its agent runs and the daemon follows every host, each host's CPU time since
  its creation is read (found by the `host_pid` of its spawn response); {settle:g} s
  later its PSS, RSS, USS and shared dirty memory (`/proc/PID/smaps_rollup`: pages
  shared copy-on-write with the process it was forked from). Also the PSS of the daemon
  and of its other children (the host factory, when there is one), and the CPU time
  each of them spent per spawn (before the first spawn and after the last, over
  {spawned_hosts}). A host whose parent
  is the daemon was exec'd by it; any other was forked (by a process with the host's
  code imported); the figures are read the same way in both cases.
- **Ping.** {pings:,} sequential `host.ping` round trips on one raw connection (after 50 for
  warm-up), each timed with `perf_counter_ns` from before the send to after the
  response line is read.
- **Attach replay.** A `lines` host with a ring of {replay_events:,} × 2 events floods
  {replay_events:,} lines; once its end marker is in, the whole stream (the state event,
  the lines, the end marker) is in the ring. Then {replays} times (after 3 for warm-up)
  a raw client connects, sends `host.attach` with `offset` 0, and reads until it has
  the response and {replay_events:,} events; the time runs from before the send to the
  read that brought the {replay_events:,}th event (connecting is not timed). Each replay
  is checked: not truncated, offsets 1 to {replay_events:,}.
- **Daemon restart.** What `benchmarks/daemon.py` (`make bench-daemon`) measures, for
  {daemon_hosts} hosts: a daemon spawns them (each a `lines` agent that prints 100 lines,
  then idles) and follows them; then, {daemon_repeat} times, it is killed with SIGKILL
  and a new one is started. Exec of the new daemon -> `READY=1` is sent once every live
  host was rediscovered (a scan of the hosts directory) and reattached; the daemon's
  own "reconcile" figure is the part from the scan to the last attach answered; the
  daemon's CPU time from its exec to `READY=1` is read too. Medians.
- **Goals.** The goals tables compare these figures with the goals of issue 15 (lean
  hosts) and of issue 8 (kept as they were set). "events/s" of the lines flood are the
  agent's lines/s (one event per line); issue 8's memory goals are in MB, read strictly
  as 10^6 bytes (a little under 1 MiB); issue 15's and the other tables are in MiB
  (2^20 bytes). A goal is met only if its run was complete."""

GOALS15_NOTE = """\
CPU times and memory are robust to a busy machine; the wall-clock figures are compared
as ratios within this run (host ÷ relay), except the daemon's exec -> READY, whose goal
is a wall time (the daemon's own CPU time is next to it). Throughput is compared with
issue 8's run by host ÷ relay, which cancels most of the machine's load; the lines/s of
both runs are given. MiB = 2^20 bytes."""

GOALS_NOTE = """\
Units: events/s of the lines flood = agent lines/s delivered to each client (one event
per line); MB = 10^6 bytes, the goals' unit read strictly (the other tables give MiB =
2^20 bytes); µs and ms of wall-clock time. "relay" is the minimal relay in the same
run, where there is one. A goal of several parts is met when all are; the parts that
are not are named."""

# What the section "Where goals are not met" says about each unmet goal, keyed by the
# goal's key (report.goals): the measured reason, written by whoever investigated it.
# A goal that is not met and has no entry here gets the placeholder below.
UNMET_REASONS: dict[str, str] = {
    "lines_10_clients": (
        "The host spends about ten times the relay's CPU per line (the \"host CPU "
        'µs/line" column), for what the relay does not do: number and frame each line '
        "as a JSON event (~150 bytes against the relay's 64, so every client also "
        "receives 2.3 times the bytes), keep it in the ring and append it to the "
        "journal. A py-spy profile of the host under this flood (`py-spy record -p HOST "
        "-f raw`, 10 clients) put ~30 % of its samples in uvloop's socket writes, 23 % "
        "in event encoding (since cut by copying plain ASCII lines as bytes, "
        "-10 % CPU per line), 12 % in the ring and 8 % in the journal. On two cores the "
        'agent, the host and the clients process compete ("host CPU busy" stays near '
        "50 %: the host waits for the others as often as they wait for it). The absolute "
        "goal (≥ 150,000/s) is met; 60 % of a relay that does no per-line work is not."
    ),
    "latency_p99": (
        "The relay, which does no work at all per line, misses it too (its p99 is in "
        "the table): at these rates p99 measures the scheduler of a shared 2-core "
        "machine (three busy processes, plus whatever else runs), not the host. The "
        "host's p50 is a few hundred µs, 2-3 times the relay's: one more process hop "
        "(agent -> host -> client instead of agent -> relay -> client) and the ten "
        "clients of one process stamped one after the other."
    ),
    "ping_p50": (
        "A wall-clock figure, and the machine was slower in this run (the relay's CPU "
        "per line in the throughput table is 1.5 to 2 times the quiet run's). The host is not: "
        "started one after the other in the same minute, a host of the tree before "
        "issue 15 answered 5,000 pings on a raw connection in 56.6 µs (median) and "
        "this one in 52.2 µs (issue 8's run measured 31 µs on a faster machine state)."
    ),
    "startup": (
        "Almost all of it is Python importing modules (`python -X importtime`, and the "
        'host\'s CPU time until the first ping, the "start-up CPU" figure). Issue 15 '
        "cut it twice: pydantic and the models are no longer loaded to answer a ping "
        "(they are built at the first request that needs one), and the daemon's hosts "
        "are forked from a pre-imported host factory instead of exec'd (the issue-15 "
        "table: about 15 ms of CPU each). What an exec'd `serve` still imports is in "
        "the issue-15 start-up row below."
    ),
    "memory": (
        "An exec'd host's RSS and PSS are the Python heap of the modules it imports, "
        "private to each process (USS is most of RSS), not buffers. Issue 15's host "
        "factory is the answer for the daemon's hosts: forked from one pre-imported "
        "process, they share those pages copy-on-write (9 MiB PSS each with 20 hosts, "
        "the issue-15 table). This row measures exec'd `serve` hosts, which still pay "
        "the full interpreter each (less since pydantic is loaded only when needed)."
    ),
    "daemon_restart": (
        "The daemon's own work, from its scan of the hosts directory to every host "
        'reattached, is the "reconcile" figure in the same cell, under the goal. The '
        "rest is the new daemon process starting; see the issue-15 row of the same "
        "figure for what it costs and why."
    ),
    "i15_serve_cpu": (
        "Imports again. Since pydantic and the models are loaded at the first request "
        "that needs them, an exec'd host answers its first ping after ~130-140 ms of "
        "CPU (was ~236 ms), of which, by `python -X importtime` (self times, inflated "
        "by the measuring): click with inspect, typing, uuid and datetime ~30 ms, "
        "asyncio with ssl ~15 ms, structlog ~10 ms, our adapters' frozen dataclasses "
        "~7 ms, the host's modules and journal ~10 ms, the interpreter ~11 ms. The "
        "cost is moved, not only cut: the first attach or status of an exec'd host "
        "builds the models then (CPU to a first `host.status`, counted from exec, "
        "~220-260 ms: `benchmarks/startup.py`). The daemon's hosts do not pay either: the "
        "factory built everything before it forked them."
    ),
    "i15_cpu_per_line": (
        "The machine's speed moves this figure (the relay's CPU per line in the same "
        "run says how fast it was): against the relay, the host went from ~9 times its "
        "CPU per line in issue 8's run (1.68 vs 0.18 µs) to ~4 times (1.21 vs 0.28 µs "
        "on a quiet machine, 1.6 vs 0.4 µs on a slower one), cut by a splitter that "
        "returns a chunk whose lines all fit in one split, a ring that appends a batch "
        "with slice copies, a journal that no longer counts a batch twice, and one check of a "
        "whole batch of plain lines instead of a regex per line. A py-spy profile of "
        "the host under this flood (`benchmarks/hotpath.py --profile`; the journal "
        "thread's waits left out) now has about half of its samples in the event "
        "loop's own C code (mostly the writes to the ten client sockets: the kernel "
        "copies each event ten times), ~13 % in encoding the events, ~7 % in reading "
        "the agent's pipe, and a few per cent each in the splitter, the ring and the "
        "journal: no single Python step is left that would close the gap."
    ),
    "i15_daemon_ready": (
        "The reconcile itself is under the goal (the reconcile figure); most of the rest "
        "is the daemon process starting: with one host it needs ~280 ms of CPU to READY, "
        "~225 ms of it the interpreter and imports (pydantic with its plugin loader, "
        "which imports `importlib.metadata`; asyncio; our models and the daemon's "
        "message tables; structlog; click; sqlite3). Issue 15 cut one connection and "
        "one registry write per host (one transaction for the reconcile), psutil "
        "(the daemon reads /proc) and garbage collection while importing: 413 -> 352 ms "
        "of CPU with 100 hosts (`benchmarks/daemon_start.py`). The daemon also forks "
        "its host factory before it reconciles; the factory's imports run on the "
        "other core meanwhile. Reaching 250 ms would need a daemon that does not load "
        "pydantic before it is ready."
    ),
}

UNMET = """\
These goals were not met in this run (the list is generated from the figures above),
each with what this run's figures say about it and what limits it, as measured (a
marked placeholder where that is not written yet)."""

PLACEHOLDER = '*Reason: not investigated yet (`UNMET_REASONS["{key}"]`).*'


NOTES = """\
General rules for these tables:

- **Ratios beat absolute numbers.** The relay runs in the same session, alternating
  with the host, so the ratio cancels most of the machine's speed and load. On a
  shared machine the absolute figures swing by tens of percent from run to run.
- **Who is the bottleneck?** With a 2-core machine the agent, the host and the
  client process compete for two cores. "host CPU busy" well under 100% means the host
  waited for someone else (the client process, which does ten or a hundred times the
  receiving work for ten or a hundred clients, or other work on a shared machine);
  100% means the host was the limit. "clients CPU busy" near 100% means the client
  process was. The relay's lines are shorter than the host's JSON events (64 bytes
  against about 150), so its clients receive less than half the bytes.
- **Demo floods** are limited by the demo agent itself (a `json.dumps` and a flush
  per message) when relayed; through the host the extra cost is the stream-json
  parsing and the second event per message.
- **Latency** at these rates is mostly wake-ups (agent write, host loop, client
  wake-up), not work; p99 includes the scheduler's noise on a busy machine. With ten
  clients in one process, later clients in a `select` round are stamped later.
- **The default ring** keeps 1000 events; the journal keeps everything. Each client has
  a send queue of up to 16 MiB (`--client-buffer`) of batches shared with the other
  clients; a client whose queue is full is served from the ring instead, and when it
  falls out of the ring, from the journal (in a worker thread). So no client is
  dropped while the journal holds what it needs; with `--no-journal` a client that
  falls out of the ring is dropped (it may reattach; `truncated` tells it what is
  gone).
- **The journal** appends each batch, already encoded, to a segment file before the
  batch reaches clients: a memory copy into the page cache, a fraction of a
  microsecond per event. `sync always` also waits for the disk (fsync) on every batch,
  on the event path: its cost is the disk's. docs/journal.md says what each policy
  can lose.
- **Start-up** is mostly Python importing the package (pydantic models included);
  `python -X importtime -m agenthost --help` shows where the time goes."""
