"""Which sandbox an agent gets: its spawn's ``--sandbox``, else the home's ``[sandbox]``
default or the first ``[[sandbox.override]]`` that matches it; and what ``[sandbox]``
adds (allowed hosts, paths). Reads ``config.toml`` only when it exists and a sandbox
may be on: asking costs a command that starts no sandbox nothing but a ``stat``
(the configuration's parser and the sandbox's modules are imported only then)."""

from __future__ import annotations

from pathlib import Path

from agenthost.errors import ConfigError
from agenthost.paths import config_path
from agenthost.sandbox.profiles import Profile, Settings, parse_profile


def resolve(
    home: Path, option: str | None, agent_id: str, project: str
) -> tuple[Profile | None, Settings]:
    """The profile (None: unconfined) and the settings of that agent's sandbox.

    ``option`` is what the spawn asked for (``off`` included); None follows the home's
    configuration. A configuration that is refused (another user's, a syntax error) is
    read for nothing: with an option, the option's profile with no more hosts allowed;
    without one, no sandbox if the file does not name ``sandbox`` at all, else the
    start is refused (ConfigError): the file may give every agent a sandbox, and an
    agent must not start unconfined because it is broken."""
    if option is not None and parse_profile(option) is None:
        return None, Settings()
    if not config_path(home).exists():
        return (parse_profile(option) if option is not None else None), Settings()
    from agenthost.config import load_config

    try:
        sandbox = load_config(home).sandbox
    except ConfigError:
        if option is not None:  # what the spawn asked for, and nothing more allowed
            return parse_profile(option), Settings()
        if not _mentions_sandbox(config_path(home)):
            return None, Settings()  # it configures no sandbox, whatever else is wrong
        raise  # it may say "strict" for every agent: never start one unconfined
    name, hosts = sandbox.for_agent(agent_id, project)
    profile = parse_profile(option if option is not None else name)
    return profile, Settings(
        hosts, tuple(sandbox.read_only), tuple(sandbox.read_write), sandbox.max_processes
    )


def check_sandbox(home: Path, option: str | None, agent_id: str, project: str) -> str | None:
    """Before anything starts: the profile that agent will get (None: unconfined), or
    SandboxUnavailable if this machine cannot give it (ConfigError for a bad name or a
    refused configuration)."""
    if option is None and not config_path(home).exists():
        return None
    profile, _ = resolve(home, option, agent_id, project)
    if profile is None:
        return None
    from agenthost.sandbox.machine import require

    require(profile)
    return profile.name


def _mentions_sandbox(path: Path) -> bool:
    """Whether the file's text has the word ``sandbox`` (it cannot configure one
    without it); True when it cannot be read."""
    from agenthost.config import MAX_CONFIG_BYTES

    try:
        with path.open("rb") as file:
            return b"sandbox" in file.read(16 * MAX_CONFIG_BYTES)
    except OSError:
        return True
