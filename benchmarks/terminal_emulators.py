"""Headless terminal emulators measured side by side (issue 30): which one keeps the
screen of a terminal agent.

``.venv/bin/python benchmarks/terminal_emulators.py`` prints a table: for each candidate
the correctness against the oracle (``@xterm/headless`` fed the same bytes, installed
by ``make e2e-clis``), on the recordings of real TUIs in tests/fixtures/tty/ at each of
their marks and on synthetic cases; the CPU seconds per MB fed; the PSS of a process
holding one emulator with 1000 lines of scrollback after a flood; and the CPU of each
hostile input. ``--python PY`` adds an interpreter for the candidates that do not
install on ours (par-term-emu-core-rust needs Python 3.12); ``--json FILE`` keeps the
figures. Every candidate runs in a process of its own (``--worker``), so that its
memory is its own and a crash or a hang costs only its row.

Candidates: pyte (pure Python), pyavt (asciinema's avt, Rust), pyghostty (Ghostty's
libghostty-vt, Zig, through cffi), par-term-emu-core-rust (Rust). Each is used the
way agenthost/terminal/screen.py would use it: bytes decoded by an incremental UTF-8
decoder with ``replace`` where the library takes text, fed in chunks of at most 64 KiB
(the host's chunk), visible rows read as text with trailing spaces stripped.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from terminal_candidates import AGENTHOST, CANDIDATES, SCROLLBACK, Candidate
from terminal_inputs import CHUNK, ROOT, Chunk, flood, hostile_inputs, recordings, synthetic_cases

# --- the worker ----------------------------------------------------------------------


def play(term: Candidate, chunks: list[Chunk]) -> None:
    for chunk in chunks:
        if isinstance(chunk, tuple):
            term.resize(*chunk)
        else:
            for i in range(0, len(chunk), CHUNK):
                term.feed(chunk[i : i + CHUNK])


def pss_kib() -> int:
    """This process's proportional set size (/proc/self/smaps_rollup)."""
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def worker(name: str, part: str, cases_path: str) -> dict[str, Any]:
    cls = CANDIDATES[name]
    if part == "screens":
        cases = json.loads(Path(cases_path).read_text())
        out = {}
        for case in cases:
            chunks: list[Chunk] = [
                (c[0], c[1]) if isinstance(c, list) else base64.b64decode(c) for c in case["chunks"]
            ]
            try:
                term = cls(case["cols"], case["rows"])
                play(term, chunks)
                out[case["name"]] = {
                    "lines": term.lines(),
                    "cursor": list(term.cursor()),
                    "history": term.history()[-50:],
                }
            except Exception as exc:  # a candidate's failure is a result, not a crash
                out[case["name"]] = {"error": f"{type(exc).__name__}: {str(exc)[:80]}"}
        return out
    if part == "throughput":
        data = flood()
        term = cls(80, 24)
        start = time.process_time()
        try:
            play(term, [data])
        except Exception as exc:  # pyte cannot read vim's output
            return {"cpu_error": f"{type(exc).__name__}"}
        cpu = time.process_time() - start
        return {"cpu_s_per_mb": cpu / (len(data) / 1e6)}
    if part == "memory":
        base = pss_kib()
        term = cls(80, 24, SCROLLBACK)
        lines = b"".join(b"%06d " % n + b"m" * 72 + b"\r\n" for n in range(20_000))
        play(term, [lines])
        after = pss_kib()
        return {"pss_kib": after, "pss_added_kib": after - base}
    if part == "snapshot":  # the chosen one only: what host.screen costs
        return snapshot_costs()
    if part.startswith("hostile:"):
        make = hostile_inputs()[part.split(":", 1)[1]]
        chunks = make()
        term = cls(80, 24)
        start = time.process_time()
        play(term, chunks)
        term.lines()
        return {"cpu_s": time.process_time() - start, "pss_kib": pss_kib()}
    raise SystemExit(f"unknown part {part}")


def snapshot_costs() -> dict[str, Any]:
    """CPU and size of ``Screen.snapshot`` on a full screen of coloured text (every
    cell written, a colour change every 8 cells) at 80x24 and 200x60."""
    from agenthost.terminal.screen import Screen

    out = {}
    for cols, rows in ((80, 24), (200, 60)):
        screen = Screen(cols, rows)
        cells = "".join(
            f"\x1b[3{(n // 8) % 8}m" + chr(0x41 + n % 26) if n % 8 == 0 else chr(0x41 + n % 26)
            for n in range(cols * rows)
        )
        screen.feed(("\x1b[H" + cells).encode())
        runs = 200
        start = time.process_time()
        for _ in range(runs):
            snap = screen.snapshot(1)
        cpu = (time.process_time() - start) / runs
        size = len(json.dumps(snap).encode())
        out[f"{cols}x{rows}"] = {"cpu_ms": cpu * 1000, "json_bytes": size}
    return out


# --- the orchestrator ----------------------------------------------------------------


def run_worker(python: str, name: str, part: str, cases: str, timeout: float) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        result = subprocess.run(
            [python, __file__, "--worker", name, "--part", part, "--cases", cases],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"exit {result.returncode}: {tail[:160]}"}
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def importable(python: str, name: str) -> bool:
    module = {
        "pyte": "pyte",
        "pyavt": "avt",
        "pyghostty": "pyghostty",
        "par-term-emu-core-rust": "par_term_emu_core_rust",
        AGENTHOST: AGENTHOST,
    }[name]
    check = subprocess.run(
        [python, "-c", f"import {module}"],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    return check.returncode == 0


def oracle_cases(cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from termoracle import run_oracles

    decoded = [
        (
            [(c[0], c[1]) if isinstance(c, list) else base64.b64decode(c) for c in case["chunks"]],
            case["cols"],
            case["rows"],
        )
        for case in cases
    ]
    out = {}
    for case, o in zip(cases, run_oracles(decoded), strict=True):
        out[case["name"]] = {
            "cols": o.cols,
            "lines": o.lines,
            "cursor": list(o.cursor),
            "history": o.scrollback[-50:],
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker")
    parser.add_argument("--part")
    parser.add_argument("--cases", default="")
    parser.add_argument("--python", action="append", default=[], help="another interpreter")
    parser.add_argument("--only", action="append", default=[], help="measure these candidates")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--no-hostile", action="store_true")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.part, args.cases)))
        return 0

    cases = [
        {"name": n, "cols": c, "rows": r, "chunks": enc(ch)} for n, c, r, ch in recordings()
    ] + [
        {"name": n, "cols": c, "rows": r, "chunks": enc(ch), "synthetic": True}
        for n, (c, r, ch) in synthetic_cases().items()
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cases, f)
        cases_path = f.name
    print(f"oracle: {len(cases)} cases ...", file=sys.stderr)
    oracle = oracle_cases(cases)
    pythons = [sys.executable, *args.python]
    names = args.only or list(CANDIDATES)
    results: dict[str, Any] = {}
    for name in names:
        python = next((p for p in pythons if importable(p, name)), None)
        if python is None:
            results[name] = {"error": "not installable here"}
            print(f"{name}: not importable by {pythons}", file=sys.stderr)
            continue
        print(f"{name} ({python}) ...", file=sys.stderr)
        row: dict[str, Any] = {"python": python}
        screens = run_worker(python, name, "screens", cases_path, 600)
        row["failures"] = {}
        ok = {"recordings": 0, "synthetic": 0}
        total = {"recordings": 0, "synthetic": 0}
        for case in cases:
            kind = "synthetic" if case.get("synthetic") else "recordings"
            total[kind] += 1
            got = screens.get(case["name"], screens if "error" in screens else {"error": "missing"})
            want = oracle[case["name"]]
            same = "error" not in got and agree(got, want, case)
            if case["name"] == "scrollback" and same and name != "pyghostty" and got["history"]:
                same = got["history"] == want["history"]
            if same:
                ok[kind] += 1
            else:
                row["failures"][case["name"]] = describe(got, want)
        row["recordings"] = f"{ok['recordings']}/{total['recordings']}"
        row["synthetic"] = f"{ok['synthetic']}/{total['synthetic']}"
        for part in ("throughput", "memory"):
            got = run_worker(python, name, part, cases_path, 600)
            row.update({f"{part}_error": got["error"]} if "error" in got else got)
        if not args.no_hostile:
            row["hostile"] = {
                h: run_worker(python, name, f"hostile:{h}", cases_path, 120)
                for h in hostile_inputs()
            }
        if name == AGENTHOST:
            row["snapshot"] = run_worker(python, name, "snapshot", cases_path, 120)
        results[name] = row
    os.unlink(cases_path)
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


def agree(got: dict[str, Any], want: dict[str, Any], case: dict[str, Any]) -> bool:
    """The same screen: the same rows of text and the same cursor, once two differences
    of representation are set aside: a cursor waiting to wrap at the right edge is at
    column ``cols`` for xterm.js and ``cols - 1`` for others (the same state), and
    xterm.js drops invalid UTF-8 where we show U+FFFD by design (``replace``)."""
    cols = want.get("cols", 0)

    def cursor(c: list[Any]) -> list[Any]:
        return [min(c[0], cols - 1), *c[1:]] if cols else c

    lines = [line.replace("\ufffd", "") for line in got["lines"]]
    return lines == want["lines"] and cursor(got["cursor"]) == cursor(want["cursor"])


def enc(chunks: list[Chunk]) -> list[Any]:
    return [list(c) if isinstance(c, tuple) else base64.b64encode(c).decode() for c in chunks]


def describe(got: dict[str, Any], want: dict[str, Any]) -> str:
    if "error" in got:
        return str(got["error"])
    if got["cursor"] != want["cursor"]:
        first = f"cursor {got['cursor']} != {want['cursor']}"
    else:
        first = ""
    for row, (a, b) in enumerate(zip(got["lines"], want["lines"], strict=False)):
        if a != b:
            return f"{first} row {row}: {a[:40]!r} != {b[:40]!r}".strip()
    if got["lines"] != want["lines"]:
        return f"{first} rows {len(got['lines'])} != {len(want['lines'])}".strip()
    if first:
        return first
    return "scrollback differs"


def table(results: dict[str, Any]) -> str:
    head = (
        "| emulator | recordings = oracle | synthetic = oracle | CPU s/MB | "
        "PSS MiB (1000-line scrollback, after flood) | added by the emulator MiB |\n"
        "|---|---:|---:|---:|---:|---:|"
    )
    rows = [head]
    for name, r in results.items():
        if "error" in r:
            rows.append(f"| {name} | {r['error']} | | | | |")
            continue
        cpu = r.get("cpu_error") or r.get("throughput_error") or f"{r['cpu_s_per_mb']:.3f}"
        if "pss_kib" in r:
            pss = f"{r['pss_kib'] / 1024:.1f} | {r['pss_added_kib'] / 1024:.1f}"
        else:
            pss = f"{r.get('memory_error', '?')} |"
        rows.append(f"| {name} | {r['recordings']} | {r['synthetic']} | {cpu} | {pss} |")
    out = ["\n".join(rows)]
    hostile = [n for n, r in results.items() if "hostile" in r]
    if hostile:
        names = list(hostile_inputs())
        lines = [
            "| hostile input (CPU s) | " + " | ".join(hostile) + " |",
            "|---|" + "---:|" * len(hostile),
        ]
        for h in names:
            cells = []
            for n in hostile:
                v = results[n]["hostile"][h]
                cells.append(v["error"] if "error" in v else f"{v['cpu_s']:.2f}")
            lines.append(f"| {h} | " + " | ".join(cells) + " |")
        out.append("\n".join(lines))
    snaps = results.get(AGENTHOST, {}).get("snapshot", {})
    if snaps and "error" not in snaps:
        out.append(
            "\n".join(
                ["| snapshot (full coloured screen) | CPU ms | JSON bytes |", "|---|---:|---:|"]
                + [f"| {k} | {v['cpu_ms']:.2f} | {v['json_bytes']} |" for k, v in snaps.items()]
            )
        )
    fails = []
    for name, r in results.items():
        for case, why in r.get("failures", {}).items():
            fails.append(f"- {name}: {case}: {why}")
    if fails:
        out.append("Differences from the oracle:\n" + "\n".join(fails))
    return "\n\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
