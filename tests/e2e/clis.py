"""Find or install the real agent CLIs (from the npm registry) for end-to-end tests.

The CLIs are installed once into a cache outside the checkout, so CI runs on fresh
clones reuse them: ``$AGENTHOST_E2E_CACHE``, else ``$XDG_CACHE_HOME/agenthost-e2e``,
else ``~/.cache/agenthost-e2e``. Versions are pinned so a run is reproducible; bump
them here deliberately.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CliPackage:
    package: str
    version: str
    binary: str
    """The executable under node_modules/.bin; for a library (no executable), the path
    under node_modules whose presence proves the install (its package.json)."""
    library: bool = False

    def installed(self, prefix: Path) -> Path:
        """The file that exists once the package is installed under ``prefix``."""
        if self.library:
            return prefix / "node_modules" / self.binary
        return prefix / "node_modules" / ".bin" / self.binary


PACKAGES = {
    "claude": CliPackage("@anthropic-ai/claude-code", "2.1.330", "claude"),
    "codex": CliPackage("@openai/codex", "0.169.0", "codex"),
    # ACP agents (issue 16): Claude Code and Codex through their ACP adapters, and
    # Gemini CLI, which speaks ACP itself (`gemini --acp`).
    "claude-acp": CliPackage(
        "@agentclientprotocol/claude-agent-acp", "0.101.0", "claude-agent-acp"
    ),
    "codex-acp": CliPackage("@agentclientprotocol/codex-acp", "2.6.0", "codex-acp"),
    "gemini": CliPackage("@google/gemini-cli", "0.61.0", "gemini"),
    # Not a CLI: the headless xterm.js, the independent oracle that terminal screens are
    # judged against (issue 30, tests/termoracle.py); a library, so the install is
    # proven by its package.json and ensure_cli returns that path.
    "xterm-headless": CliPackage(
        "@xterm/headless", "6.0.0", "@xterm/headless/package.json", library=True
    ),
    # Its Unicode 11 widths (an emoji is two cells, as glibc's wcwidth and the programs
    # in the terminal count it; xterm.js's default Unicode 6 table says one).
    "xterm-unicode11": CliPackage(
        "@xterm/addon-unicode11", "0.9.0", "@xterm/addon-unicode11/package.json", library=True
    ),
}


def cache_dir() -> Path:
    env = os.environ.get("AGENTHOST_E2E_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agenthost-e2e"


class CliUnavailable(Exception):
    """The CLI cannot be installed here (no npm, or the registry refused)."""


def ensure_cli(name: str) -> Path:
    """The path of the CLI's executable, installing it first if needed.

    Raise CliUnavailable with the reason when npm is missing or the install fails.
    """
    spec = PACKAGES[name]
    prefix = cache_dir() / f"{name}-{spec.version}"
    binary = spec.installed(prefix)
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise CliUnavailable("npm is not installed")
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer at a time
        if binary.exists():
            return binary
        result = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(prefix),
                "--no-audit",
                "--no-fund",
                f"{spec.package}@{spec.version}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode != 0 or not binary.exists():
            raise CliUnavailable(
                f"npm install {spec.package}@{spec.version} failed: "
                + (result.stderr.strip()[-2000:] or result.stdout.strip()[-2000:])
            )
    return binary


def require_cli(name: str) -> Path:
    """For a test: the CLI's executable (:func:`ensure_cli`), or skip the test when it
    cannot be installed; fail it instead when ``AGENTHOST_E2E_REQUIRED=1`` (CI), where
    a real-component test must never be skipped."""
    try:
        return ensure_cli(name)
    except CliUnavailable as exc:
        unavailable(f"the {name} CLI is unavailable: {exc}")
        raise  # not reached: unavailable() always raises


def unavailable(what: str) -> None:
    """Skip the test without ``what``; fail it in CI (``AGENTHOST_E2E_REQUIRED=1``)."""
    import pytest  # only tests call this; `make e2e-clis` runs this file without pytest

    if os.environ.get("AGENTHOST_E2E_REQUIRED") == "1":
        pytest.fail(f"AGENTHOST_E2E_REQUIRED=1 but {what}")
    pytest.skip(what)


if __name__ == "__main__":  # `python tests/e2e/clis.py`: install (or find) them all
    import sys

    failed = False
    for name in PACKAGES:
        try:
            print(f"{name}: {ensure_cli(name)}")
        except CliUnavailable as exc:
            print(f"{name}: unavailable: {exc}", file=sys.stderr)
            failed = True
    sys.exit(1 if failed else 0)
