"""The remote tests' sshd: one for the session (tests/remote/sshtools.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from hosttools import HostProc
from sshtools import Sshd, start_sshd

# Both this file and tests/conftest.py are imported as the module ``conftest``;
# test modules do ``from conftest import HostFactory``, so the name must exist here
# too (the same alias as in tests/conftest.py).
HostFactory = Callable[..., HostProc]


@pytest.fixture(scope="session")
def sshd() -> Iterator[Sshd]:
    """One OpenSSH server on 127.0.0.1 for the session (skipped, or failed in CI,
    without openssh-server)."""
    yield from start_sshd()
