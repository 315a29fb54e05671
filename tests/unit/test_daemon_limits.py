"""The daemon's limits and resource plans, sans-IO: admission, the queue's order, idle
stops, sizes, and where memory/CPU limits can be enforced."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenthost.daemon.limits import (
    LIVE_STATUSES,
    Limits,
    admit,
    idle_reason,
    idle_stop_delay,
    to_start,
)
from agenthost.daemon.protocol import AgentStatus
from agenthost.daemon.resources import (
    Facts,
    parse_cpus,
    parse_size,
    plan,
    read_facts,
    systemd_properties,
)
from agenthost.errors import ResourceLimitUnsupported


def test_no_limit_admits_everything() -> None:
    assert admit(Limits(), 10_000).verdict == "admit"


def test_below_the_limit_admits_at_it_refuses_or_queues() -> None:
    assert admit(Limits(max_agents=2), 1).verdict == "admit"
    refused = admit(Limits(max_agents=2), 2)
    assert (refused.verdict, refused.reason) == (
        "refuse",
        "the daemon runs 2 agents, its limit (--max-agents 2)",
    )
    queued = admit(Limits(max_agents=2, queue=True), 3)
    assert queued.verdict == "queue" and queued.reason.endswith("queued until one ends")


def test_what_takes_a_place() -> None:
    assert LIVE_STATUSES == {"spawning", "running", "unreachable", "restarting"}
    for status in ("exited", "stopped", "failed", "lost", "queued", "incompatible"):
        assert AgentStatus(status) not in LIVE_STATUSES


def test_the_queue_is_first_in_first_out_for_the_free_places() -> None:
    queued = [("c", 3.0), ("a", 1.0), ("b", 2.0), ("a2", 1.0)]
    assert to_start(Limits(max_agents=3), 1, queued) == ["a", "a2"]
    assert to_start(Limits(max_agents=3), 3, queued) == []
    assert to_start(Limits(max_agents=3), 5, queued) == []  # over (lowered): none
    assert to_start(Limits(), 100, queued) == ["a", "a2", "b", "c"]


@pytest.mark.parametrize("state", ["running", "waiting", "starting", "done", "error", ""])
def test_only_idle_is_stopped_for_idleness(state: str) -> None:
    assert idle_stop_delay(Limits(idle_stop=60), state) is None


def test_idle_stop_delay_and_reason() -> None:
    assert idle_stop_delay(Limits(idle_stop=90), "idle") == 90
    assert idle_stop_delay(Limits(), "idle") is None
    assert idle_reason(Limits(idle_stop=5400)) == "idle for 1h30m0s (--idle-stop)"


@pytest.mark.parametrize(
    ("text", "size"),
    [("512M", 512 << 20), ("2G", 2 << 30), ("1.5GiB", 3 << 29), ("1048576", 1 << 20)],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "512", "-1G", "1X", "1e3G", "9" * 40 + "T", "1 G B"])
def test_garbage_sizes(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "two", "2000", ""])
def test_garbage_cpus(text: str) -> None:
    with pytest.raises(ValueError):
        parse_cpus(text)


def test_systemd_scopes_get_properties() -> None:
    assert systemd_properties(2 << 30, 1.5) == ["MemoryMax=2147483648", "CPUQuota=150%"]
    assert plan(None, 0.25, Facts("systemd")) == ["CPUQuota=25%"]
    assert plan(None, None, Facts("session")) == []


def test_sessions_refuse_and_say_what_the_machine_offers() -> None:
    with pytest.raises(ResourceLimitUnsupported) as refused:
        plan(1 << 30, None, Facts("session", "/sys/fs/cgroup/unified", frozenset({"hugetlb"})))
    assert "memory limits need each host in a systemd scope" in refused.value.message
    assert "offers the controllers: hugetlb" in refused.value.message
    with pytest.raises(ResourceLimitUnsupported) as refused:
        plan(1 << 30, 2.0, Facts("session"))
    assert "memory and cpu limits" in refused.value.message
    assert "no cgroup v2 hierarchy" in refused.value.message
    with pytest.raises(ResourceLimitUnsupported) as refused:
        plan(None, 2.0, Facts("session", "/sys/fs/cgroup/x", frozenset({"cpu", "memory"})))
    assert "does not manage cgroups itself" in refused.value.message


def test_facts_are_read_from_proc(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    mount = tmp_path / "cg"
    (mount / "user.slice" / "d").mkdir(parents=True)
    (mount / "user.slice" / "d" / "cgroup.controllers").write_text("cpu memory pids\n")
    (proc / "cgroup").write_text("4:memory:/x\n0::/user.slice/d\n")
    (proc / "mountinfo").write_text(
        f"30 20 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
        f"31 20 0:27 / {mount} rw,relatime - cgroup2 cgroup2 rw\n"
    )
    facts = read_facts("session", proc)
    assert facts == Facts(
        "session", str(mount / "user.slice" / "d"), frozenset({"cpu", "memory", "pids"})
    )
    (proc / "cgroup").write_text("garbage\n")
    assert read_facts("session", proc) == Facts("session")
    assert read_facts("systemd", tmp_path / "nowhere") == Facts("systemd")
