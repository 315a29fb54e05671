"""What this machine can confine, and why not (``agenthost sandbox check``).

A sandbox needs bubblewrap, user namespaces the user may create (a kernel setting, or
a security module, may forbid them), and libseccomp to build the seccomp filter. Each
is checked for real: the last check runs a sandbox that does nothing. A spawn with
``--sandbox`` calls :func:`require` first, so a machine that cannot confine refuses it
before anything starts, with the reason.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agenthost.errors import SandboxUnavailable
from agenthost.sandbox.profiles import Profile

DISABLE_USERNS_SINCE: Final = (0, 8)
"""The bubblewrap release that has ``--disable-userns``."""
BWRAP_DIRS: Final = "/usr/bin:/bin:/usr/local/bin"
"""Where bubblewrap is looked for: the system's directories, never the user's PATH
(a ``bwrap`` planted there would be the sandbox)."""
USERNS_SETTINGS: Final = (
    ("/proc/sys/user/max_user_namespaces", "0", "user.max_user_namespaces"),
    ("/proc/sys/kernel/unprivileged_userns_clone", "0", "kernel.unprivileged_userns_clone"),
    (
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        "1",
        "kernel.apparmor_restrict_unprivileged_userns",
    ),
)
"""Kernel settings that forbid user namespaces: (file, the forbidding value, name)."""


@dataclass(frozen=True, slots=True)
class Check:
    """One thing a sandbox needs: whether it is there, and what was found."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Report:
    """Every check, in order; the first failure is the reason."""

    checks: tuple[Check, ...]
    bwrap: str | None
    disable_userns: bool = False
    """bubblewrap can forbid user namespaces inside (``--disable-userns``, 0.8)."""

    @property
    def ok(self) -> bool:
        """Whether agents can be confined here."""
        return all(c.ok for c in self.checks)

    @property
    def reason(self) -> str | None:
        """Why not (the first failed check), or None."""
        return next((f"{c.name}: {c.detail}" for c in self.checks if not c.ok), None)


def find_bwrap() -> str | None:
    """bubblewrap's path, from the system's directories only."""
    return shutil.which("bwrap", path=BWRAP_DIRS)


def _bwrap_version(bwrap: str) -> str:
    try:
        out = subprocess.run(
            [bwrap, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"? ({exc})"
    return out.stdout.strip() or out.stderr.strip()


def _userns_setting() -> str | None:
    """The kernel setting that forbids user namespaces, or None."""
    for file, forbidding, name in USERNS_SETTINGS:
        try:
            value = Path(file).read_text().strip()
        except OSError:
            continue
        if value == forbidding:
            if name == "user.max_user_namespaces" or os.geteuid() != 0:
                return f"{name} = {value}"
    return None


def _trial(bwrap: str) -> str | None:
    """Run a sandbox that does nothing; None if it worked, else what bubblewrap said."""
    argv = [
        bwrap,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        "/bin/true",
    ]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if done.returncode != 0:
        return (
            done.stderr.strip().splitlines()[-1]
            if done.stderr.strip()
            else f"exit {done.returncode}"
        )
    return None


def check() -> Report:
    """Check this machine now (a sandbox is started: tens of milliseconds)."""
    checks: list[Check] = []
    bwrap = find_bwrap()
    if bwrap is None:
        checks.append(
            Check(
                "bubblewrap",
                False,
                "bwrap not found in /usr/bin (Debian: apt-get install bubblewrap)",
            )
        )
    version = _bwrap_version(bwrap) if bwrap is not None else ""
    if bwrap is not None:
        checks.append(Check("bubblewrap", True, f"{bwrap} ({version})"))
    setting = _userns_setting()
    if setting is not None:
        checks.append(
            Check("user namespaces", False, f"turned off by the kernel setting {setting}")
        )
    elif bwrap is not None:
        failed = _trial(bwrap)
        if failed is None:
            checks.append(Check("user namespaces", True, "a trial sandbox ran"))
        else:
            checks.append(Check("user namespaces", False, f"a trial sandbox failed: {failed}"))
    from agenthost.sandbox import seccomp

    missing = seccomp.unavailable()
    checks.append(Check("seccomp", missing is None, missing or "libseccomp builds the filter"))
    from agenthost.sandbox.pids import describe

    bound = describe()  # informative: a machine without one still confines
    checks.append(
        Check(
            "process bound",
            True,
            bound
            or "none here (no pids cgroup the host may make): a fork bomb inside "
            "a sandbox is bounded only by the machine's pid_max",
        )
    )
    return Report(tuple(checks), bwrap, _version_at_least(version, DISABLE_USERNS_SINCE))


def _version_at_least(text: str, least: tuple[int, int]) -> bool:
    """Whether ``bubblewrap X.Y.Z`` (its ``--version``) is ``least`` or later; False
    when it cannot be told."""
    match = re.search(r"(\d+)\.(\d+)", text)
    return match is not None and (int(match[1]), int(match[2])) >= least


@functools.cache
def _cached() -> Report:
    return check()


def require(profile: Profile) -> Report:
    """This machine's report if agents can be confined in ``profile`` here (its
    ``bwrap`` is set); else SandboxUnavailable, naming what is missing (checked once
    per process)."""
    report = _cached()
    if not report.ok or report.bwrap is None:
        raise SandboxUnavailable(
            f"cannot confine the agent (--sandbox {profile}): {report.reason}",
            hint="`agenthost sandbox check` says what this machine lacks; "
            "--sandbox off runs the agent unconfined",
        )
    return report
