"""The seccomp filter of a sandboxed agent, handed to ``bwrap --seccomp FD``.

bubblewrap's namespaces already hide the host's files, processes, network and IPC.
This filter covers what namespaces do not: system calls that reach shared kernel state
or large, bug-prone kernel code whatever namespace the caller is in. The default is to
allow; what is listed fails with ``EPERM`` (a program sees "not permitted" and can fall
back), except ``clone3`` (``ENOSYS``, so libc falls back to ``clone``, whose flags the
filter can read) and sockets of unlisted families (``EAFNOSUPPORT``).

What each group stops:

- **Terminal injection.** ``ioctl(TIOCSTI)`` pushes bytes into a terminal's input, so a
  process holding a terminal descriptor types commands into the user's shell once the
  agent exits; ``TIOCLINUX`` does the same on a virtual console. Only the low 32 bits of
  the request are compared, as the kernel reads them (high bits set do not slip by).
- **New namespaces inside.** ``unshare``, ``clone`` with a ``CLONE_NEW*`` flag,
  ``setns``: a new user namespace gives back every capability inside it and exposes
  the kernel code that only root could reach (the source of most namespace escapes).
- **Mounts** (``mount``, the new mount API, ``pivot_root``, ``chroot``): the sandbox's
  view of the file system stays the one bubblewrap built. Defence in depth: without
  capabilities these fail anyway, but bubblewrap started by root keeps them.
- **Kernel attack surface an agent has no use for:** ``bpf``, ``perf_event_open``,
  ``userfaultfd`` (makes kernel races reliable), ``io_uring_*`` (a second system call
  interface this filter cannot see into), the kernel keyrings (``keyctl``, ``add_key``,
  ``request_key``: not namespaced), and sockets other than Unix, IPv4, IPv6 and netlink
  (``AF_VSOCK`` reaches the hypervisor's host, which no network namespace isolates).
- **Administration** (modules, ``kexec``, ``reboot``, swap, clocks, ``syslog``,
  ``acct``, quotas, I/O ports, ``open_by_handle_at``): all need capabilities; refused
  again in case the sandbox was started with them.
- **Other ABIs.** On x86_64 the 32-bit (``int 0x80``) and x32 system call ABIs are not
  allowed at all: such a call kills the process (libseccomp's bad-arch action). A
  filter written for one ABI's numbers is blind on another (``int 0x80`` with i386's
  ioctl number is the classic way around a TIOCSTI rule), and agents run no 32-bit
  programs. The same holds for AArch32 on aarch64.

What it does not do: it confines nothing by path or address (that is bubblewrap's mount
and network namespaces, and the proxy's allowlist); it does not bound resources (a fork
bomb is bounded by limits, not here). ``ptrace`` and ``process_vm_readv/writev`` stay
allowed: the PID namespace already limits them to the agent's own tree, where debuggers
(gdb, strace, py-spy) are legitimate, and since Linux 4.8 a tracer cannot move a call
past the filter. ``personality`` and the NUMA calls stay allowed too.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
from typing import Any, Final

from agenthost.errors import SandboxUnavailable

_INSTALL_HINT: Final = "install the Debian package libseccomp2 (and pip's pyseccomp)"

# The group of each listed call, with why, in one table: the module docstring explains
# the groups. Every call here fails with EPERM whatever its arguments.
_REFUSED: Final[dict[str, str]] = {
    # --- kernel attack surface
    "bpf": "loads programs into the kernel; eBPF verifier bugs are kernel bugs",
    "perf_event_open": "a large, often exploited interface; also a side channel",
    "userfaultfd": "pauses the kernel mid-copy: turns kernel races into reliable exploits",
    "io_uring_setup": "a second syscall interface the filter cannot inspect",
    "io_uring_enter": "see io_uring_setup",
    "io_uring_register": "see io_uring_setup",
    "keyctl": "kernel keyrings are not namespaced: the user's session keys are there",
    "add_key": "see keyctl",
    "request_key": "see keyctl; may also upcall helpers outside the sandbox",
    # --- namespaces (clone and unshare are refused by flag, below)
    "setns": "joining another namespace is leaving the sandbox",
    # --- mounts: the file system view is bubblewrap's
    "mount": "remounting could make a read-only bind writable",
    "umount2": "unmounting could uncover what a mount hides",
    "pivot_root": "changes the root the sandbox was built on",
    "chroot": "with a writable dir, a classic way to confuse path checks",
    "open_tree": "new mount API: see mount",
    "move_mount": "new mount API: see mount",
    "fsopen": "new mount API: see mount",
    "fsconfig": "new mount API: see mount",
    "fsmount": "new mount API: see mount",
    "fspick": "new mount API: see mount",
    "mount_setattr": "new mount API: could clear a mount's read-only flag",
    # --- administration: needs capabilities; refused again if bwrap kept them
    "kexec_load": "replaces the running kernel",
    "kexec_file_load": "replaces the running kernel",
    "init_module": "loads kernel code",
    "finit_module": "loads kernel code",
    "delete_module": "unloads kernel code",
    "reboot": "the machine is not the agent's",
    "swapon": "the machine is not the agent's",
    "swapoff": "the machine is not the agent's",
    "acct": "process accounting is machine-wide",
    "quotactl": "quotas are machine-wide",
    "syslog": "the kernel log leaks kernel addresses (KASLR)",
    "settimeofday": "the clock is not namespaced",
    "clock_settime": "the clock is not namespaced",
    "clock_adjtime": "the clock is not namespaced",
    "iopl": "raw I/O port access (x86)",
    "ioperm": "raw I/O port access (x86)",
    "open_by_handle_at": "opens files by handle, past the mount view (the Shocker escape)",
    "uselib": "obsolete a.out loader; only attack surface today",
}

# ioctl requests refused (TIOCSTI, TIOCLINUX from <asm-generic/ioctls.h>: the same values
# on x86_64 and aarch64), compared on the low 32 bits as the kernel reads `cmd`.
_TIOCSTI: Final = 0x5412
_TIOCLINUX: Final = 0x541C

# Namespace flags of clone(2)/unshare(2) (<linux/sched.h>). CLONE_NEWTIME (0x80) is
# only honoured by unshare: in clone's flags that byte is the exit signal.
_CLONE_NS_FLAGS: Final = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
_CLONE_NEWTIME: Final = 0x00000080

# Socket families an agent needs: Unix, IPv4, IPv6, netlink (getaddrinfo, `ip`). The
# rest is refused, AF_VSOCK first (host services of a VM, in no network namespace);
# AF_ALG, AF_TIPC, AF_RDS and the like are rarely used and often buggy.
_ALLOWED_FAMILIES: Final = frozenset({1, 2, 10, 16})  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
_FIRST_UNLISTED_FAMILY: Final = 17  # every family >= this (AF_PACKET up) is refused


def _architectures(seccomp: Any) -> frozenset[int]:
    """The architectures whose clone(2) takes its flags in the first argument and whose
    ioctl numbers are the generic ones, as the rules above assume."""
    return frozenset({seccomp.Arch.X86_64, seccomp.Arch.AARCH64})


def _build(seccomp: Any) -> Any:
    """The libseccomp filter (native architecture only), rules added."""
    if seccomp.system_arch() not in _architectures(seccomp):
        raise SandboxUnavailable(
            f"the seccomp filter knows x86_64 and aarch64, not this architecture "
            f"(libseccomp's number {seccomp.system_arch():#x})"
        )
    eperm = seccomp.ERRNO(errno.EPERM)
    flt = seccomp.SyscallFilter(seccomp.ALLOW)
    # Any call from another ABI (i386, x32 on x86_64; AArch32) ends the process: the
    # rules below are written in the native ABI's numbers only.
    flt.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    for name in _REFUSED:
        flt.add_rule(eperm, name)

    def low32(arg: int, value: int) -> Any:
        return seccomp.Arg(arg, seccomp.MASKED_EQ, 0xFFFFFFFF, value)

    def has_flag(flag: int) -> Any:
        return seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag)

    # TIOCSTI: typing into the terminal; TIOCLINUX: the same on a virtual console.
    flt.add_rule(eperm, "ioctl", low32(1, _TIOCSTI))
    flt.add_rule(eperm, "ioctl", low32(1, _TIOCLINUX))
    # New namespaces inside: user namespaces first (capabilities again inside them).
    for flag in _CLONE_NS_FLAGS:
        flt.add_rule(eperm, "clone", has_flag(flag))
        flt.add_rule(eperm, "unshare", has_flag(flag))
    flt.add_rule(eperm, "unshare", has_flag(_CLONE_NEWTIME))
    # clone3 passes its flags in memory, out of the filter's sight: ENOSYS makes glibc
    # (2.34+) and other runtimes fall back to clone, whose flags are checked above.
    flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    # Socket families: refuse all but the allowed ones (EAFNOSUPPORT: a program takes
    # it as "not supported here" and moves on).
    no_family = seccomp.ERRNO(errno.EAFNOSUPPORT)
    for family in range(_FIRST_UNLISTED_FAMILY):
        if family not in _ALLOWED_FAMILIES:
            flt.add_rule(no_family, "socket", seccomp.Arg(0, seccomp.EQ, family))
    flt.add_rule(no_family, "socket", seccomp.Arg(0, seccomp.GE, _FIRST_UNLISTED_FAMILY))
    return flt


def _import_binding() -> Any:
    """pyseccomp, imported only when a sandbox is built (it loads libseccomp.so.2)."""
    try:
        import pyseccomp  # type: ignore[import-untyped]
    except (ImportError, RuntimeError, OSError) as exc:
        # RuntimeError: pyseccomp's own "Unable to find libseccomp".
        raise SandboxUnavailable(
            f"no seccomp filter can be built here: {exc}", hint=_INSTALL_HINT
        ) from exc
    return pyseccomp


@functools.cache
def _compiled() -> bytes:
    seccomp = _import_binding()
    try:
        flt = _build(seccomp)
        # libseccomp writes the program to a descriptor: a memfd keeps it off disk.
        fd = os.memfd_create("agenthost-seccomp", os.MFD_CLOEXEC)
        try:
            with os.fdopen(os.dup(fd), "wb") as out:
                flt.export_bpf(out)
            return _read_all(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise SandboxUnavailable(
            f"libseccomp could not build the sandbox's filter: {exc}", hint=_INSTALL_HINT
        ) from exc


def _read_all(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def compile_filter() -> bytes:
    """The sandbox's seccomp program: classic BPF (``struct sock_filter`` array, 8 bytes
    an instruction), as ``bwrap --seccomp`` reads it. Built once per process, then
    cached. Raise :class:`SandboxUnavailable` when it cannot be built here."""
    return _compiled()


def unavailable() -> str | None:
    """Why no filter can be built on this machine (one line naming what to install), or
    None when :func:`compile_filter` works."""
    try:
        compile_filter()
    except SandboxUnavailable as exc:
        return f"{exc.message} ({exc.hint})" if exc.hint else exc.message
    return None


def filter_fd() -> int:
    """A new descriptor holding :func:`compile_filter`'s program, read from offset 0,
    inheritable, for ``bwrap --seccomp FD`` (pass it in ``pass_fds``). The caller closes
    it after the spawn. A sealed memfd: whoever inherits it cannot change the program.
    Raise :class:`SandboxUnavailable` as :func:`compile_filter` does."""
    program = compile_filter()
    try:
        fd = os.memfd_create("agenthost-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except OSError as exc:
        raise SandboxUnavailable(f"cannot create the seccomp filter's memfd: {exc}") from exc
    try:
        view = memoryview(program)
        while view:
            view = view[os.write(fd, view) :]
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        os.lseek(fd, 0, os.SEEK_SET)
        os.set_inheritable(fd, True)
    except OSError as exc:
        os.close(fd)
        raise SandboxUnavailable(f"cannot write the seccomp filter's memfd: {exc}") from exc
    return fd
