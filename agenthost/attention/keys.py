"""The home's key for approval links: ``<home>/attention/link.key`` (0600), created by
whoever needs it first (the daemon signing, the web gateway checking)."""

from __future__ import annotations

from pathlib import Path

from agenthost.secretfile import load_secret


def link_key_path(home: Path) -> Path:
    """Where the link key lives; deleting it voids every link issued so far."""
    return home / "attention" / "link.key"


def link_key(home: Path) -> bytes:
    """The key that signs approval links (created on first use)."""
    return load_secret(link_key_path(home))
