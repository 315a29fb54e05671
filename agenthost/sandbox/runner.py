"""The sandbox a host runs its agent in: how each of its processes is started (the
agent, and the terminals an ACP agent asks its client for), and, in ``strict``, the
proxy that is its only way out.

The host stays outside, unchanged: it starts bubblewrap as the agent's process, keeps
its pipes, and stops it by signalling the process group of the sandbox's first process
(``--new-session`` made it a session of its own; :func:`sandbox_group`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import structlog

from agenthost.errors import SandboxUnavailable
from agenthost.pyargv import module_argv
from agenthost.sandbox.bwrapargs import bwrap_argv
from agenthost.sandbox.layout import PROXY_PORT, PROXY_SOCKET, Request, build_layout
from agenthost.sandbox.machine import require
from agenthost.sandbox.profiles import Profile, Settings

if TYPE_CHECKING:
    from agenthost.agents.base import Governed
    from agenthost.sandbox.pids import PidsGroup
    from agenthost.sandbox.proxy import Proxy

log = structlog.get_logger("agenthost.sandbox")

SANDBOX_VAR: Final = "AGENTHOST_SANDBOX"
"""Set inside every sandbox to its profile: ``agenthost`` run there says where it is."""
PROXY_VARS: Final = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)
LOOPBACK: Final = ("localhost", "127.0.0.1", "::1")
DROPPED_VARS: Final = (
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "NO_PROXY",
    "no_proxy",
    *PROXY_VARS,
)
"""Variables that lead outside the sandbox (agents, buses, displays, proxies): none of
what they name is there, and the proxy settings are the sandbox's own."""
KEPT_VARS: Final = (
    "AGENTHOST_AGENT_RUN",
    "AGENTHOST_DEMO_PACE",
    "AGENTHOST_HOOK_SOCKET",
    "AGENTHOST_HOOK_TOKEN",
)
"""The variables of agenthost's that stay inside: the run's marker (the watchdog finds
the agent's processes by it), the demo agent's pace, and a terminal agent's hook socket
(in the sandbox's own directory) and token (agenthost.terminal.hooksetup). Any other
``AGENTHOST_*`` is agenthost's own business, and may lead to the home."""


@dataclass(frozen=True, slots=True)
class Launch:
    """A process to start in the sandbox: its argv, its environment, and the
    descriptors it must inherit (closed by the caller once it started)."""

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = field(default=())

    def close(self) -> None:
        """Close the descriptors handed to the child (after the spawn, or if it failed)."""
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def inside_env(env: Mapping[str, str], profile: Profile, hosts: Sequence[str]) -> dict[str, str]:
    """The environment of a process inside: nothing that leads outside, nothing of
    agenthost's but :data:`SANDBOX_VAR`, ``TMPDIR`` the sandbox's ``/tmp`` and, in
    ``strict``, the proxy (the sandbox's own loopback stays direct unless a loopback
    host is allowed: then everything goes through the proxy)."""
    out = {
        k: v
        for k, v in env.items()
        if k not in DROPPED_VARS and (not k.startswith("AGENTHOST_") or k in KEPT_VARS)
    }
    out[SANDBOX_VAR] = profile.name
    out["TMPDIR"] = "/tmp"
    if profile.network == "strict":
        url = f"http://127.0.0.1:{PROXY_PORT}"
        for var in PROXY_VARS:
            out[var] = url
        from agenthost.sandbox.allowlist import AllowList

        if not AllowList.parse(hosts).reaches_loopback:
            out["NO_PROXY"] = out["no_proxy"] = ",".join(LOOPBACK)
    return out


class Sandbox:
    """One agent's sandbox. :meth:`start` (the proxy, in ``strict``) before the first
    :meth:`launch`, :meth:`aclose` when the host ends."""

    def __init__(
        self,
        profile: Profile,
        *,
        kind: str,
        worktree: Path,
        home: Path,
        run_dir: Path,
        settings: Settings,
        api_hosts: Sequence[str],
    ) -> None:
        self.profile = profile
        self.kind = kind
        self.worktree = worktree
        self.home = home
        self.run_dir = run_dir
        """A private directory of the host's for the proxy's socket (bound inside)."""
        self.share_run_dir = False
        """Bind :attr:`run_dir` inside in any profile (a terminal agent's hook socket is
        there), not only in ``strict``."""
        self.settings = settings
        self.hosts = (*api_hosts, *settings.allow_hosts)
        self.machine = require(profile)
        self.bwrap: str = self.machine.bwrap or ""  # set: require() refuses a machine without
        self.proxy: Proxy | None = None
        self.pids: PidsGroup | None = None
        """The cgroup that bounds its processes (None where none can be made)."""

    def record(self) -> Governed:
        """The governance record of the confinement (the audit trail: what the agent
        was started in)."""
        from agenthost.agents.base import Governed

        if self.profile.network == "strict":
            net = "network only through the proxy, to " + (", ".join(self.hosts) or "nothing")
        elif self.profile.network == "none":
            net = "no network"
        else:
            net = "the machine's network"
        reason = (
            f"the agent runs in the sandbox {self.profile}: {net}; its worktree "
            f"{self.worktree} read-write, the system read-only, no agenthost home"
        )
        detail = {"profile": self.profile.name, "allow_hosts": list(self.hosts)}
        return Governed("sandboxed", "host", reason, detail)

    async def start(self, name: str) -> None:
        """Make the group that bounds its processes (``name``: unique on the machine)
        and start the proxy (``strict``)."""
        from agenthost.sandbox.pids import PidsGroup

        if self.pids is None:
            self.pids = PidsGroup.make(name, self.settings.max_processes)
            log.info("sandbox.pids", group=str(self.pids.path) if self.pids else None)
        if self.profile.network != "strict" or self.proxy is not None:
            return
        from agenthost.paths import ensure_private_dir
        from agenthost.sandbox.allowlist import AllowList
        from agenthost.sandbox.proxy import start_proxy

        ensure_private_dir(self.run_dir)
        socket = self.run_dir / "proxy.sock"
        with contextlib.suppress(FileNotFoundError):
            socket.unlink()
        try:
            self.proxy = await start_proxy(socket, AllowList.parse(self.hosts))
        except OSError as exc:  # a path too long for a socket, a full disk...
            raise SandboxUnavailable(
                f"cannot start the sandbox's proxy at {socket}: {exc.strerror or exc}",
                hint="a shorter home (--home) keeps socket paths under 108 bytes",
            ) from exc
        log.info("sandbox.proxy_started", hosts=list(self.hosts))

    def launch(
        self,
        argv: Sequence[str],
        cwd: str | None,
        env: Mapping[str, str],
        wrapper: Sequence[str] = (),
    ) -> Launch:
        """How to start ``argv`` inside (the agent, or a terminal of its), behind
        ``wrapper`` (a system program: the sandbox holds what ``argv`` needs)."""
        from agenthost.sandbox import seccomp

        strict = self.profile.network == "strict"
        request = Request(
            profile=self.profile,
            kind=self.kind,
            command=argv,
            worktree=self.worktree,
            home=self.home,
            env=env,
            user_home=Path(env.get("HOME") or os.path.expanduser("~")),
            read_only=self.settings.read_only,
            read_write=self.settings.read_write,
            proxy_dir=self.run_dir if strict or self.share_run_dir else None,
        )
        layout = build_layout(request)
        if cwd is not None and cwd != layout.cwd:
            layout = type(layout)(layout.mounts, cwd, layout.network, layout.hostname)
        command = [*wrapper, *argv]
        if self.profile.network == "strict":
            command = module_argv(
                "agenthost.sandbox.inner",
                "--listen",
                f"127.0.0.1:{PROXY_PORT}",
                "--socket",
                PROXY_SOCKET,
                "--",
                *command,
            )
        fd = seccomp.filter_fd()
        prefix = self.pids.wrap([]) if self.pids is not None else []
        return Launch(
            prefix
            + bwrap_argv(
                self.bwrap,
                layout,
                command,
                seccomp_fd=fd,
                disable_userns=self.machine.disable_userns,
            ),
            inside_env(env, self.profile, self.hosts),
            (fd,),
        )

    async def aclose(self) -> None:
        """Stop the proxy, remove the group (its processes are gone by now)."""
        if self.pids is not None:
            self.pids.remove()
            self.pids = None
        if self.proxy is not None:
            await self.proxy.close()
            self.proxy = None
            with contextlib.suppress(FileNotFoundError):
                (self.run_dir / "proxy.sock").unlink()


def sandbox_group(bwrap_pid: int) -> int | None:
    """The process group of the sandbox bubblewrap ``bwrap_pid`` started (its first
    process inside, a session leader), or None while it has none yet."""
    try:
        text = Path(f"/proc/{bwrap_pid}/task/{bwrap_pid}/children").read_text()
    except OSError:
        return None
    for word in text.split():
        with contextlib.suppress(OSError, ValueError):
            pid = int(word)
            if os.getpgid(pid) == pid:
                return pid
    return None


def exit_code(returncode: int) -> int:
    """The agent's exit as the host reports it: bubblewrap exits with 128+N when the
    agent died by signal N (as a shell does); that is a death by signal N."""
    if 128 < returncode <= 128 + 64:
        return -(returncode - 128)
    return returncode
