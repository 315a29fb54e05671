"""Private files of the home: written atomically with mode 0600, and secrets created
once, whoever asks first.

Two processes may need the same secret at once (the daemon signs approval links, the
web gateway checks them): the first creation wins through ``link()``, which fails when
the name exists, and everybody then reads the winner's bytes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Final

from agenthost.errors import ConfigError
from agenthost.homefiles import read_checked
from agenthost.paths import ensure_private_dir

MIN_SECRET: Final = 32
MAX_SECRET: Final = 4096


def _temporary(path: Path, data: bytes) -> Path:
    """``data`` in a new 0600 file beside ``path``, flushed to disk."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return tmp


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file renamed), mode 0600."""
    tmp = path
    try:
        tmp = _temporary(path, data)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp != path:
            tmp.unlink(missing_ok=True)
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from exc


def load_secret(path: Path) -> bytes:
    """The secret in ``path``, created on first use (64 random hex digits, 0600, its
    directory 0700). A file too short (or too long) to be a secret is replaced.

    Raise UntrustedFile (a ConfigError) for a file that another user owns or can read
    or write, or a symbolic link (:mod:`agenthost.homefiles`): whoever knows the secret
    can forge what it signs."""
    for _ in range(3):
        damaged = False
        try:
            raw, _ = read_checked(path, MAX_SECRET, secret=True)
            value = raw.strip()
            if MIN_SECRET <= len(value) <= MAX_SECRET:
                return value
            damaged = True
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
        ensure_private_dir(path.parent)
        value = secrets.token_hex(32).encode()
        tmp = path
        try:
            tmp = _temporary(path, value + b"\n")
            if damaged:  # too short to be a secret: replaced
                os.replace(tmp, path)
                return value
            try:
                os.link(tmp, path)  # the first creator wins; the others read its bytes
            except FileExistsError:
                continue
            return value
        except OSError as exc:
            raise ConfigError(f"cannot write {path}: {exc.strerror}") from exc
        finally:
            if tmp != path:
                with contextlib.suppress(OSError):
                    tmp.unlink()
    raise ConfigError(f"cannot read {path}: it keeps changing")
