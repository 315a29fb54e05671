"""The layout of one agent's sandbox, read off the machine's files: which system
directories exist, where the agent's program and our Python live, what its kind needs
of ``$HOME``, and which secrets must be masked because they lie under something bound.

What is there, in order (docs/sandbox.md):

1. the system, read-only: ``/usr``, ``/etc``, ``/opt`` and the ``/bin``, ``/lib*``
   links or directories; ``/etc``'s secrets (``shadow``, ssh host keys) masked;
2. a new ``/proc``, a minimal ``/dev``, empty private ``/tmp``, ``/var/tmp``, ``/run``;
3. ``$HOME`` an empty tmpfs, with what the agent's kind needs bound into it;
4. the programs, read-only: where the agent's command is installed (its prefix, and
   its script interpreter's), and the Python and package of agenthost (the sandbox's
   first process is ours);
5. the worktree, read-write; the paths the configuration adds;
6. in ``strict``, the proxy's socket directory at :data:`RUN_DIR`;
7. masks over every secret that lies under something bound: the agenthost home, and
   ``~/.ssh``, ``~/.gnupg``, cloud and registry credentials.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import agenthost
from agenthost.agents.programs import lookup
from agenthost.pyargv import interpreter as our_python
from agenthost.sandbox.bwrapargs import Layout, Mount
from agenthost.sandbox.kinds import needs
from agenthost.sandbox.profiles import Profile

SYSTEM_DIRS: Final = (
    "/usr",
    "/etc",
    "/opt",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
)
"""The system, bound read-only (a merged-/usr link stays a link)."""
ETC_SECRETS: Final = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-")
"""Readable by root only, and the agent of a root user is root to them: masked."""
ETC_SECRET_GLOBS: Final = (("/etc/ssh", "ssh_host_*_key"),)
ETC_SECRET_DIRS: Final = ("/etc/ssl/private",)
"""Directories of private keys (TLS), emptied."""
HOME_SECRETS: Final = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".password-store",
    ".local/share/keyrings",
)
"""Credentials masked wherever they end up inside (a worktree that is ``$HOME``)."""
RUN_DIR: Final = "/run/agenthost"
"""Where the host's directory of the sandbox's sockets is inside."""
PROXY_SOCKET: Final = f"{RUN_DIR}/proxy.sock"
PROXY_PORT: Final = 3128
"""The port the bridge listens on inside (the sandbox's own loopback)."""


@dataclass(frozen=True, slots=True)
class Request:
    """What one agent's sandbox is made of."""

    profile: Profile
    kind: str
    command: Sequence[str]
    worktree: Path
    home: Path
    """The agenthost home: never inside."""
    env: Mapping[str, str]
    """The agent's environment (its PATH finds the program; its variables name the
    directories of its kind)."""
    user_home: Path
    read_only: tuple[Path, ...] = ()
    read_write: tuple[Path, ...] = ()
    proxy_dir: Path | None = None
    """The host's directory of this sandbox's sockets (the proxy's in ``strict``, a
    terminal agent's hooks), bound at :data:`RUN_DIR`."""
    extra_programs: tuple[Path, ...] = field(default=())
    """Prefixes of more programs to bind read-only."""
    create: bool = True
    """Create the directories the kind keeps its sessions in when they are missing
    (not when the layout is only shown)."""


def _is_under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def system_mounts() -> list[Mount]:
    """The system directories of this machine, read-only, and the masks of /etc."""
    mounts: list[Mount] = []
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            mounts.append(Mount("symlink", name, os.readlink(path)))
        elif path.is_dir():
            mounts.append(Mount("ro", name, name))
    mounts += [Mount("mask", name) for name in ETC_SECRETS if Path(name).is_file()]
    for directory, pattern in ETC_SECRET_GLOBS:
        base = Path(directory)
        if base.is_dir():
            mounts += [Mount("mask", str(p)) for p in sorted(base.glob(pattern)) if p.is_file()]
    mounts += [Mount("tmpfs", name) for name in ETC_SECRET_DIRS if Path(name).is_dir()]
    return mounts


def _prefix(executable: Path) -> Path:
    """The installation a program belongs to: ``PREFIX`` of ``PREFIX/bin/NAME`` (and of
    ``node_modules/.bin``), else its directory."""
    parent = executable.parent
    if parent.name in ("bin", "sbin", ".bin"):
        return parent.parent
    return parent


def _interpreter(script: Path, env: Mapping[str, str], cwd: str) -> Path | None:
    """The interpreter a ``#!`` script names (through ``/usr/bin/env NAME``)."""
    try:
        with script.open("rb") as file:
            head = file.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if not names:
            return None
        found = lookup(names[0], cwd, env).path
        return Path(found) if found else None
    return Path(words[0])


def program_dirs(request: Request) -> list[Path]:
    """The installations the sandbox's processes run from: the agent's program (its
    prefix, through links and its interpreter), and our Python and package."""
    found: list[Path] = []
    cwd = str(request.worktree)
    if request.command:
        hit = lookup(request.command[0], cwd, request.env).path
        if hit is not None:
            path = Path(hit)
            found += [_prefix(path), _prefix(_real(path))]
            interpreter = _interpreter(_real(path), request.env, cwd)
            if interpreter is not None:
                found += [_prefix(interpreter), _prefix(_real(interpreter))]
    found += [Path(sys.prefix), Path(sys.base_prefix), _prefix(_real(Path(our_python())))]
    found.append(Path(agenthost.__file__).parent)
    found += request.extra_programs
    return found


def _safe_program_dir(path: Path, request: Request) -> Path | None:
    """``path``, unless binding it would show the user's home or the agenthost home
    whole (a program in ``~/bin``: its prefix is ``~``): then nothing."""
    guarded = (request.user_home, request.home, Path("/"))
    if any(_is_under(g, path) for g in guarded):
        return None
    return path


def home_mounts(request: Request) -> list[Mount]:
    """``$HOME``'s tmpfs and what the agent's kind needs in it (created if the kind
    keeps its sessions there and it does not exist yet)."""
    mounts = [Mount("tmpfs", str(request.user_home))]
    program = request.command[0] if request.command else ""
    for bind in needs(request.kind).binds:
        named = request.env.get(bind.env, "") if bind.env else ""
        path = Path(named) if named and os.path.isabs(named) else request.user_home / bind.path
        if _is_under(request.home, path) or any(_is_under(path, s) for s in _secrets(request)):
            continue  # a variable pointing at the home or a credential: never
        if request.create and bind.creates(program) and bind.directory and not path.exists():
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        if path.is_dir() if bind.directory else path.is_file():
            mounts.append(Mount("rw" if bind.writable else "ro", str(path), str(path)))
    return mounts


def _secrets(request: Request) -> list[Path]:
    return [request.home, *(request.user_home / name for name in HOME_SECRETS)]


def masks(request: Request, bound: Iterable[Path]) -> list[Mount]:
    """A mask over every secret under a bound path: a tmpfs over a directory,
    ``/dev/null`` over a file."""
    sources = list(bound)
    out = []
    for secret in _secrets(request):
        real = _real(secret)
        if not any(_is_under(real, b) or _is_under(secret, b) for b in sources):
            continue
        if not secret.exists():
            continue
        out.append(Mount("tmpfs" if secret.is_dir() else "mask", str(secret)))
    return out


def git_common_dir(worktree: Path) -> Path | None:
    """The repository directory a linked git worktree (``run --worktree``, ``git
    worktree add``) keeps its objects and refs in, when it lies outside the worktree:
    git inside the sandbox cannot commit without it. None for a plain checkout (its
    ``.git`` is inside) or anything else."""
    marker = worktree / ".git"
    try:
        if not marker.is_file():
            return None
        text = marker.read_text(errors="replace").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text.removeprefix("gitdir:").strip())
    if not gitdir.is_absolute():
        gitdir = worktree / gitdir
    try:
        common_text = (gitdir / "commondir").read_text().strip()
    except OSError:
        return None
    common = Path(os.path.realpath(gitdir / common_text))
    if not (common / "objects").is_dir() or _is_under(common, worktree.resolve()):
        return None
    return common


def build_layout(request: Request) -> Layout:
    """The layout of the sandbox ``request`` describes."""
    mounts = system_mounts()
    mounts += [
        Mount("proc", "/proc"),
        Mount("dev", "/dev"),
        Mount("tmpfs", "/tmp"),
        Mount("tmpfs", "/var/tmp"),
        Mount("tmpfs", "/run"),
    ]
    mounts += home_mounts(request)
    system = [Path(m.dest) for m in mounts if m.kind == "ro" and m.dest in SYSTEM_DIRS]
    seen: set[Path] = set()
    for directory in program_dirs(request):
        safe = _safe_program_dir(directory, request)
        if safe is None or safe in seen or not safe.is_dir():
            continue
        if any(_is_under(_real(safe), s) for s in system):
            continue
        seen.add(safe)
        mounts.append(Mount("ro", str(safe), str(safe)))
    worktree = request.worktree
    mounts.append(Mount("rw", str(worktree), str(worktree)))
    common = git_common_dir(worktree)
    if common is not None:  # a linked worktree's objects and refs live in its repository
        mounts.append(Mount("rw", str(common), str(common)))
    for path in request.read_write:
        if path.exists():
            mounts.append(Mount("rw", str(path), str(path)))
    for path in request.read_only:
        if path.exists():
            mounts.append(Mount("ro", str(path), str(path)))
    if request.proxy_dir is not None:  # the proxy's socket (strict), a hook socket
        mounts.append(Mount("rw", RUN_DIR, str(request.proxy_dir)))
    bound = [Path(m.source or m.dest) for m in mounts if m.kind in ("ro", "rw")]
    mounts += masks(request, bound)
    return Layout(tuple(mounts), str(worktree), request.profile.network)
