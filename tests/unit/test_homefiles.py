"""The one rule for the files of the home that decide something: the sans-IO decision
on a stat result, table-driven, and the opener that applies it to what it opened."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agenthost.errors import ConfigError, UntrustedFile
from agenthost.homefiles import check_beside, open_checked, problem, read_checked

ME = 1000
OTHER = 65534


def st(mode: int, uid: int = ME) -> os.stat_result:
    """A stat result with ``mode`` (type and permission bits) and owner ``uid``."""
    return os.stat_result((mode, 1, 1, 1, uid, uid, 10, 0, 0, 0))


REG = stat.S_IFREG
DIR = stat.S_IFDIR


def says_it(found: str | None, says: str | None) -> bool:
    """``found`` is None when ``says`` is, else starts with it."""
    return found is None if says is None else found is not None and found.startswith(says)


@pytest.mark.parametrize(
    ("mode", "uid", "says"),
    [
        (REG | 0o600, ME, None),
        (REG | 0o644, ME, None),
        (REG | 0o400, ME, None),
        (REG | 0o755, ME, None),
        (REG | 0o4700, ME, None),  # setuid: not about who may write it
        (REG | 0o600, OTHER, f"is owned by uid {OTHER}, not you (uid {ME}): remove it or chown it"),
        (REG | 0o600, 0, f"is owned by uid 0, not you (uid {ME})"),  # root's too: not ours
        (REG | 0o666, ME, "is writable by others (mode 0666): chmod go-w it"),
        (REG | 0o620, ME, "is writable by others (mode 0620): chmod go-w it"),
        (REG | 0o602, ME, "is writable by others (mode 0602)"),
        (REG | 0o1666, ME, "is writable by others (mode 1666)"),
        (REG | 0o666, OTHER, f"is owned by uid {OTHER}"),  # the owner first: chmod won't do
        (stat.S_IFLNK | 0o777, ME, "is a symbolic link, not the file itself"),
        (DIR | 0o700, ME, "is a directory, not a regular file: remove it"),
        (stat.S_IFIFO | 0o600, ME, "is a FIFO, not a regular file"),
        (stat.S_IFSOCK | 0o600, ME, "is a socket, not a regular file"),
        (stat.S_IFCHR | 0o666, ME, "is a device, not a regular file"),
        (stat.S_IFBLK | 0o600, ME, "is a device, not a regular file"),
        (0o600, ME, "is not a regular file"),  # no type bits at all
    ],
)
def test_a_file_of_the_home(mode: int, uid: int, says: str | None) -> None:
    found = problem(st(mode, uid), ME)
    assert says_it(found, says), found


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        (0o600, None),
        (0o400, None),
        (0o640, "is readable by others (mode 0640): chmod 600 it"),
        (0o604, "is readable by others (mode 0604): chmod 600 it"),
        (0o644, "is readable by others (mode 0644)"),
        (0o660, "is writable by others (mode 0660)"),  # writing is the worse: said first
    ],
)
def test_a_secret_is_readable_by_nobody_else(mode: int, says: str | None) -> None:
    found = problem(st(REG | mode), ME, secret=True)
    assert says_it(found, says), found


@pytest.mark.parametrize(
    ("mode", "uid", "says"),
    [
        (DIR | 0o700, ME, None),
        (DIR | 0o755, ME, None),
        (DIR | 0o775, ME, "is writable by others (mode 0775): chmod go-w it"),
        (DIR | 0o1777, ME, "is writable by others (mode 1777)"),  # sticky: others still add
        (DIR | 0o700, OTHER, f"is owned by uid {OTHER}, not you"),
        (REG | 0o700, ME, "is not a directory"),
    ],
)
def test_the_directory_holding_them(mode: int, uid: int, says: str | None) -> None:
    found = problem(st(mode, uid), ME, directory=True)
    assert says_it(found, says), found


# --- the opener, on real files ---------------------------------------------------------


def own(path: Path, data: bytes = b"x = 1\n", mode: int = 0o600) -> Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


def test_our_own_file_is_read_and_its_stat_is_the_opened_one(tmp_path: Path) -> None:
    path = own(tmp_path / "f", b"hello")
    data, seen = read_checked(path, 100)
    assert data == b"hello" and seen.st_ino == path.stat().st_ino
    assert read_checked(path, 3)[0] == b"hell"  # limit + 1: the caller tells "too large"


def test_untrusted_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    path = own(tmp_path / "f", mode=0o666)
    path.chmod(0o666)  # whatever the umask
    with pytest.raises(ConfigError) as caught:
        read_checked(path, 100)
    assert isinstance(caught.value, UntrustedFile)
    assert caught.value.message == f"{path} is writable by others (mode 0666): chmod go-w it"


def test_a_symlink_is_refused_even_to_our_own_file(tmp_path: Path) -> None:
    target = own(tmp_path / "elsewhere")
    link = tmp_path / "config.toml"
    link.symlink_to(target)
    with pytest.raises(UntrustedFile, match="config.toml is a symbolic link, not the file"):
        read_checked(link, 100)


def test_a_dangling_symlink_is_not_followed_to_create_a_file(tmp_path: Path) -> None:
    link = tmp_path / "daemon.lock"
    link.symlink_to(tmp_path / "made-through-the-link")
    with pytest.raises(UntrustedFile, match="symbolic link"):
        os.close(open_checked(link, os.O_RDWR | os.O_CREAT))
    assert not (tmp_path / "made-through-the-link").exists()


def test_a_fifo_in_its_place_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo, 0o600)
    # a FIFO with no writer: a plain open() for reading would wait for ever
    with pytest.raises(UntrustedFile, match="is a FIFO, not a regular file"):
        read_checked(fifo, 100)


def test_a_directory_in_its_place_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tokens.json").mkdir()
    with pytest.raises(UntrustedFile, match="is a directory, not a regular file"):
        read_checked(tmp_path / "tokens.json", 100)


def test_a_device_through_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret").symlink_to("/dev/zero")
    with pytest.raises(UntrustedFile, match="symbolic link"):
        read_checked(tmp_path / "secret", 100, secret=True)


def test_created_files_are_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        os.close(open_checked(tmp_path / "new.lock", os.O_RDWR | os.O_CREAT))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.lock").stat().st_mode) == 0o600


def test_a_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    path = own(shared / "config.toml")
    with pytest.raises(UntrustedFile, match=f"^{shared} is writable by others \\(mode 0777\\)"):
        read_checked(path, 100)


def test_a_missing_file_or_directory_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_checked(tmp_path / "none", 100)
    with pytest.raises(FileNotFoundError):
        read_checked(tmp_path / "no-dir" / "none", 100)


def test_a_secret_others_can_read_is_refused(tmp_path: Path) -> None:
    path = own(tmp_path / "link.key", b"k" * 64, 0o644)
    assert read_checked(path, 100)[0] == b"k" * 64  # as a plain file: fine
    with pytest.raises(UntrustedFile, match="is readable by others \\(mode 0644\\): chmod 600"):
        read_checked(path, 100, secret=True)


def test_files_beside_a_database(tmp_path: Path) -> None:
    db = own(tmp_path / "x.db")
    check_beside(db, ("-wal", "-shm"))  # none there: fine
    own(tmp_path / "x.db-wal")
    check_beside(db, ("-wal", "-shm"))
    (tmp_path / "x.db-shm").symlink_to(tmp_path / "x.db-wal")
    with pytest.raises(UntrustedFile, match="x.db-shm is a symbolic link"):
        check_beside(db, ("-wal", "-shm"))
