"""The sandbox profiles, and what a spawn asks for: ``--sandbox PROFILE`` or the home's
``[sandbox]`` default (no I/O).

A profile names how the agent reaches the network; the files it sees are the same in
every profile (docs/sandbox.md):

- ``strict``: no network but an allowlist of hosts (the model API its kind needs, and
  what ``allow_hosts`` adds), through a proxy outside the sandbox;
- ``net``: the machine's network;
- ``none``: no network at all (a loopback of its own).

``off`` asks for no sandbox (it overrides a configured default); ``container:IMAGE``
is reserved for containers and refused here (docs/sandbox.md says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from agenthost.errors import ConfigError, SandboxUnavailable

Network = Literal["strict", "net", "none"]

PROFILES: Final[tuple[Network, ...]] = ("strict", "net", "none")
"""Every profile, most confined first."""
OFF: Final = "off"
"""The spelling that asks for no sandbox."""


@dataclass(frozen=True, slots=True)
class Profile:
    """A sandbox profile: its name (which is its network policy)."""

    name: Network

    @property
    def network(self) -> Network:
        """How the agent reaches the network."""
        return self.name

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Settings:
    """What the home's ``[sandbox]`` adds for this agent."""

    allow_hosts: tuple[str, ...] = ()
    read_only: tuple[Path, ...] = ()
    read_write: tuple[Path, ...] = ()
    max_processes: int = 1024
    """The bound on the sandbox's processes, where a pids cgroup can be made."""


def parse_profile(text: str) -> Profile | None:
    """The profile ``text`` names, or None for ``off``. Raise SandboxUnavailable for a
    container image (not built here), ConfigError for an unknown name (naming those
    there are)."""
    name = text.strip().lower()
    if name == OFF:
        return None
    for profile in PROFILES:
        if name == profile:
            return Profile(profile)
    if name.startswith("container:"):
        raise SandboxUnavailable(
            f"--sandbox {text!r}: containers are not supported by this agenthost",
            hint="use one of the bubblewrap profiles: " + ", ".join(PROFILES),
        )
    raise ConfigError(
        f"unknown sandbox profile {text!r}",
        hint="choose one of: " + ", ".join((*PROFILES, OFF)),
    )


def profile_choices() -> str:
    """The accepted spellings, for ``--sandbox``'s help."""
    return " | ".join((*PROFILES, OFF))
