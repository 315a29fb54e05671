"""bubblewrap's command line for one sandbox layout (no I/O).

A :class:`Layout` is the list of mounts in the order bubblewrap applies them (a later
mount covers what an earlier one put at or under its path: ``$HOME``'s tmpfs first,
then what the agent's kind needs inside it, the masks last), the working directory,
and the network. :func:`bwrap_argv` turns it into arguments; :mod:`.layout` makes the
layout from the machine's files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from agenthost.sandbox.profiles import Network

MountKind = Literal["ro", "rw", "tmpfs", "symlink", "dir", "proc", "dev", "mask"]

_BIND_FLAG: Final = {"ro": "--ro-bind", "rw": "--bind"}


@dataclass(frozen=True, slots=True)
class Mount:
    """One mount inside the sandbox at ``dest``.

    ``ro``/``rw``: ``source`` bound there (the same path, normally); ``tmpfs``: an empty
    private directory; ``symlink``: a link to ``source`` (``/bin -> usr/bin``);
    ``dir``: an empty directory; ``proc``/``dev``: the sandbox's own ``/proc`` and a
    minimal ``/dev``; ``mask``: ``/dev/null`` over a file (read-only, empty).
    """

    kind: MountKind
    dest: str
    source: str | None = None


@dataclass(frozen=True, slots=True)
class Layout:
    """Everything bubblewrap needs to know of one sandbox but the command."""

    mounts: tuple[Mount, ...]
    cwd: str
    network: Network
    hostname: str = "sandbox"


def mount_args(mount: Mount) -> list[str]:
    """bubblewrap's arguments for one mount."""
    if mount.kind in _BIND_FLAG:
        return [_BIND_FLAG[mount.kind], mount.source or mount.dest, mount.dest]
    if mount.kind == "tmpfs":
        return ["--tmpfs", mount.dest]
    if mount.kind == "symlink":
        return ["--symlink", mount.source or "", mount.dest]
    if mount.kind == "dir":
        return ["--dir", mount.dest]
    if mount.kind == "proc":
        return ["--proc", mount.dest]
    if mount.kind == "dev":
        return ["--dev", mount.dest]
    return ["--ro-bind", "/dev/null", mount.dest]  # mask


def bwrap_argv(
    bwrap: str,
    layout: Layout,
    command: Sequence[str],
    *,
    seccomp_fd: int | None,
    info_fd: int | None = None,
    disable_userns: bool = True,
) -> list[str]:
    """The whole command line: bubblewrap, its options, ``--``, then ``command``.

    Every namespace is new (user, mount, PID, IPC, UTS, cgroup where the kernel has
    it; network too unless the profile is ``net``). ``--die-with-parent`` ends the
    sandbox with whoever started it; ``--new-session`` keeps the agent from the
    terminal of anyone who started it (TIOCSTI); ``--info-fd`` tells the caller the
    pid of the sandbox's first process, whose process group holds the agent. Every
    capability is dropped (bubblewrap started by root would keep them inside its user
    namespace) and, where bubblewrap can (0.8), no user namespace may be made inside.
    """
    argv = [
        bwrap,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        layout.hostname,
    ]
    if disable_userns:
        argv.append("--disable-userns")
    if layout.network != "net":
        argv.append("--unshare-net")
    for mount in layout.mounts:
        argv += mount_args(mount)
    argv += ["--chdir", layout.cwd]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    return [*argv, "--", *command]
