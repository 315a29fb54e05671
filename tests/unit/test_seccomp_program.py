"""The seccomp program as bytes: stable, well formed classic BPF, handed over in a sealed
memfd; and the one-line reason when no filter can be built. What it refuses is tested
for real, inside bubblewrap, in tests/integration/test_sandbox_seccomp.py."""

from __future__ import annotations

import errno
import os
import struct
import sys
from collections.abc import Iterator

import pytest
from e2e.clis import unavailable

from agenthost.errors import SandboxUnavailable
from agenthost.sandbox import seccomp

BPF_RET, BPF_JMP, BPF_JA = 0x06, 0x05, 0x00
SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x80000000, 0x50000


@pytest.fixture
def program() -> bytes:
    reason = seccomp.unavailable()
    if reason is not None:
        unavailable(reason)
    return seccomp.compile_filter()


def instructions(program: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]


def test_the_program_is_cached_non_empty_and_whole_instructions(program: bytes) -> None:
    assert program
    assert len(program) % 8 == 0
    assert len(program) // 8 < 4096  # BPF_MAXINSNS: the kernel refuses longer programs
    assert seccomp.compile_filter() is program


def test_every_jump_stays_inside_and_every_return_is_ours(program: bytes) -> None:
    code = instructions(program)
    returns = set()
    for index, (op, jt, jf, k) in enumerate(code):
        if op & 0x07 == BPF_JMP:
            targets = [index + 1 + k] if op & 0xF0 == BPF_JA else [index + 1 + jt, index + 1 + jf]
            assert all(t < len(code) for t in targets), (index, op, jt, jf, k)
        elif op & 0x07 == BPF_RET:
            returns.add(k)
    assert code[-1][0] & 0x07 == BPF_RET  # no falling off the end
    errnos = {errno.EPERM, errno.ENOSYS, errno.EAFNOSUPPORT}
    assert returns == {SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS} | {
        SECCOMP_RET_ERRNO | e for e in errnos
    }


def test_filter_fd_holds_the_program_sealed_from_offset_zero(program: bytes) -> None:
    fd = seccomp.filter_fd()
    other = seccomp.filter_fd()
    try:
        assert fd != other
        assert os.get_inheritable(fd)
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0
        assert os.read(fd, len(program) + 1) == program
        with pytest.raises(PermissionError):  # F_SEAL_WRITE: whoever inherits it
            os.pwrite(fd, b"\0" * 8, 0)
    finally:
        os.close(fd)
        os.close(other)


@pytest.fixture
def no_binding(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """pyseccomp cannot be imported (None in sys.modules makes ``import`` fail)."""
    seccomp._compiled.cache_clear()
    monkeypatch.setitem(sys.modules, "pyseccomp", None)
    yield
    seccomp._compiled.cache_clear()


def test_without_the_binding_each_call_says_what_to_install(no_binding: None) -> None:
    reason = seccomp.unavailable()
    assert reason is not None
    assert "libseccomp2" in reason and "\n" not in reason
    with pytest.raises(SandboxUnavailable, match="no seccomp filter can be built"):
        seccomp.compile_filter()
    with pytest.raises(SandboxUnavailable):
        seccomp.filter_fd()
