"""Per-agent memory and CPU limits: where the daemon can enforce them, and how.

A host started in a systemd scope of its own (the daemon runs under a systemd user
manager: ``--host-scope systemd``, or ``auto`` there) gets the limits as the scope's
properties, ``MemoryMax=`` and ``CPUQuota=``, enforced by the kernel for the host and
everything its agent starts. Anywhere else the spawn is refused with a message that
says what is missing: a limit that is silently not enforced is worse than none.

The decision (:func:`plan`) is sans-IO, from :class:`Facts` that :func:`read_facts`
gathers (the daemon's cgroup v2 directory and the controllers it offers), so that the
refusal names what this machine has.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agenthost.errors import ResourceLimitUnsupported

_SIZE_RE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B?)?\s*$", re.IGNORECASE)
_UNIT: Final = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
MIN_MEMORY: Final = 1 << 20
"""Below this no agent starts: a smaller limit is a typo (``--memory-max 512`` meant M)."""
MAX_CPUS: Final = 1024.0


def parse_size(text: str) -> int:
    """``512M``, ``2G``, ``1.5GiB``, ``1048576`` -> bytes (powers of 1024, as systemd
    reads them). ValueError for anything else, or below 1 MiB."""
    match = _SIZE_RE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a size like 512M, 2G or 1.5GiB")
    size = float(match.group(1)) * _UNIT[match.group(2).upper()]
    if not math.isfinite(size) or size > 1 << 50:
        raise ValueError(f"{text!r} is too large")
    if size < MIN_MEMORY:
        raise ValueError(f"{text!r} is less than 1M: no agent runs in that")
    return int(size)


def parse_cpus(text: str) -> float:
    """``1``, ``0.5``, ``2.5`` CPUs (ValueError unless 0 < value <= 1024)."""
    try:
        cpus = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of CPUs like 1 or 0.5") from None
    if not math.isfinite(cpus) or not 0 < cpus <= MAX_CPUS:
        raise ValueError(f"{text!r} is not a number of CPUs between 0 and {MAX_CPUS:g}")
    return cpus


@dataclass(frozen=True, slots=True)
class Facts:
    """What the daemon knows of where its hosts run."""

    scope: str
    """``systemd`` (each host in a scope of its own) or ``session``."""
    cgroup_dir: str | None = None
    """The daemon's cgroup v2 directory, when there is one."""
    controllers: frozenset[str] = frozenset()
    """The controllers that directory offers (``cgroup.controllers``)."""


def systemd_properties(memory_max: int | None, cpu_max: float | None) -> list[str]:
    """``systemd-run -p`` properties: ``MemoryMax=2147483648``, ``CPUQuota=150%``."""
    props = []
    if memory_max is not None:
        props.append(f"MemoryMax={memory_max}")
    if cpu_max is not None:
        props.append(f"CPUQuota={round(cpu_max * 100)}%")
    return props


def plan(memory_max: int | None, cpu_max: float | None, facts: Facts) -> list[str]:
    """The scope properties that enforce the limits; [] without limits. Raise
    ResourceLimitUnsupported where they cannot be enforced, saying why."""
    if memory_max is None and cpu_max is None:
        return []
    if facts.scope == "systemd":
        return systemd_properties(memory_max, cpu_max)
    wanted = [name for name, v in (("memory", memory_max), ("cpu", cpu_max)) if v is not None]
    if facts.cgroup_dir is None:
        where = "this daemon is in no cgroup v2 hierarchy"
    else:
        offered = ", ".join(sorted(facts.controllers)) or "none"
        where = f"its cgroup v2 directory {facts.cgroup_dir} offers the controllers: {offered}"
        missing = [name for name in wanted if name not in facts.controllers]
        if not missing:
            where += " (agenthost does not manage cgroups itself: it uses systemd scopes)"
    raise ResourceLimitUnsupported(
        f"{' and '.join(wanted)} limits need each host in a systemd scope of its own, and "
        f"this daemon starts hosts in sessions: it does not run under a systemd user "
        f"manager; {where}",
        hint="run the daemon under systemd --user (see docs/daemon.md), or drop "
        "--memory-max/--cpu-max",
    )


def read_facts(scope: str, proc: Path = Path("/proc/self")) -> Facts:
    """The daemon's :class:`Facts` (its cgroup v2 directory from ``/proc/self/cgroup``
    and ``mountinfo``)."""
    try:
        relative = next(
            line[3:].strip()
            for line in (proc / "cgroup").read_text().splitlines()
            if line.startswith("0::")
        )
        mount = next(
            line.split()[4]
            for line in (proc / "mountinfo").read_text().splitlines()
            if " - cgroup2 " in line
        )
    except (OSError, StopIteration, IndexError):
        return Facts(scope)
    directory = Path(mount) / relative.lstrip("/")
    try:
        controllers = frozenset((directory / "cgroup.controllers").read_text().split())
    except OSError:
        controllers = frozenset()
    return Facts(scope, str(directory), controllers)
