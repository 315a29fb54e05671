"""The home's configuration file, ``<home>/config.toml``: models, parsing, loading.

One file holds what a person decides once for all agents of a home: who is notified
and how (``[notify]``), what the approval policy allows without asking
(``[policy]``), where the web gateway is reached from outside (``[web]``), how
agents are confined (``[sandbox]``) and which key detaches ``agenthost attach``
(``[attach]``).
It is read with :mod:`tomllib` and validated by the models below, which forbid
unknown keys: a misspelt key is an error that names it, never a silent default.

No sockets, no event loop: :func:`parse_config` takes text; :func:`load_config` and
:class:`ConfigFile` read the file (a missing file is the defaults), and only when it is
the user's own and writable by nobody else (:mod:`agenthost.homefiles`).

Durations are written ``90``, ``"90s"``, ``"15m"``, ``"12h"`` or ``"7d"``.
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from agenthost.errors import ConfigError, UntrustedFile
from agenthost.homefiles import read_checked
from agenthost.paths import CONFIG_NAME as CONFIG_NAME  # (their home: agenthost.paths)
from agenthost.paths import config_path as config_path

MAX_CONFIG_BYTES: Final = 1 << 20

_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd]?)$", re.ASCII)
_UNITS: Final = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | float) -> float:
    """``90``, ``"90s"``, ``"15m"``, ``"12h"``, ``"7d"`` -> seconds (ValueError if not)."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a duration like 90s, 15m, 12h or 7d")
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        match = _DURATION_RE.match(text.strip())
        if match is None:
            raise ValueError(f"{text!r} is not a duration like 90s, 15m, 12h or 7d")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds < 0 or seconds != seconds or seconds == float("inf"):
        raise ValueError(f"{text!r} is not a duration like 90s, 15m, 12h or 7d")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]
"""Seconds, written as a number or ``"90s"``, ``"15m"``, ``"12h"``, ``"7d"``."""


def _not_zero(seconds: float) -> float:
    if seconds <= 0:
        raise ValueError("must be more than 0 seconds")
    return seconds


TimeLimit = Annotated[Duration, AfterValidator(_not_zero)]
"""A :data:`Duration` that bounds something (a link's life, a delivery): zero would
make every link born expired and every delivery fail, so it is refused."""

NoticeKind = Literal["waiting", "failed", "died", "finished"]
"""What a notice is about: the agent needs a person (``waiting``: a permission request
or a question), a turn failed (``failed``), the agent or its host ended without being
asked to (``died``), or a turn finished (``finished``, off unless chosen)."""

NOTICE_KINDS: Final[tuple[NoticeKind, ...]] = ("waiting", "failed", "died", "finished")
DEFAULT_EVENTS: Final[tuple[NoticeKind, ...]] = ("waiting", "failed", "died")

Behavior = Literal["allow", "deny", "ask"]


class ConfigModel(BaseModel):
    """Our own configuration: frozen, unknown keys refused."""

    # built on first use: the daemon imports this module (its notifier) at start, and
    # the first build of a model also has pydantic look up its plugins (the entry
    # points of every installed distribution); a daemon with hosts to reattach needs
    # neither before it is ready
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


def _http_url(value: str) -> str:
    if not re.match(r"^https?://[^/\s]+", value):
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    return value


HttpUrl = Annotated[str, AfterValidator(_http_url)]
"""An ``http://`` or ``https://`` URL."""


# --- notifications ------------------------------------------------------------------


class WebhookChannel(ConfigModel):
    """A JSON POST of the notice to ``url``, signed with HMAC-SHA256 when a secret is
    set (header ``X-Agenthost-Signature: sha256=<hex>`` over
    ``<X-Agenthost-Timestamp>.<body>``)."""

    type: Literal["webhook"]
    url: HttpUrl
    secret: str | None = None
    secret_file: Path | None = None
    """A file whose first line is the secret (keeps it out of the config)."""
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: TimeLimit = 10.0

    @model_validator(mode="after")
    def _one_secret(self) -> WebhookChannel:
        if self.secret is not None and self.secret_file is not None:
            raise ValueError("give secret or secret_file, not both")
        return self


class NtfyChannel(ConfigModel):
    """An ntfy-compatible push: a POST to ``url`` (the server and the topic, e.g.
    ``https://ntfy.sh/my-agents``) with the title, priority, tags and, for a
    permission request, Approve and Deny actions."""

    type: Literal["ntfy"]
    url: HttpUrl
    token: str | None = None
    token_file: Path | None = None
    priority: int | None = Field(default=None, ge=1, le=5)
    timeout: TimeLimit = 10.0

    @model_validator(mode="after")
    def _one_token(self) -> NtfyChannel:
        if self.token is not None and self.token_file is not None:
            raise ValueError("give token or token_file, not both")
        return self


class DesktopChannel(ConfigModel):
    """A desktop notification (org.freedesktop.Notifications on the session bus)."""

    type: Literal["desktop"]
    timeout: TimeLimit = 10.0


class CommandChannel(ConfigModel):
    """A command run with the notice as JSON on its stdin and ``AGENTHOST_NOTICE_*``
    variables in its environment; a non-zero exit is a failed delivery."""

    type: Literal["command"]
    argv: list[str] = Field(min_length=1)
    timeout: TimeLimit = 30.0


Channel = Annotated[
    WebhookChannel | NtfyChannel | DesktopChannel | CommandChannel,
    Field(discriminator="type"),
]


class NotifyOverride(ConfigModel):
    """Different notices for some agents: those whose id matches ``agent`` and whose
    project matches ``project`` (globs; a missing one matches all). The first
    override that matches wins; what it leaves unset comes from ``[notify]``."""

    agent: str | None = None
    project: str | None = None
    events: list[NoticeKind] | None = None
    channels: list[str] | None = None
    delay: Duration | None = None
    mute: bool = False

    @model_validator(mode="after")
    def _selects(self) -> NotifyOverride:
        if self.agent is None and self.project is None:
            raise ValueError("an override needs agent or project (a glob)")
        return self

    def matches(self, agent_id: str, project: str) -> bool:
        """Whether this override is for ``agent_id`` of ``project``."""
        return (self.agent is None or fnmatchcase(agent_id, self.agent)) and (
            self.project is None or fnmatchcase(project, self.project)
        )


class NotifyConfig(ConfigModel):
    """``[notify]``: what is notified, after how long, and through which channels."""

    events: list[NoticeKind] = Field(default_factory=lambda: list(DEFAULT_EVENTS))
    delay: Duration = 10.0
    """How long a situation must last before a notice goes out: a request answered
    within it (someone is at the terminal) notifies nobody. 0 is allowed: notify at
    once."""
    retries: int = Field(default=5, ge=0, le=20)
    """Further attempts of a failed delivery, with a growing pause (1 s, 2 s, 4 s...)."""
    channels: dict[str, Channel] = Field(default_factory=dict)
    override: list[NotifyOverride] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known_channels(self) -> NotifyConfig:
        for i, rule in enumerate(self.override):
            for name in rule.channels or ():
                if name not in self.channels:
                    known = ", ".join(sorted(self.channels)) or "none configured"
                    raise ValueError(f"override {i + 1} names channel {name!r}; channels: {known}")
        return self

    def for_agent(self, agent_id: str, project: str) -> AgentNotify:
        """What applies to ``agent_id`` of ``project``: events, delay, channel names."""
        for rule in self.override:
            if rule.matches(agent_id, project):
                if rule.mute:
                    return AgentNotify((), self.delay, ())
                return AgentNotify(
                    tuple(rule.events if rule.events is not None else self.events),
                    rule.delay if rule.delay is not None else self.delay,
                    tuple(rule.channels if rule.channels is not None else self.channels),
                )
        return AgentNotify(tuple(self.events), self.delay, tuple(self.channels))


@dataclass(frozen=True, slots=True)
class AgentNotify:
    """The notices one agent gets: for which ``events``, after ``delay`` seconds, to
    which ``channels`` (names of ``[notify.channels]``)."""

    events: tuple[NoticeKind, ...]
    delay: float
    channels: tuple[str, ...]


# --- the approval policy --------------------------------------------------------------


class PolicyRule(ConfigModel):
    """One rule: when everything it names matches a permission request, its
    ``decision`` applies. ``tool``, ``command``, ``path``, ``agent`` and ``project``
    are globs (``*`` crosses ``/``); ``command_regex`` is a regular expression that
    must match the whole command. A rule that names nothing matches every request."""

    tool: str | None = None
    command: str | None = None
    command_regex: str | None = None
    path: str | None = None
    agent: str | None = None
    project: str | None = None
    decision: Behavior
    reason: str | None = Field(default=None, max_length=500)

    @field_validator("command_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_command(self) -> PolicyRule:
        if self.command is not None and self.command_regex is not None:
            raise ValueError("give command (a glob) or command_regex, not both")
        return self


class PolicyConfig(ConfigModel):
    """``[policy]``: rules tried in order, the first that matches decides; none
    matching means ``ask`` (a person decides)."""

    rule: list[PolicyRule] = Field(default_factory=list)
    ask_timeout: Duration | None = None
    """Deny a request nobody answered within this time (unset: wait for ever)."""
    session_grants: bool = True
    """Whether a person may answer "allow for this session" (terminal, web)."""


# --- the web gateway ------------------------------------------------------------------


class WebConfig(ConfigModel):
    """``[web]``: how the gateway is reached from where the notices are read."""

    public_url: str | None = None
    """The gateway's address as a phone reaches it (``https://box.example:8765``):
    the base of the Approve and Deny links. Without it, notices carry no links."""
    link_ttl: TimeLimit = 3600.0
    """How long an approval link stays valid (more than 0)."""

    @field_validator("public_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else _http_url(value).rstrip("/")


# --- sandboxes -------------------------------------------------------------------------

SANDBOX_NAMES: Final = ("strict", "net", "none", "off")
"""What ``[sandbox]`` takes as a profile (:mod:`agenthost.sandbox.profiles`)."""


def _profile_name(value: str) -> str:
    if value not in SANDBOX_NAMES:
        raise ValueError(f"{value!r} is not a sandbox profile ({', '.join(SANDBOX_NAMES)})")
    return value


def _absolute(value: Path) -> Path:
    expanded = value.expanduser()
    if not expanded.is_absolute():
        raise ValueError(f"{str(value)!r} is not an absolute path (or ~/...)")
    return expanded


ProfileName = Annotated[str, AfterValidator(_profile_name)]
AbsolutePath = Annotated[Path, AfterValidator(_absolute)]


def _allow_entry(value: str) -> str:
    from agenthost.errors import InvalidAllowEntry
    from agenthost.sandbox.allowlist import AllowList

    try:
        AllowList.parse([value])
    except InvalidAllowEntry as exc:
        raise ValueError(exc.message) from None
    return value


HostEntry = Annotated[str, Field(min_length=1, max_length=300), AfterValidator(_allow_entry)]


class SandboxOverride(ConfigModel):
    """An ``[[sandbox.override]]``: another profile, or more allowed hosts, for the
    agents whose id and project match (glob patterns; the first that matches wins)."""

    agent: str | None = None
    project: str | None = None
    profile: ProfileName | None = None
    allow_hosts: list[HostEntry] = Field(default_factory=list)

    def matches(self, agent_id: str, project: str) -> bool:
        """Whether this override is for that agent."""
        return (self.agent is None or fnmatchcase(agent_id, self.agent)) and (
            self.project is None or fnmatchcase(project, self.project)
        )


class SandboxConfig(ConfigModel):
    """``[sandbox]``: the profile agents get when their spawn names none, the hosts
    ``strict`` lets them reach besides their model API, and more paths to bind
    (docs/sandbox.md)."""

    default: ProfileName = "off"
    allow_hosts: list[HostEntry] = Field(default_factory=list)
    """``host``, ``host:port``, ``*.domain``: reachable through the proxy in ``strict``."""
    read_only: list[AbsolutePath] = Field(default_factory=list)
    read_write: list[AbsolutePath] = Field(default_factory=list)
    max_processes: int = Field(default=1024, ge=16, le=1 << 22)
    """How many processes one sandbox may have (where a pids cgroup can be made)."""
    override: list[SandboxOverride] = Field(default_factory=list)

    def for_agent(self, agent_id: str, project: str) -> tuple[str, tuple[str, ...]]:
        """The profile name and the allowed hosts of that agent."""
        for item in self.override:
            if item.matches(agent_id, project):
                profile = item.profile or self.default
                return profile, (*self.allow_hosts, *item.allow_hosts)
        return self.default, tuple(self.allow_hosts)


def _detach_key(value: str) -> str:
    from agenthost.terminal.keys import parse_detach_key

    return parse_detach_key(value).name


class AttachConfig(ConfigModel):
    """``[attach]``: what ``agenthost attach`` does at this user's terminal."""

    detach_key: Annotated[str, AfterValidator(_detach_key)] = "ctrl-]"
    """The key that detaches (``ctrl-]``, ``ctrl-q``, ``^Q``...), stored as ``ctrl-x``."""


class HomeConfig(ConfigModel):
    """The whole ``config.toml``; every section may be left out."""

    notify: NotifyConfig = Field(default_factory=NotifyConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    attach: AttachConfig = Field(default_factory=AttachConfig)


@functools.cache
def default_config() -> HomeConfig:
    """The configuration of a home without ``config.toml`` (:data:`DEFAULT_CONFIG`)."""
    return HomeConfig()


def parse_config(text: str, source: str = CONFIG_NAME) -> HomeConfig:
    """The configuration in ``text``; ConfigError naming ``source``, the line or the
    key and what is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    try:
        return HomeConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    """Pydantic's errors as ``notify.channels.phone.url: ...; policy.rule[2]: ...``."""
    parts = []
    for error in exc.errors(include_url=False)[:5]:
        where = ""
        for item in error["loc"]:
            if isinstance(item, int):
                where += f"[{item + 1}]"
            elif item not in ("webhook", "ntfy", "desktop", "command"):  # union tags
                where += f".{item}" if where else str(item)
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key" + _did_you_mean(error["loc"])
        parts.append(f"{where or 'top level'}: {message}")
    more = len(exc.errors()) - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """`` (did you mean 'delay'?)`` for an unknown key close to a known one at its
    place (``notify.delai``), else ""."""
    import difflib

    known = _keys_at(loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6) if loc else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def _keys_at(path: tuple[int | str, ...]) -> list[str]:
    """The keys of the table at ``path`` of :class:`HomeConfig` (pydantic's location
    of an error: keys, list indexes, a channel's ``type`` tag); [] if not a table."""
    shape: Any = HomeConfig
    for step in path:
        shape = _inner(shape, step)
    shape = _unwrap(shape)
    return list(shape.model_fields) if _is_model(shape) else []


def _inner(shape: Any, step: int | str) -> Any:
    """What is at ``step`` inside ``shape`` (None if nothing can be)."""
    shape = _unwrap(shape)
    if _is_model(shape):
        field = shape.model_fields.get(step) if isinstance(step, str) else None
        return None if field is None else field.annotation
    origin, args = get_origin(shape), get_args(shape)
    if origin is list and isinstance(step, int):
        return args[0]
    if origin is dict and isinstance(step, str):
        return args[1]
    for member in args if origin in (Union, UnionType) else ():
        tag = member.model_fields.get("type") if _is_model(member) else None
        if tag is not None and step in get_args(tag.annotation):  # a channel's type
            return member
    return None


def _unwrap(shape: Any) -> Any:
    """``shape`` without ``Annotated`` metadata, and ``X | None`` as ``X``."""
    while get_origin(shape) is Annotated:
        shape = get_args(shape)[0]
    if get_origin(shape) in (Union, UnionType):
        members = [a for a in get_args(shape) if a is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return shape


def _is_model(shape: Any) -> bool:
    return isinstance(shape, type) and issubclass(shape, BaseModel)


def load_config(home: Path) -> HomeConfig:
    """``<home>/config.toml`` parsed (the defaults when there is no such file).

    Raise UntrustedFile (a ConfigError) for a file that is not the user's own to
    trust (:mod:`agenthost.homefiles`): nothing of it is used."""
    path = config_path(home)
    try:
        data, _ = _read(path)
    except FileNotFoundError:
        return default_config()
    return parse_config(data, str(path))


def _read(path: Path) -> tuple[str, os.stat_result]:
    """The text of ``path`` and the stat of the file it was read from, checked by
    :func:`~agenthost.homefiles.read_checked`."""
    try:
        raw, st = read_checked(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        return raw.decode("utf-8"), st
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


@functools.cache
def refused_config() -> HomeConfig:
    """What applies while ``config.toml`` is refused as untrusted
    (:data:`REFUSED_CONFIG`): no rule (every request asks a person), no "allow for this
    session", no channel (nothing is sent, nothing is run), no links. Never the last
    good configuration: the refusal may have come after another user rewrote the file,
    and nothing may allow more than the user decided."""
    return HomeConfig(policy=PolicyConfig(session_grants=False))


if TYPE_CHECKING:
    DEFAULT_CONFIG: HomeConfig
    REFUSED_CONFIG: HomeConfig
else:

    def __getattr__(name: str) -> HomeConfig:
        """``DEFAULT_CONFIG`` and ``REFUSED_CONFIG``, made on first use (PEP 562): making
        them at import built every model of the configuration (see :class:`ConfigModel`)."""
        if name == "DEFAULT_CONFIG":
            return default_config()
        if name == "REFUSED_CONFIG":
            return refused_config()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _stamp(st: os.stat_result) -> tuple[int, int, int, int]:
    """What changes when the file is replaced, written, chmod-ed or chown-ed (ctime:
    a chmod changes neither the size nor the mtime, and no one can set it back)."""
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class ConfigFile:
    """``config.toml`` re-read when it changes (inode, size, mtime or ctime), cheaply
    checked.

    A long-lived process (host, daemon, gateway) calls :meth:`get` where it needs the
    configuration. When the file turns invalid, :meth:`get` keeps the last good
    configuration and :attr:`error` says what is wrong (``None`` once fixed); before
    any good read it is the defaults. When it is refused as untrusted (another user's,
    writable by others, a symbolic link: :mod:`agenthost.homefiles`), :attr:`refused`
    is true, :attr:`error` says why and :meth:`get` is :data:`REFUSED_CONFIG` until
    the file is fixed.
    """

    def __init__(self, home: Path) -> None:
        self.path = config_path(home)
        self._config: HomeConfig | None = None
        """None: the defaults, made on first use (:func:`default_config`)."""
        self.error: str | None = None
        self.refused = False
        self._seen: tuple[int, int, int, int] | None = None

    @property
    def config(self) -> HomeConfig:
        """The configuration :meth:`get` returned last (without a look at the file)."""
        return default_config() if self._config is None else self._config

    def get(self) -> HomeConfig:
        """The current configuration (re-read if the file changed since last time)."""
        try:
            # lstat: a symbolic link put in the file's place is a change (and refused)
            seen: tuple[int, int, int, int] | None = _stamp(os.lstat(self.path))
        except FileNotFoundError:
            seen = None
        except OSError as exc:
            self.error = f"cannot read {self.path}: {exc.strerror}"
            return self.config
        if seen == self._seen and (seen is not None or self.error is None):
            return self.config
        self._seen = seen
        if seen is None:
            self._config, self.error, self.refused = None, None, False
            return self.config
        try:
            text, st = _read(self.path)
            self._seen = _stamp(st)  # what was read, if it changed since the lstat
            self._config = parse_config(text, str(self.path))
            self.error, self.refused = None, False
        except FileNotFoundError:
            self._config, self.error, self.refused = None, None, False
        except UntrustedFile as exc:
            self._config, self.error, self.refused = refused_config(), exc.message, True
            # checked again at the next call: the fix may be to the directory (chmod go-w
            # the home), which changes nothing of the file
            self._seen = None
        except ConfigError as exc:
            # invalid: the last good one goes on (none after a refusal: refused_config())
            self.error, self.refused = exc.message, False
        return self.config


def dump_json(config: HomeConfig) -> dict[str, Any]:
    """The configuration as JSON-ready data (secrets and tokens hidden)."""
    data = config.model_dump(mode="json")
    for channel in data["notify"]["channels"].values():
        for key in ("secret", "token"):
            if channel.get(key):
                channel[key] = "(set)"
    return data
