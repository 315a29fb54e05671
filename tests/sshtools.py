"""A real OpenSSH server for the remote tests (tests/remote, tests/web): Debian's
``/usr/sbin/sshd`` on 127.0.0.1, a free port, a generated host key and client key, as
the current user. tests/conftest.py makes one for the session (the ``sshd`` fixture).

The "remote" machine is this one: its ``agenthost`` is this checkout's (the venv's
script) and its home is the test's home, given through ``AGENTHOST_REMOTE_COMMAND``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from e2e.clis import unavailable

from hosttools import wait_for

SSHD = "/usr/sbin/sshd"
AGENTHOST = str(Path(sys.executable).with_name("agenthost"))


@dataclass(frozen=True)
class Sshd:
    """A running sshd: where it listens and the client's ``ssh`` command line."""

    port: int
    dir: Path
    client_key: Path
    proc: subprocess.Popen[bytes]

    @property
    def remote(self) -> str:
        """The ``--remote`` value that reaches it."""
        return f"127.0.0.1:{self.port}"

    def ssh(self, key: Path | None = None) -> str:
        """The value of $AGENTHOST_SSH: no user config, this key, a private
        known_hosts file (the host key is accepted on first use)."""
        return shlex.join(
            [
                "ssh",
                "-F",
                "/dev/null",
                "-i",
                str(key or self.client_key),
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                f"UserKnownHostsFile={self.dir / 'known_hosts'}",
                "-o",
                "StrictHostKeyChecking=accept-new",
                "-o",
                "LogLevel=ERROR",
            ]
        )

    def env(self, home: Path, command: str | None = None) -> dict[str, str]:
        """$AGENTHOST_SSH and $AGENTHOST_REMOTE_COMMAND for a remote whose home is
        ``home`` (``command`` replaces the remote command)."""
        remote = command or f"env AGENTHOST_HOME={shlex.quote(str(home))} {shlex.quote(AGENTHOST)}"
        return {"AGENTHOST_SSH": self.ssh(), "AGENTHOST_REMOTE_COMMAND": remote}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            return s.recv(4).startswith(b"SSH-")  # its banner: sshd itself answers
    except OSError:
        return False


def start_sshd() -> Iterator[Sshd]:
    """Start an sshd; stop it when the generator is closed (skip without
    openssh-server, or fail in CI)."""
    keygen = shutil.which("ssh-keygen")
    if not os.path.exists(SSHD) or keygen is None or shutil.which("ssh") is None:
        unavailable("OpenSSH (sshd, ssh, ssh-keygen) is not installed")
    directory = Path(tempfile.mkdtemp(prefix="ah-sshd-", dir="/tmp"))
    for name in ("host_key", "client_key", "wrong_key"):
        subprocess.run(
            [str(keygen), "-q", "-t", "ed25519", "-N", "", "-f", str(directory / name)],
            check=True,
        )
    shutil.copy(directory / "client_key.pub", directory / "authorized_keys")
    if os.geteuid() == 0:
        # root's sshd separates privileges into this directory (systemd makes it)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    port = _free_port()
    config = directory / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {directory / 'host_key'}",
                f"PidFile {directory / 'sshd.pid'}",
                f"AuthorizedKeysFile {directory / 'authorized_keys'}",
                "StrictModes no",
                "UsePAM no",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",
                "LogLevel INFO",
                "",
            ]
        )
    )
    log = open(directory / "sshd.log", "ab")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL, stdout=log, stderr=log
    )
    try:
        wait_for(lambda: proc.poll() is not None or _accepts(port), what=f"sshd on port {port}")
        if proc.poll() is not None:
            pytest.fail(f"sshd exited: {(directory / 'sshd.log').read_text()[-2000:]}")
        server = Sshd(port, directory, directory / "client_key", proc)
        _check_login(server)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(directory, ignore_errors=True)


def _check_login(server: Sshd) -> None:
    """One ``ssh ... true``: a server that refuses our key (e.g. a locked account, which
    sshd without PAM refuses) fails here, with sshd's own words."""
    argv = [*shlex.split(server.ssh()), "-o", "BatchMode=yes", "-p", str(server.port)]
    out = subprocess.run(
        [*argv, "127.0.0.1", "true"], capture_output=True, text=True, timeout=60, check=False
    )
    if out.returncode != 0:
        log = (server.dir / "sshd.log").read_text(errors="replace")[-2000:]
        pytest.fail(f"ssh to the test sshd failed: {out.stderr.strip()}\nsshd log:\n{log}")


def bridges(home: Path) -> list[psutil.Process]:
    """The ``agenthost bridge`` processes serving ``home`` (the remote side's)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        cmdline = proc.info.get("cmdline") or []
        if "bridge" not in cmdline or not any(c.endswith("agenthost") for c in cmdline):
            continue
        environ = proc.info.get("environ") or {}
        if environ.get("AGENTHOST_HOME") == str(home):
            found.append(proc)
    return found
