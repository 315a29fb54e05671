"""A bound on how many processes one sandbox may have: the pids controller of a cgroup
of its own, so that a fork bomb inside stops at ``pids.max`` and the rest of the
machine (whose process ids are shared) is not hurt. A PID namespace alone bounds
nothing, and ``RLIMIT_NPROC`` counts all of the user's processes (and none of root's).

The group is made where the host may make one: under the host's own cgroup in the
cgroup v1 ``pids`` hierarchy (root), or under a cgroup v2 directory the host may write
whose ``pids`` controller is delegated to its children (a systemd unit with
``Delegate=yes``). Elsewhere there is no bound: ``agenthost sandbox check`` says so.

Each process of the sandbox joins the group before bubblewrap starts: a small
``sh`` writes its own pid into ``cgroup.procs`` and execs the rest, so nothing forks
outside it first.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

log = structlog.get_logger("agenthost.sandbox")

CGROUP_ROOT: Final = Path("/sys/fs/cgroup")
_JOIN: Final = 'echo $$ > "$0" && exec "$@"'


def _own_cgroups(proc: Path = Path("/proc/self/cgroup")) -> dict[str, str]:
    """Controller (``pids``, or ``""`` for cgroup v2) -> this process's cgroup path."""
    found: dict[str, str] = {}
    try:
        text = proc.read_text()
    except OSError:
        return found
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(","):
                found[controller] = parts[2]
    return found


def find_base() -> tuple[Path, str] | None:
    """Where sandboxes' groups can be made here, and how (``v1``, ``v2``), or None."""
    own = _own_cgroups()
    if "pids" in own:
        base = CGROUP_ROOT / "pids" / own["pids"].lstrip("/")
        if (base / "cgroup.procs").exists() and os.access(base, os.W_OK):
            return base, "v1"
    if "" in own and (CGROUP_ROOT / "cgroup.controllers").exists():
        base = CGROUP_ROOT / own[""].lstrip("/")
        try:
            delegated = "pids" in (base / "cgroup.subtree_control").read_text().split()
        except OSError:
            delegated = False
        if delegated and os.access(base, os.W_OK):
            return base, "v2"
    return None


def describe() -> str | None:
    """How sandboxes are bounded here, or None if they are not."""
    found = find_base()
    if found is None:
        return None
    return f"a pids cgroup per sandbox under {found[0]} (cgroup {found[1]})"


@dataclass
class PidsGroup:
    """One sandbox's cgroup."""

    path: Path
    max_processes: int

    @classmethod
    def make(cls, name: str, max_processes: int) -> PidsGroup | None:
        """A new group limited to ``max_processes``, or None where none can be made."""
        found = find_base()
        if found is None:
            return None
        _sweep(found[0])
        path = found[0] / name
        try:
            path.mkdir(exist_ok=True)
            (path / "pids.max").write_text(f"{max_processes}\n")
        except OSError as exc:
            log.warning("sandbox.no_pids_group", path=str(path), error=str(exc))
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path, max_processes)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run as a member of the group (it joins, then execs ``argv``)."""
        return ["/bin/sh", "-c", _JOIN, str(self.path / "cgroup.procs"), *argv]

    def remove(self) -> None:
        """Remove the group (once its processes are gone)."""
        try:
            self.path.rmdir()
        except OSError as exc:
            log.warning("sandbox.pids_group_left", path=str(self.path), error=str(exc))


def _sweep(base: Path) -> None:
    """Remove the empty groups of hosts that died without removing theirs (their names
    end with the host's pid)."""
    for path in base.glob("agenthost-*-*"):
        pid = path.name.rsplit("-", 1)[1]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        with contextlib.suppress(OSError):
            path.rmdir()  # fails while processes are in it: then it is not stale
