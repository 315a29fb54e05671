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

Run it with `{command}` (about a minute; it needs nothing but the project's
dependencies). `.venv/bin/python benchmarks/run.py --quick` is a smoke run with tiny
sizes whose figures mean nothing. Every run also writes its raw results (every run,
every error) to `benchmarks/results/<date>.json`; see `benchmarks/README.md`."""

HOW = """\
- **Processes.** Each host is started exactly as a user would start it,
  `python -m agenthost serve --agent-id ID --home HOME --agent lines|demo --linger 0 --
  COMMAND`, and is ready when it sends `READY=1` to the `NOTIFY_SOCKET` we gave it.
  The clients all live in **one separate process** (`benchmarks/clients.py`): N raw
  AF_UNIX connections in one `selectors` loop, 256 KiB `recv` calls, no JSON decoding
  on the hot path. One process keeps the measuring work off the host and as small as
  it can be; on a 2-core machine more processes would only add context switches.
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
  {demo_count:,} demo messages); the rate is N divided by the time from the
  first event received by any client to the last event received by the last client.
  Host CPU is read from `/proc/PID/schedstat` before and after (nanosecond resolution):
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
  {latency_seconds:g} s, at 1 000 and 10 000 lines/s, with 1 and 10 clients and the
  default ring.
- **Memory.** RSS and USS (memory unique to the process, from psutil) of the host
  process alone, not its agent: idle, {settle:g} s after its agent runs (`sleep infinity` for
  `lines`, the demo agent waiting for input), and after the default-ring floods. The
  relay's idle RSS is a bare Python interpreter with a socket, for scale.
- **Start-up.** Time from the exec of `serve` (a `lines` host running
  `sleep infinity`) to `READY=1`, and to the answer of a first `host.ping` on a new
  connection; median and 90th percentile over {startup_runs} starts.
- **Ping.** {pings:,} sequential `host.ping` round trips on one raw connection (after 50 for
  warm-up), each timed with `perf_counter_ns` from before the send to after the
  response line is read."""

NOTES = """\
General rules for these tables:

- **Ratios beat absolute numbers.** The relay runs in the same session, alternating
  with the host, so the ratio cancels most of the machine's speed and load. On a
  shared machine the absolute figures swing by tens of percent from run to run.
- **Who is the bottleneck?** With a 2-core machine the agent, the host and the
  client process compete for two cores. "busy" well under 100% means the host waited
  for someone else (the client process, which does ten times the receiving work for
  ten clients, or other work on a shared machine); 100% means the host was the limit.
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
