"""The hooks of a home: ``<home>/webhooks/NAME.toml`` (what a delivery starts: the
target, the template, the event filters) and ``<home>/webhooks/NAME.secret`` (the key
its deliveries are signed with). Not ``<home>/hooks/``: that directory holds the
terminal agents' hook sockets, made and removed by their hosts.

Both decide something (whoever can write the definition chooses what an agent is told
and which agent; whoever can read the secret can sign deliveries), so both are read
with the home-file checks of :mod:`agenthost.homefiles` (the user's own regular files,
the secret readable by nobody else, in a private directory) and written 0600 by
:mod:`agenthost.secretfile`. A hook's name is validated as an agent id is: it is a
file name.

The definition, as ``hook add`` writes it::

    template = "Review {pull_request.html_url}"
    events = ["pull_request.opened"]

    [target]
    agent_id = "reviewer"       # send to this agent; or, to start one per delivery:
    # [target.new]              # the spawn's fields, as ``agenthost run`` sets them
"""

from __future__ import annotations

import json
import os
import secrets
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from agenthost.automation.model import RunTarget
from agenthost.automation.webhooks import Template, parse_event, parse_template
from agenthost.daemon.spec import REDACTED
from agenthost.errors import ConfigError, InvalidAgentId
from agenthost.homefiles import read_checked
from agenthost.paths import ensure_private_dir, validate_agent_id, webhooks_dir
from agenthost.secretfile import MAX_SECRET, write_private
from agenthost.wire.codec import first_problem

DEFINITION_LIMIT: Final = 64 * 1024
MIN_SECRET: Final = 16
"""Characters of a secret at least: whoever guesses it signs deliveries (a generated
one has 64 hex digits; GitHub's form takes what the user types)."""


def check_name(name: str) -> str:
    """``name`` if it is a valid hook name (as an agent id), else ConfigError."""
    try:
        return validate_agent_id(name)
    except InvalidAgentId as exc:
        raise ConfigError(f"invalid hook name {name!r}", hint=exc.hint) from None


@dataclass(frozen=True, slots=True)
class Hook:
    """One hook's definition. ``target`` is ``{"agent_id": ID}`` (send to that agent)
    or ``{"new": SPEC}`` (start an agent per delivery: the spawn's fields)."""

    name: str
    target: dict[str, Any]
    template: Template
    events: tuple[str, ...] = ()

    def run_target(self) -> RunTarget:
        """The daemon's target of this hook's runs."""
        return RunTarget.model_validate(self.target)

    @property
    def path(self) -> str:
        """The URL path deliveries are posted to."""
        return f"/hooks/{self.name}"

    def describe(self) -> dict[str, Any]:
        """The hook as ``hook list --json`` and ``GET /api/hooks`` show it (no secret)."""
        return {
            "name": self.name,
            "path": self.path,
            "target": shown_target(self.target),
            "template": self.template.text,
            "events": list(self.events),
        }


def shown_target(target: dict[str, Any]) -> dict[str, Any]:
    """The target as it is shown: a new agent's ``env`` names, not their values (API
    keys, tokens), as ``daemon.list`` shows a spec."""
    new = target.get("new")
    if not isinstance(new, dict) or not isinstance(new.get("env"), dict):
        return target
    return {**target, "new": {**new, "env": dict.fromkeys(new["env"], REDACTED)}}


def check_target(target: object) -> dict[str, Any]:
    """A definition's ``target`` checked as the daemon will (exactly one of
    ``agent_id``, a valid id, and ``new``, a spawn's fields); ConfigError otherwise."""
    if not isinstance(target, dict):
        raise ConfigError("the target must be a table: agent_id, or new")
    try:
        RunTarget.model_validate(target)
    except ValidationError as exc:
        where, text = first_problem(exc)
        raise ConfigError(f"the target's {where or 'target'}: {text}") from None
    return target


def parse_hook(name: str, text: str) -> Hook:
    """The hook ``name`` defined by TOML ``text``; ConfigError naming what is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"hook {name!r}: not TOML: {exc}") from None
    unknown = sorted(set(data) - {"target", "template", "events"})
    if unknown:
        raise ConfigError(f"hook {name!r}: unknown setting {unknown[0]!r}")
    template, events = data.get("template"), data.get("events", [])
    if not isinstance(template, str):
        raise ConfigError(f"hook {name!r}: template must be a string")
    if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
        raise ConfigError(f"hook {name!r}: events must be a list of strings")
    return Hook(
        check_name(name),
        check_target(data.get("target")),
        parse_template(template),
        tuple(parse_event(e) for e in events),
    )


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        # JSON's string escapes are TOML's, but for DEL, which TOML wants escaped
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{_toml_value(str(k))} = {_toml_value(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    raise ConfigError(f"cannot write {value!r} in a hook's definition")


def format_hook(hook: Hook) -> str:
    """The TOML text of ``hook`` (read back by :func:`parse_hook`)."""
    lines = [
        f"# agenthost hook {hook.name}: deliveries to POST {hook.path}",
        f"template = {_toml_value(hook.template.text)}",
        f"events = {_toml_value(list(hook.events))}",
        "",
    ]
    if "agent_id" in hook.target:
        lines += ["[target]", f"agent_id = {_toml_value(hook.target['agent_id'])}"]
    else:
        lines.append("[target.new]")
        lines += [f"{_toml_value(k)} = {_toml_value(v)}" for k, v in hook.target["new"].items()]
    return "\n".join(lines) + "\n"


def _paths(home: Path, name: str) -> tuple[Path, Path]:
    base = webhooks_dir(home) / check_name(name)
    return base.with_suffix(".toml"), base.with_suffix(".secret")


def add_hook(home: Path, hook: Hook, secret: bytes | None = None) -> bytes:
    """Write ``hook`` and its secret (``secret``, else 64 random hex digits); return
    the secret. ConfigError for a name taken (``hook rm`` first) or a secret too short.
    The secret is written first: a definition never exists without one."""
    definition, secret_path = _paths(home, hook.name)
    if secret is None:
        secret = secrets.token_hex(32).encode()
    secret = secret.strip()
    if not MIN_SECRET <= len(secret) <= MAX_SECRET:
        raise ConfigError(
            f"the secret must be {MIN_SECRET} to {MAX_SECRET} characters",
            hint="a guessable secret lets anybody sign deliveries",
        )
    ensure_private_dir(webhooks_dir(home))
    if definition.exists():
        raise ConfigError(
            f"there is a hook {hook.name!r} already", hint=f"agenthost hook rm {hook.name}"
        )
    write_private(secret_path, secret + b"\n")
    write_private(definition, format_hook(hook).encode())
    return secret


def load_hook(home: Path, name: str) -> Hook | None:
    """The hook ``name``, or None when there is none (ConfigError: a definition that
    is not valid; UntrustedFile: one another user could have written)."""
    definition, _ = _paths(home, name)
    try:
        raw, _ = read_checked(definition, DEFINITION_LIMIT)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read {definition}: {exc.strerror}") from exc
    if len(raw) > DEFINITION_LIMIT:
        raise ConfigError(f"{definition} is over {DEFINITION_LIMIT} bytes")
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise ConfigError(f"{definition} is not UTF-8") from None
    return parse_hook(name, text)


def load_secret(home: Path, name: str) -> bytes:
    """The secret of hook ``name`` (checked: the user's, readable by nobody else);
    ConfigError when it is missing or too short."""
    _, path = _paths(home, name)
    try:
        raw, _ = read_checked(path, MAX_SECRET, secret=True)
    except FileNotFoundError:
        raise ConfigError(f"hook {name!r} has no secret ({path})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    value = raw.strip()
    if not MIN_SECRET <= len(value) <= MAX_SECRET:
        raise ConfigError(f"{path}: the secret must be {MIN_SECRET} to {MAX_SECRET} characters")
    return value


def hook_names(home: Path) -> list[str]:
    """The names of the hooks defined, sorted."""
    try:
        entries = os.listdir(webhooks_dir(home))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ConfigError(f"cannot list {webhooks_dir(home)}: {exc.strerror}") from exc
    names = []
    for entry in entries:
        stem, dot, suffix = entry.rpartition(".")
        if dot and suffix == "toml":
            try:
                names.append(check_name(stem))
            except ConfigError:
                continue  # not one of ours
    return sorted(names)


def remove_hook(home: Path, name: str) -> bool:
    """Remove hook ``name`` (its definition first: no delivery is taken after that);
    whether there was one."""
    found = False
    for path in _paths(home, name):
        try:
            path.unlink()
            found = True
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise ConfigError(f"cannot remove {path}: {exc.strerror}") from exc
    return found


def new_target(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A ``new`` target of the spawn fields ``spec`` (those unset left out)."""
    return {"new": {k: v for k, v in spec.items() if v is not None and v != {} and v != []}}
