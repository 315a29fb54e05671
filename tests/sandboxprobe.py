"""Run inside a sandbox: make each system call named on the command line and print one
JSON object, ``{name: outcome}``, where the outcome is the call's errno (0: it
succeeded) or ``"signal N"`` when the call killed the process (seccomp's bad-arch
action). Every call runs in a forked child, so one that succeeds (a new namespace, a
mount) changes nothing for the next.

The arguments are harmless where a call succeeds, or garbage the kernel rejects with
its own errno (EFAULT, EBADF, EINVAL) after its capability checks: so a refusal by the
seccomp filter (EPERM, ENOSYS, EAFNOSUPPORT before the kernel looks) is told apart
from the kernel's own answer. ``--tty FD`` names a pty slave for the terminal calls.

Usage: python3 sandboxprobe.py [--tty FD] NAME...
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import signal
import socket
import struct
import sys
import termios
from collections.abc import Callable

import pyseccomp

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
NULL = ctypes.c_void_p(0)
SIGCHLD = 17
TTY_FD = -1


def sys_call(name: str, *args: int | bytes | ctypes.c_void_p | ctypes.Array[ctypes.c_char]) -> int:
    """syscall(2) by name; return 0 on success, else the errno."""
    number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    if number < 0:
        return 38  # ENOSYS: the call does not exist on this architecture
    c_args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    result = LIBC.syscall(ctypes.c_long(number), *c_args)
    return ctypes.get_errno() if result == -1 else 0


def clone_child(name: str, *args: int | ctypes.c_void_p | ctypes.Array[ctypes.c_char]) -> int:
    """A raw clone/clone3 (fork semantics: no new stack); the child exits at once."""
    number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    c_args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    pid = LIBC.syscall(ctypes.c_long(number), *c_args)
    if pid == 0:
        os._exit(0)
    if pid < 0:
        return ctypes.get_errno()
    os.waitpid(pid, 0)
    return 0


def take_tty() -> None:
    """Make TTY_FD this process's controlling terminal: TIOCSTI needs that, or
    CAP_SYS_ADMIN, to succeed (the control run must show the injection working)."""
    if os.getsid(0) != os.getpid():
        os.setsid()
    fcntl.ioctl(TTY_FD, termios.TIOCSCTTY, 0)


def tiocsti(high_bits: int = 0) -> int:
    take_tty()
    return sys_call("ioctl", TTY_FD, termios.TIOCSTI | high_bits, ctypes.create_string_buffer(b"x"))


def int80_tiocsti() -> int:
    """ioctl(TIOCSTI) through the i386 ABI (``int 0x80``) from this 64-bit process: the
    classic way around a filter that knows x86_64's numbers only. Code and data sit in
    one page below 4 GiB (MAP_32BIT): int 0x80 takes 32-bit pointers."""
    take_tty()
    mmap = LIBC.mmap
    mmap.restype = ctypes.c_void_p
    mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    mmap.argtypes += [ctypes.c_int, ctypes.c_long]
    rwx, private_anon_32bit = 7, 0x02 | 0x20 | 0x40
    page = mmap(None, 4096, rwx, private_anon_32bit, -1, 0)
    code = bytes.fromhex(
        "53"  # push rbx (callee-saved)
        "b836000000"  # mov eax, 54 (i386 ioctl)
        "89fb"  # mov ebx, edi (fd)
        "89f1"  # mov ecx, esi (request)
        "cd80"  # int 0x80 (edx: the pointer, already the third argument)
        "5b"  # pop rbx
        "c3"  # ret
    )
    ctypes.memmove(page, code, len(code))
    ctypes.memmove(page + 64, b"x", 1)
    function = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_uint, ctypes.c_uint)(page)
    result = function(TTY_FD, termios.TIOCSTI, page + 64)
    return -result if result < 0 else 0


def tioclinux() -> int:
    return sys_call("ioctl", TTY_FD, 0x541C, ctypes.create_string_buffer(b"\x0b"))


def socket_family(family: int) -> int:
    return sys_call("socket", family, socket.SOCK_STREAM, 0)


def bad_timeval() -> ctypes.Array[ctypes.c_char]:
    return ctypes.create_string_buffer(struct.pack("qq", 0, 2_000_000))  # usec > 1 s


PROBES: dict[str, Callable[[], int]] = {
    "tiocsti": tiocsti,
    "tiocsti_high_bits": lambda: tiocsti(1 << 32),
    "int80_tiocsti": int80_tiocsti,
    "tioclinux": tioclinux,
    "bpf": lambda: sys_call("bpf", 0xFFFF, NULL, 0),
    "perf_event_open": lambda: sys_call("perf_event_open", NULL, 0, -1, -1, 0),
    "userfaultfd": lambda: sys_call("userfaultfd", 1),  # UFFD_USER_MODE_ONLY
    "io_uring_setup": lambda: sys_call("io_uring_setup", 0, NULL),
    "io_uring_enter": lambda: sys_call("io_uring_enter", -1, 0, 0, 0, NULL, 0),
    "io_uring_register": lambda: sys_call("io_uring_register", -1, 0, NULL, 0),
    "keyctl": lambda: sys_call("keyctl", 0, -3, 0),  # KEYCTL_GET_KEYRING_ID, session
    "add_key": lambda: sys_call("add_key", NULL, NULL, NULL, 0, 0),
    "request_key": lambda: sys_call("request_key", NULL, NULL, NULL, 0),
    "unshare_user": lambda: sys_call("unshare", 0x10000000),
    "unshare_net": lambda: sys_call("unshare", 0x40000000),
    "unshare_mount": lambda: sys_call("unshare", 0x00020000),
    "clone_user": lambda: clone_child("clone", 0x10000000 | SIGCHLD, 0, 0, 0, 0),
    "clone3": lambda: clone_child(
        "clone3", ctypes.create_string_buffer(struct.pack("8Q", 0, 0, 0, 0, SIGCHLD, 0, 0, 0)), 64
    ),
    "setns": lambda: sys_call("setns", -1, 0),
    "mount": lambda: sys_call("mount", NULL, NULL, NULL, 0, NULL),
    "umount2": lambda: sys_call("umount2", b"/", 0xFFFF),
    "pivot_root": lambda: sys_call("pivot_root", NULL, NULL),
    "chroot": lambda: sys_call("chroot", NULL),
    "open_tree": lambda: sys_call("open_tree", -1, NULL, 0xFFFFFFF),
    "move_mount": lambda: sys_call("move_mount", -1, NULL, -1, NULL, 0xFFFFFFF),
    "fsopen": lambda: sys_call("fsopen", NULL, 0),
    "fsconfig": lambda: sys_call("fsconfig", -1, 0, NULL, NULL, 0),
    "fsmount": lambda: sys_call("fsmount", -1, 0, 0),
    "fspick": lambda: sys_call("fspick", -1, NULL, 0xFFFFFFF),
    "mount_setattr": lambda: sys_call("mount_setattr", -1, NULL, 0xFFFFFFF, NULL, 0),
    "kexec_load": lambda: sys_call("kexec_load", 0, 1 << 20, NULL, 0),
    "kexec_file_load": lambda: sys_call("kexec_file_load", -1, -1, 0, NULL, 0),
    "init_module": lambda: sys_call("init_module", NULL, 0, NULL),
    "finit_module": lambda: sys_call("finit_module", -1, NULL, 0),
    "delete_module": lambda: sys_call("delete_module", b"agenthost_no_such_module", 0),
    "reboot": lambda: sys_call("reboot", 0, 0, 0, NULL),  # bad magic: EINVAL
    "swapon": lambda: sys_call("swapon", NULL, 0),
    "swapoff": lambda: sys_call("swapoff", NULL),
    "acct": lambda: sys_call("acct", b"/nonexistent/agenthost"),
    "quotactl": lambda: sys_call("quotactl", 0xFFFF, NULL, 0, NULL),
    "syslog": lambda: sys_call("syslog", 10, NULL, 0),  # SYSLOG_ACTION_SIZE_BUFFER
    "settimeofday": lambda: sys_call("settimeofday", bad_timeval(), NULL),
    "clock_settime": lambda: sys_call("clock_settime", 999, NULL),
    "clock_adjtime": lambda: sys_call("clock_adjtime", 999, NULL),
    "iopl": lambda: sys_call("iopl", 4),
    "ioperm": lambda: sys_call("ioperm", 0, 0, 1),
    "open_by_handle_at": lambda: sys_call("open_by_handle_at", -1, NULL, 0),
    "uselib": lambda: sys_call("uselib", NULL),
    "socket_vsock": lambda: socket_family(40),  # AF_VSOCK
    "socket_vsock_high_bits": lambda: socket_family(40 | 1 << 32),
    "socket_packet": lambda: socket_family(17),  # AF_PACKET
    # Allowed: the control of the controls (the filter must not refuse these).
    "socket_inet": lambda: socket_family(socket.AF_INET),
    "socket_unix": lambda: socket_family(socket.AF_UNIX),
    "ptrace_traceme": lambda: sys_call("ptrace", 0, 0, NULL, NULL),
}


def run_forked(probe: Callable[[], int]) -> int | str:
    pid = os.fork()
    if pid == 0:
        code = 255
        try:
            code = probe()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return os.WEXITSTATUS(status)


def main(argv: list[str]) -> None:
    global TTY_FD
    if argv[:1] == ["--tty"]:
        TTY_FD = int(argv[1])
        argv = argv[2:]
    print(json.dumps({name: run_forked(PROBES[name]) for name in argv}))


if __name__ == "__main__":
    main(sys.argv[1:])
