"""The approval policy: what a permission request gets before anyone is asked. Sans-IO.

Rules (``[[policy.rule]]`` of config.toml, :class:`agenthost.config.PolicyRule`) are
tried in order and the first that matches decides: ``allow``, ``deny`` or ``ask``.
No rule matching means ``ask``: a person decides. A session grant (a person's "allow
for this session") turns an ``ask`` into ``allow`` for the same tool and exact
command, never a ``deny``.

Safety: an ``allow`` rule's command pattern does not match a command that chains,
pipes, substitutes or redirects (``;``, ``&&``, ``||``, ``|``, `````, ``$(``, a
newline, ``>``, ``<``, ``&``) unless the pattern itself contains that operator, so
``git status*`` allows ``git status -s`` and never ``git status; rm -rf /``. An
``allow`` rule with a path matches only when every path of the request matches; a
``deny`` or ``ask`` rule when any does.

No I/O: :func:`decide` takes the rules, the request and the grants; the host reads the
configuration and applies the decision (:mod:`agenthost.host.approvals`).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final, Literal, Protocol

Behavior = Literal["allow", "deny", "ask"]
Source = Literal["rule", "session", "default"]

DEFAULT_REASON: Final = "no rule matched: a person decides"

# Operators that make one command line run more than one command, or write or read
# files of its choice. `>` and `<` cover `>>`, `2>&1`, `<(...)`, `>(...)`.
_OPERATORS: Final = re.compile(r"&&|\|\||;|\||`|\$\(|\n|\r|>|<|&")
_SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash"})
_PATH_KEYS: Final = ("file_path", "path", "notebook_path")


class Rule(Protocol):
    """What :func:`decide` reads of a rule (:class:`agenthost.config.PolicyRule`)."""

    @property
    def tool(self) -> str | None: ...
    @property
    def command(self) -> str | None: ...
    @property
    def command_regex(self) -> str | None: ...
    @property
    def path(self) -> str | None: ...
    @property
    def agent(self) -> str | None: ...
    @property
    def project(self) -> str | None: ...
    @property
    def decision(self) -> Behavior: ...
    @property
    def reason(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Subject:
    """What a permission request asks, as the rules see it."""

    tool: str
    command: str | None = None
    """The command line (a shell wrapper ``bash -lc '...'`` taken off), if any."""
    paths: tuple[str, ...] = ()
    """The files it touches (normalised: ``a/../b`` is ``b``)."""
    agent_id: str = ""
    project: str = ""


@dataclass(frozen=True, slots=True)
class Grant:
    """A person's "allow for this session": this tool with this exact command (or,
    for a tool without a command, every use of the tool)."""

    tool: str
    command: str | None
    actor: str = "client"

    def covers(self, subject: Subject) -> bool:
        """Whether the grant allows ``subject``."""
        return self.tool == subject.tool and self.command == subject.command


@dataclass(frozen=True, slots=True)
class Decision:
    """What the policy decided, and why."""

    behavior: Behavior
    reason: str
    rule: int | None = None
    """The 1-based number of the rule that matched, if one did."""
    source: Source = "default"


def command_of(tool_input: Mapping[str, Any]) -> str | None:
    """The command of a tool input: ``command`` as a string, or an argv list joined
    as a shell would read it; ``bash -c X`` / ``bash -lc X`` is ``X``."""
    value = tool_input.get("command")
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        argv: list[str] = list(value)
    elif isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError:  # unbalanced quotes: match it as written
            return value
    else:
        return None
    if len(argv) == 3 and posixpath.basename(argv[0]) in _SHELLS and argv[1] in ("-c", "-lc"):
        return argv[2]
    return value if isinstance(value, str) else shlex.join(argv)


def paths_of(tool_input: Mapping[str, Any], locations: Any = None) -> tuple[str, ...]:
    """The files a tool input names: ``file_path``, ``path``, ``notebook_path``,
    Codex's file ``changes`` (a list of ``{path}`` or a mapping by path) and ACP
    ``locations`` (``[{path}]``); normalised, without duplicates."""
    found: list[str] = []
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            found.append(value)
    changes = tool_input.get("changes")
    if isinstance(changes, Mapping):
        found.extend(k for k in changes if isinstance(k, str) and k)
    elif isinstance(changes, list):
        found.extend(_path_items(changes))
    if isinstance(locations, list):
        found.extend(_path_items(locations))
    return tuple(dict.fromkeys(posixpath.normpath(p) for p in found))


def _path_items(items: list[Any]) -> Iterable[str]:
    for item in items:
        if isinstance(item, Mapping):
            path = item.get("path")
            if isinstance(path, str) and path:
                yield path


def subject_of(request: Mapping[str, Any], agent_id: str = "", project: str = "") -> Subject:
    """The subject of a permission request (the ``request`` of a
    ``permission_request`` event: ``tool_name``, ``input``, optionally ``locations``)."""
    tool_input = request.get("input")
    tool_input = tool_input if isinstance(tool_input, Mapping) else {}
    tool = request.get("tool_name")
    return Subject(
        tool=tool if isinstance(tool, str) else "",
        command=command_of(tool_input),
        paths=paths_of(tool_input, request.get("locations")),
        agent_id=agent_id,
        project=project,
    )


def grant_for(subject: Subject, actor: str = "client") -> Grant:
    """The session grant that allows ``subject`` again (same tool, exact command)."""
    return Grant(subject.tool, subject.command, actor)


def operators(text: str) -> frozenset[str]:
    """The chaining, substitution and redirection operators in ``text``."""
    return frozenset(_OPERATORS.findall(text))


def _command_matches(rule: Rule, command: str, safe: bool = True) -> bool:
    if rule.command is not None:
        pattern = rule.command
        matched = fnmatchcase(command, pattern)
    else:
        pattern = rule.command_regex or ""
        matched = re.fullmatch(pattern, command) is not None
    if matched and safe and rule.decision == "allow":
        # `git status*` must not allow `git status; rm -rf /`: every operator the
        # command uses must be written in the pattern itself
        return operators(command) <= operators(pattern)
    return matched


def _paths_match(rule: Rule, paths: Sequence[str]) -> bool:
    pattern = rule.path or ""
    hits = [fnmatchcase(p, pattern) for p in paths]
    # allowing needs every file covered; denying or asking needs one
    return all(hits) if rule.decision == "allow" else any(hits)


def matches(rule: Rule, subject: Subject, *, safe: bool = True) -> bool:
    """Whether everything ``rule`` names matches ``subject`` (a rule naming a command
    or a path never matches a request without one). ``safe=False`` leaves out the
    chaining safety of allow rules (to explain why one did not match)."""
    if rule.tool is not None and not fnmatchcase(subject.tool, rule.tool):
        return False
    if rule.agent is not None and not fnmatchcase(subject.agent_id, rule.agent):
        return False
    if rule.project is not None and not fnmatchcase(subject.project, rule.project):
        return False
    if rule.command is not None or rule.command_regex is not None:
        if subject.command is None or not _command_matches(rule, subject.command, safe):
            return False
    if rule.path is not None:
        if not subject.paths or not _paths_match(rule, subject.paths):
            return False
    return True


def describe(rule: Rule, number: int) -> str:
    """``rule 2 (tool Bash, command "git status*")``: a rule as the reasons name it."""
    parts = []
    if rule.tool is not None:
        parts.append(f"tool {rule.tool}")
    for name in ("command", "command_regex", "path", "agent", "project"):
        value = getattr(rule, name)
        if value is not None:
            parts.append(f"{name} {json.dumps(value, ensure_ascii=False)}")
    return f"rule {number} ({', '.join(parts) or 'every request'})"


def decide(rules: Sequence[Rule], subject: Subject, grants: Iterable[Grant] = ()) -> Decision:
    """The policy's decision on ``subject``: the first matching rule's, else ``ask``;
    a grant that covers the subject turns ``ask`` (never ``deny``) into ``allow``."""
    for number, rule in enumerate(rules, 1):
        if not matches(rule, subject):
            continue
        text = describe(rule, number)
        if rule.decision == "ask":
            granted = _granted(subject, grants)
            if granted is not None:
                return granted
        reason = f"{text}: {rule.reason}" if rule.reason else text
        return Decision(rule.decision, reason, number, "rule")
    return _granted(subject, grants) or Decision("ask", DEFAULT_REASON + _near_miss(rules, subject))


def _near_miss(rules: Sequence[Rule], subject: Subject) -> str:
    """Why an allow rule that looks like it matches did not: the chaining safety."""
    for number, rule in enumerate(rules, 1):
        if rule.decision == "allow" and subject.command and matches(rule, subject, safe=False):
            pattern = rule.command or rule.command_regex or ""
            extra = " ".join(sorted(operators(subject.command) - operators(pattern)))
            return (
                f" ({describe(rule, number)} does not allow a command with {extra!r}, "
                "which its pattern does not contain)"
            )
    return ""


def _granted(subject: Subject, grants: Iterable[Grant]) -> Decision | None:
    for grant in grants:
        if grant.covers(subject):
            return Decision("allow", f"allowed for this session by {grant.actor}", None, "session")
    return None


def duration_text(seconds: float) -> str:
    """``15m``, ``2h``, ``90s``, ``0.5s``: a time limit as config.toml writes it."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
