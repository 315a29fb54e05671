"""Where agenthost keeps its files, and which agent ids are valid.

Layout under the home directory (``--home``, ``$AGENTHOST_HOME``, else
``$XDG_STATE_HOME/agenthost``, else ``~/.local/state/agenthost``; an empty or
blank ``$AGENTHOST_HOME`` counts as unset, an empty or blank ``--home`` is refused)::

    <home>/hosts/<agent_id>.sock   the host's socket (0600, directory 0700)
    <home>/hosts/<agent_id>.lock   flock held by the live host: proof of liveness
    <home>/logs/<agent_id>.log     stderr of a host started with --detach
    <home>/journal/<agent_id>/     the agent's event journal (see docs/journal.md)

The default lives in the XDG *state* directory, not in ``/tmp`` or ``/run/user``:
those are cleaned by tmpfiles and at logout, which deletes live sockets.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from agenthost.errors import ConfigError, InvalidAgentId

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

AGENT_ID_MAX: Final = 64
_AGENT_ID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SUN_PATH_MAX: Final = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
HOME_ENV: Final = "AGENTHOST_HOME"


def validate_agent_id(agent_id: str) -> str:
    """Return ``agent_id`` if it is a safe file name component, else raise InvalidAgentId.

    Allowed: 1-64 characters from ``A-Z a-z 0-9 . _ -``, starting with a letter or
    digit. So no ``/``, no ``..`` component, no hidden files, nothing to escape the
    hosts directory.
    """
    if not isinstance(agent_id, str) or not _AGENT_ID_RE.fullmatch(agent_id):
        raise InvalidAgentId(
            f"invalid agent id {agent_id!r}",
            hint=(
                f"use 1-{AGENT_ID_MAX} characters from letters, digits, '.', '_' and '-', "
                "starting with a letter or digit"
            ),
        )
    return agent_id


def check_home(value: str) -> Path:
    """``value`` (a ``--home``) as a path; raise ConfigError if it is empty or blank.

    ``Path("")`` is the current directory: an empty ``--home`` (an unset shell variable
    in ``--home "$DIR"``) would silently put sockets and journals wherever the command
    runs. A relative path stays relative (:func:`resolve_home` makes it absolute
    against the current directory).
    """
    if not value.strip():
        raise ConfigError(
            f"the home directory is {'empty' if not value else 'blank'} ({value!r})",
            hint="give a directory, or leave --home out for the default home",
        )
    return check_directory(Path(value).expanduser())


def check_directory(home: Path) -> Path:
    """``home``, unless it (or the nearest part of it that exists) is not a directory:
    then ConfigError, the same for ``--home``, ``$AGENTHOST_HOME`` and the XDG default.

    A file there used to give each command its own failure: a traceback
    (``NotADirectoryError``), a hang, a hint about a deleted socket, "already running".
    A home that does not exist yet is fine (it is created when needed).
    """
    probe = home
    while True:
        try:
            mode = probe.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            if probe == probe.parent:
                return home
            probe = probe.parent
            continue
        except OSError:  # unreadable: whoever uses it says what is wrong
            return home
        if stat.S_ISDIR(mode):
            return home
        what = "a file" if stat.S_ISREG(mode) else "not a directory"
        said = f"is {what}" if probe == home else f"cannot be made: {probe} is {what}"
        raise ConfigError(
            f"the home directory {home} {said}",
            hint="give a directory as --home, or set AGENTHOST_HOME to one (or unset it)",
        )


def default_home() -> Path:
    """The home directory from the environment (not created).

    An empty or blank ``$AGENTHOST_HOME`` counts as unset, like the XDG variables (and
    never as the current directory). Never raises: error reports and shell completion
    call it too.
    """
    env = os.environ.get(HOME_ENV)
    if env and env.strip():
        return Path(env).expanduser()
    state = os.environ.get("XDG_STATE_HOME")
    # the XDG spec: a relative value is invalid and must be ignored
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "agenthost"


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """``home`` if given, else :func:`default_home`; made absolute (not created).

    An empty or blank string is refused (ConfigError), as by :func:`check_home`, and so
    is a home that is a file (:func:`check_directory`), wherever it came from.
    """
    if home is None:
        path = default_home()
        sandboxed = os.environ.get("AGENTHOST_SANDBOX")
        if sandboxed and not path.exists():
            raise ConfigError(
                f"no agenthost home here: this runs inside an agent's sandbox ({sandboxed}), "
                "where the home of its host is out of reach by design",
                hint="run agenthost outside the sandbox (docs/sandbox.md)",
            )
    elif isinstance(home, str):
        path = check_home(home)
    else:
        path = Path(home).expanduser()
    return check_directory(path.absolute())


CONFIG_NAME: Final = "config.toml"
"""The home's configuration file (:mod:`agenthost.config`)."""


def config_path(home: Path) -> Path:
    """Where the home's configuration lives."""
    return home / CONFIG_NAME


def hosts_dir(home: Path) -> Path:
    """The directory of host sockets and lock files."""
    return home / "hosts"


def hooks_dir(home: Path) -> Path:
    """The directory of terminal agents' hook sockets (private: a hook's token is the
    second lock, not the only one)."""
    return home / "hooks"


def webhooks_dir(home: Path) -> Path:
    """The signed webhooks' definitions and secrets (``agenthost hook add``), apart
    from ``hooks/``, the terminal agents' hook sockets."""
    return home / "webhooks"


def hook_socket_path(home: Path, agent_id: str) -> Path:
    """The hook socket of a terminal agent (:mod:`agenthost.host.tuihooks`)."""
    return hooks_dir(home) / f"{agent_id}.sock"


def journals_dir(home: Path) -> Path:
    """The directory holding one journal directory per agent."""
    return home / "journal"


def journal_dir(home: Path, agent_id: str) -> Path:
    """``<home>/journal/<agent_id>/`` (the id is validated)."""
    return journals_dir(home) / validate_agent_id(agent_id)


def worktrees_dir(home: Path) -> Path:
    """The directory of the agents' git worktrees (``run --worktree``)."""
    return home / "worktrees"


def logs_dir(home: Path) -> Path:
    """The directory of detached hosts' log files."""
    return home / "logs"


def socket_path(home: Path, agent_id: str) -> Path:
    """``<home>/hosts/<agent_id>.sock`` (the id is validated)."""
    return hosts_dir(home) / f"{validate_agent_id(agent_id)}.sock"


def lock_path(home: Path, agent_id: str) -> Path:
    """``<home>/hosts/<agent_id>.lock`` (the id is validated)."""
    return hosts_dir(home) / f"{validate_agent_id(agent_id)}.lock"


def log_path(home: Path, agent_id: str) -> Path:
    """``<home>/logs/<agent_id>.log`` (the id is validated)."""
    return logs_dir(home) / f"{validate_agent_id(agent_id)}.log"


def agent_id_from_socket(path: Path) -> str | None:
    """The agent id a socket file name stands for, or None if it is not one of ours."""
    if path.suffix != ".sock":
        return None
    try:
        return validate_agent_id(path.stem)
    except InvalidAgentId:
        return None


def check_socket_path(path: Path) -> None:
    """Raise ConfigError if ``path`` is too long for an AF_UNIX address."""
    size = len(os.fsencode(path))
    if size > SUN_PATH_MAX:
        raise ConfigError(
            f"socket path is {size} bytes, longer than the {SUN_PATH_MAX} an AF_UNIX "
            f"address can hold: {path}",
            hint="choose a shorter --home (or AGENTHOST_HOME)",
        )


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) as a directory only its owner can enter.

    A directory we own with group or other permission bits gets them removed; one owned
    by another user is refused, because whoever owns it can replace our sockets.
    """
    try:
        _make_private_dirs(path)
        st = path.stat()
    except OSError as exc:
        raise ConfigError(f"cannot create directory {path}: {exc.strerror}") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{path} exists and is not a directory")
    if st.st_uid != os.getuid():
        raise ConfigError(
            f"{path} belongs to uid {st.st_uid}, not to this user (uid {os.getuid()})",
            hint="use a --home of your own",
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        try:
            path.chmod(0o700)
        except OSError as exc:
            raise ConfigError(f"cannot make {path} private: {exc.strerror}") from exc
    return path


def _make_private_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents, each 0700 whatever the umask.

    ``Path.mkdir(parents=True)`` gives the parents it creates the default mode (0777
    less the umask: 0777 under umask 000), which would let anybody replace the home
    under a nested ``--home``. Directories that exist already are left as they are.
    """
    missing: list[Path] = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile by another process: keep theirs
            continue
        # mkdir's mode is masked by the umask, which can only remove bits: 0700 or less;
        # the owner needs all three (a umask of 0o100 would leave it unusable)
        directory.chmod(0o700)
