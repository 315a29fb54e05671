"""The gateway's tokens on disk: ``<home>/web/tokens.json`` (0600, its directory 0700),
each token stored as its SHA-256 only. :class:`TokenStore` re-reads the file when it
changes, so ``agenthost web token add/revoke`` take effect in a running gateway.

The session secret (``<home>/web/secret``, 0600) signs the browser's cookies, so a
session survives a restart of the gateway.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agenthost.errors import ConfigError
from agenthost.homefiles import read_checked
from agenthost.paths import ensure_private_dir
from agenthost.secretfile import load_secret as load_private_secret
from agenthost.secretfile import write_private
from agenthost.web.access import (
    SCOPES,
    check_token_name,
    effective_scopes,
    hash_token,
    new_token,
)

STORE_VERSION: Final = 1
MAX_STORE_BYTES: Final = 4 << 20


def _stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    """What changes when the store is replaced, written, chmod-ed or chown-ed."""
    return (st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns)


def web_dir(home: Path) -> Path:
    """``<home>/web``: the gateway's own files."""
    return home / "web"


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """One token as stored: never the token itself."""

    name: str
    token_id: str
    """A non-secret id, new for every token (a session names it, so a token replaced
    under the same name ends the old sessions)."""
    hash: str
    scopes: tuple[str, ...]
    created: int

    def public(self) -> dict[str, Any]:
        """What ``token list --json`` shows (no hash)."""
        return {
            "name": self.name,
            "scopes": list(self.scopes),
            "effective_scopes": [s for s in SCOPES if s in effective_scopes(self.scopes)],
            "created": self.created,
        }


class TokenStore:
    """The token file of a home, re-read when it changes (by another process too).

    Raise ConfigError for a file that is not ours to trust when it is read: not a JSON
    store, or (UntrustedFile) owned by another user, readable or writable by others, a
    symbolic link (:mod:`agenthost.homefiles`).
    """

    def __init__(self, home: Path) -> None:
        self.dir = web_dir(home)
        self.path = self.dir / "tokens.json"
        self._stamp: tuple[int, int, int, int] | None = None
        """The file last read (:func:`_stamp`), None before."""
        self._records: dict[str, TokenRecord] = {}

    def exists(self) -> bool:
        """Whether the store was created already."""
        return self.path.exists()

    def records(self) -> dict[str, TokenRecord]:
        """The tokens by name, as the file says now."""
        self._reload()
        return dict(self._records)

    def verify(self, token: str) -> TokenRecord | None:
        """The record of ``token``, or None if no stored token matches it. Every stored
        hash is compared in constant time."""
        want = hash_token(token)
        found = None
        for record in self.records().values():
            if hmac.compare_digest(record.hash, want):
                found = record
        return found

    def session_record(self, name: str, token_id: str) -> TokenRecord | None:
        """The token a session names, if it is still the same token."""
        record = self.records().get(name)
        if record is None or not hmac.compare_digest(record.token_id, token_id):
            return None
        return record

    def add(self, name: str, scopes: Iterable[str]) -> str:
        """Create a token ``name`` with ``scopes``; return the token (shown once).
        Raise ConfigError for a bad name or scope, or a name in use."""
        try:
            check_token_name(name)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        wanted = tuple(dict.fromkeys(scopes)) or ("read",)
        bad = [s for s in wanted if s not in SCOPES]
        if bad:
            raise ConfigError(f"unknown scope {bad[0]!r}: one of {', '.join(SCOPES)}")
        records = self.records()
        if name in records:
            raise ConfigError(
                f"a token named {name!r} exists", hint="revoke it first, or choose another name"
            )
        token = new_token()
        records[name] = TokenRecord(
            name, secrets.token_hex(8), hash_token(token), wanted, int(time.time())
        )
        self._write(records)
        return token

    def revoke(self, name: str) -> bool:
        """Remove token ``name``; False if there was none."""
        records = self.records()
        if records.pop(name, None) is None:
            return False
        self._write(records)
        return True

    # --- the file ------------------------------------------------------------------

    def _reload(self) -> None:
        try:
            st = os.lstat(self.path)  # a symbolic link in its place is a change (refused)
        except FileNotFoundError:
            self._stamp, self._records = None, {}
            return
        except OSError as exc:
            raise ConfigError(f"cannot read {self.path}: {exc.strerror}") from exc
        if _stamp(st) == self._stamp:
            return
        # another user's file, or one others can read or write, is refused (UntrustedFile)
        # every time until fixed: the stamp is kept only for a store that was used
        try:
            raw, st = read_checked(self.path, MAX_STORE_BYTES, secret=True)
        except FileNotFoundError:
            self._stamp, self._records = None, {}
            return
        except OSError as exc:
            raise ConfigError(f"cannot read the token store {self.path}: {exc}") from exc
        if len(raw) > MAX_STORE_BYTES:
            raise ConfigError(f"the token store {self.path} is larger than {MAX_STORE_BYTES} bytes")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ConfigError(f"cannot read the token store {self.path}: {exc}") from exc
        self._records = _parse(data, self.path)
        self._stamp = _stamp(st)

    def _write(self, records: dict[str, TokenRecord]) -> None:
        ensure_private_dir(self.dir)
        data = {
            "version": STORE_VERSION,
            "tokens": [
                {
                    "name": r.name,
                    "id": r.token_id,
                    "sha256": r.hash,
                    "scopes": list(r.scopes),
                    "created": r.created,
                }
                for r in sorted(records.values(), key=lambda r: r.name)
            ],
        }
        write_private(self.path, (json.dumps(data, indent=1) + "\n").encode())
        self._stamp = None  # read back on the next use (and seen by other processes)


def _parse(data: Any, path: Path) -> dict[str, TokenRecord]:
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
        raise ConfigError(f"{path} is not a token store")
    out: dict[str, TokenRecord] = {}
    for item in data["tokens"]:
        try:
            record = TokenRecord(
                check_token_name(item["name"]),
                str(item["id"]),
                str(item["sha256"]),
                tuple(str(s) for s in item["scopes"]),
                int(item.get("created", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: a token entry is malformed ({exc})") from None
        out[record.name] = record
    return out


def load_secret(home: Path) -> bytes:
    """The session secret of ``home`` (created on first use: 32 random bytes, 0600)."""
    return load_private_secret(web_dir(home) / "secret")
