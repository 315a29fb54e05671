"""What the daemon runs: a spawn spec, as ``agenthost serve`` options name it. Sans-IO.

Apart from :mod:`agenthost.daemon.protocol` (which re-exports it) so that what builds
on a spec (automation's run targets) can be imported by the protocol's message tables.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StrictInt, StrictStr, field_validator

from agenthost.errors import InvalidAgentId
from agenthost.models import PeerModel, UsdLimit
from agenthost.paths import validate_agent_id


def agent_id_value(value: str) -> str:
    """An agent id field's validator: the id, or ValueError with the reason."""
    try:
        return validate_agent_id(value)
    except InvalidAgentId as exc:
        raise ValueError(exc.message) from None


_Seconds = Annotated[float, Field(ge=0, le=86400, strict=True, allow_inf_nan=False)]


class RestartPolicy(PeerModel):
    """When the daemon restarts a crashed agent in a new host.

    ``never``: never. ``on-failure``: when the agent exits with a non-zero status or a
    signal, or its host dies; after ``backoff`` seconds, doubling per consecutive
    restart up to ``backoff_max``, at most ``max_restarts`` times in a row. An agent
    that ran ``reset_after`` seconds before failing starts a new series.
    """

    policy: Literal["never", "on-failure"] = "never"
    max_restarts: StrictInt = Field(default=5, ge=0, le=10_000)
    backoff: _Seconds = 1.0
    backoff_max: _Seconds = 60.0
    reset_after: _Seconds = 600.0


class ForkSpec(PeerModel):
    """Where a forked agent's conversation comes from (``agenthost fork``): the
    parent's session, continued in a new one of the forked agent's own.

    Only the first start of the forked agent forks: its restarts resume its own
    session (``session_id`` of the registry), never the parent's again.
    """

    from_agent: StrictStr
    """The parent agent's id."""
    session_id: StrictStr = Field(min_length=1, max_length=1000)
    """The parent's session (Claude Code's session id, Codex's thread id)."""
    offset: StrictInt | None = Field(default=None, ge=0)
    """The parent's journal offset the conversation is cut at (``--at``); None: all of
    it."""
    point: StrictStr | None = Field(default=None, min_length=1, max_length=1000)
    """The agent's own name of that point: Claude Code's assistant message uuid
    (``--resume-session-at``), Codex's turn id (``thread/fork``'s ``lastTurnId``)."""
    branch: StrictStr | None = Field(default=None, max_length=250)
    """The parent's worktree branch a new worktree branch starts from (its head)."""

    _check_id = field_validator("from_agent")(agent_id_value)


class SpawnSpec(PeerModel):
    """``daemon.spawn``: what to run, as ``agenthost serve`` options name it.

    The daemon keeps the spec in its registry and uses it again for restarts.
    """

    agent_id: StrictStr
    agent: StrictStr = "demo"
    """The adapter kind (``demo``, ``lines``, ``claude``, ``codex``)."""
    command: list[StrictStr] = Field(default_factory=list)
    cwd: StrictStr | None = None
    """The agent's working directory (absolute); the daemon's own when absent."""
    env: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    project: StrictStr = ""
    task: StrictStr | None = None
    description: StrictStr | None = None
    agent_opts: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    resume: StrictStr | None = None
    linger: _Seconds | None = None
    stop_timeout: _Seconds | None = None
    ring_size: StrictInt | None = Field(default=None, ge=1)
    ring_bytes: StrictInt | None = Field(default=None, ge=1024)
    restart: RestartPolicy = Field(default_factory=RestartPolicy)
    # 1.4
    budget_usd: UsdLimit | None = None
    budget_tokens: StrictInt | None = Field(default=None, ge=0, le=10**15)
    worktree: StrictStr | None = Field(default=None, max_length=250)
    """Run the agent in a git worktree of its own of ``repo``, on this branch (created
    from the repository's HEAD when it does not exist); ``""``: a branch named after
    the agent (``agenthost/<id>``). ``cwd`` is then the worktree."""
    repo: StrictStr | None = Field(default=None, max_length=4096)
    """The repository of ``worktree`` (absolute)."""
    setup: StrictStr | None = Field(default=None, max_length=10_000)
    """A shell command run in a new worktree before the agent starts; a failure
    removes the worktree and fails the spawn."""
    memory_max: StrictInt | None = Field(default=None, ge=1 << 20, le=1 << 50)
    """Bytes of memory the host and its agent may use together (systemd ``MemoryMax``,
    cgroup ``memory.max``)."""
    cpu_max: float | None = Field(default=None, gt=0, le=1024, allow_inf_nan=False, strict=True)
    """CPUs the host and its agent may use together (1.5: one and a half cores)."""
    # 1.6
    sandbox: StrictStr | None = Field(default=None, max_length=100)
    """The agent's sandbox profile (``strict``, ``net``, ``none``, ``off``); absent: as
    the home's ``[sandbox]`` says."""
    size: StrictStr | None = Field(default=None, max_length=20)
    """(1.7) A terminal agent's fixed size, ``COLSxROWS``; absent: its clients'."""
    fork: ForkSpec | None = None
    """Start by forking another agent's session (``agenthost fork``); additive, no new
    message: a daemon that does not know it ignores it and starts a fresh session."""

    _check_id = field_validator("agent_id")(agent_id_value)

    @field_validator("size")
    @classmethod
    def _check_size(cls, value: str | None) -> str | None:
        from agenthost.errors import ConfigError
        from agenthost.terminal.sizes import parse_size

        if value is not None:
            try:
                parse_size(value)
            except ConfigError as exc:
                raise ValueError(exc.message) from None
        return value


REDACTED: Final = "<redacted>"


def redacted(spec: SpawnSpec | None) -> SpawnSpec | None:
    """``spec`` as ``daemon.list`` shows it: the names of the agent's extra environment
    variables but not their values (API keys, tokens). The registry keeps the values,
    for restarts; it is private to the user (0600 in a 0700 home)."""
    if spec is None or not spec.env:
        return spec
    return spec.model_copy(update={"env": dict.fromkeys(spec.env, REDACTED)})
