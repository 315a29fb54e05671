"""agenthost.heap: giving freed memory back, and when (TrimPolicy, sans-IO)."""

from __future__ import annotations

import pytest

from agenthost import heap
from agenthost.heap import TrimPolicy


def test_trim_works_on_glibc() -> None:
    assert heap.trim() is True  # Linux with glibc: what the hosts run on
    assert heap.trim() is True  # loaded once, callable again


def policy() -> TrimPolicy:
    return TrimPolicy(poll=0.02, wait=2.0, gap=0.05, again=1.0)


def test_nothing_to_do_without_a_release() -> None:
    p = policy()
    assert p.check(0.0, buffered=False) is None
    assert p.check(0.0, buffered=True) is None


def test_trims_once_the_buffers_drained() -> None:
    p = policy()
    p.released()
    assert p.check(10.0, buffered=True) == 0.02  # the others still hold the batches
    assert p.check(10.02, buffered=True) == 0.02
    assert p.check(10.04, buffered=False) == 0.0  # drained: trim now
    assert p.trimmed(10.04) == 1.0  # and look once more, a second later
    assert p.check(11.04, buffered=False) == 0.0  # the follow-up trims ...
    assert p.trimmed(11.04) is None  # ... and, with no release since, ends
    assert p.check(12.0, buffered=False) is None


def test_a_client_that_never_reads_delays_the_trim_by_at_most_wait() -> None:
    p = policy()
    p.released()
    assert p.check(0.0, buffered=True) == 0.02
    assert p.check(1.99, buffered=True) == 0.02
    assert p.check(2.0, buffered=True) == 0.0
    p.trimmed(2.0)
    p.released()  # a new release starts a new wait
    assert p.check(2.5, buffered=True) == 0.02
    assert p.check(4.5, buffered=True) == 0.0


def test_trims_are_spaced_by_the_gap() -> None:
    p = policy()
    p.released()
    assert p.check(5.0, buffered=False) == 0.0
    p.trimmed(5.0)
    p.released()  # at once again: wait for the gap
    assert p.check(5.01, buffered=False) == pytest.approx(0.04)
    assert p.check(5.06, buffered=False) == 0.0
    assert p.trimmed(5.06) == 1.0


def test_releases_during_the_follow_up_keep_it_going() -> None:
    p = policy()
    p.released()
    p.check(0.0, buffered=False)
    assert p.trimmed(0.0) == 1.0
    p.released()
    assert p.check(1.0, buffered=False) == 0.0
    assert p.trimmed(1.0) == 1.0  # there was a release: one more look
    assert p.check(2.0, buffered=False) == 0.0
    assert p.trimmed(2.0) is None
