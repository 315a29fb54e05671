"""The approval policy: what a permission request gets before anyone is asked. Sans-IO.

Rules (``[[policy.rule]]`` of config.toml, :class:`agenthost.config.PolicyRule`) are
tried in order and the first that matches decides: ``allow``, ``deny`` or ``ask``.
No rule matching means ``ask``: a person decides. A session grant (a person's "allow
for this session") turns an ``ask`` into ``allow`` for the same tool and exact
command, never a ``deny``.

Commands are read with bash's grammar (:mod:`agenthost.attention.commandline`). A rule
that allows by ``command`` allows only what is certain: a simple command of literal
words. A line of several (``a && b | c``, a ``bash -c`` script) is allowed when each of
its commands is allowed on its own, and a wrapper (``env``, ``timeout``, ``sudo``) when
the command it runs is allowed too; anything in doubt (an expansion, ``$'...'``, a
redirection, a glob...) is never allowed by a command rule. Deny and ask rules match
when any reading of the line matches (each command in it, decoded, unwrapped).

Paths: an ``allow`` rule with a path matches only when every path of the request
matches, after symlinks are resolved where the host can resolve them; a ``deny`` or
``ask`` rule when any path does, as written or resolved.

No I/O: :func:`decide` takes the rules, the request and the grants; the host reads the
configuration, resolves paths and applies the decision (:mod:`agenthost.host.approvals`).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final, Literal, Protocol

from agenthost.attention.commandline import Reading, Simple, folded, read, readings

Behavior = Literal["allow", "deny", "ask"]
Source = Literal["rule", "session", "default"]

DEFAULT_REASON: Final = "no rule matched: a person decides"

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
    """The command line as the agent gave it (an argv list joined as a shell reads it)."""
    paths: tuple[str, ...] = ()
    """The files it touches, as written (normalised: ``a/../b`` is ``b``)."""
    agent_id: str = ""
    project: str = ""
    real_paths: tuple[str, ...] | None = None
    """The same files with every symlink resolved against the agent's working
    directory (None: not resolved, the paths as written are all there is)."""


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
    as a shell would read it (None for anything else)."""
    value = tool_input.get("command")
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return shlex.join(value)
    return None


def paths_of(tool_input: Mapping[str, Any], locations: Any = None) -> tuple[str, ...]:
    """The files a tool input names, as written: ``file_path``, ``path``,
    ``notebook_path``, Codex's file ``changes`` (a list of ``{path}`` or a mapping by
    path) and ACP ``locations`` (``[{path}]``); without duplicates."""
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
    return tuple(dict.fromkeys(found))


def _path_items(items: list[Any]) -> Iterable[str]:
    for item in items:
        if isinstance(item, Mapping):
            path = item.get("path")
            if isinstance(path, str) and path:
                yield path


def subject_of(
    request: Mapping[str, Any],
    agent_id: str = "",
    project: str = "",
    resolve: Callable[[str], str | None] | None = None,
) -> Subject:
    """The subject of a permission request (the ``request`` of a
    ``permission_request`` event: ``tool_name``, ``input``, optionally ``locations``).
    ``resolve`` gives a path's real path (symlinks resolved against the agent's
    working directory), or None when it cannot."""
    tool_input = request.get("input")
    tool_input = tool_input if isinstance(tool_input, Mapping) else {}
    tool = request.get("tool_name")
    written = paths_of(tool_input, request.get("locations"))
    real: tuple[str, ...] | None = None
    if resolve is not None:
        resolved = [resolve(p) for p in written]
        real = None if None in resolved else tuple(r for r in resolved if r is not None)
    return Subject(
        tool=tool if isinstance(tool, str) else "",
        command=command_of(tool_input),
        paths=tuple(dict.fromkeys(posixpath.normpath(p) for p in written)),
        agent_id=agent_id,
        project=project,
        real_paths=real,
    )


def resolver(cwd: str) -> Callable[[str], str | None]:
    """What the host and ``policy test`` hand :func:`subject_of`: a path made absolute
    against ``cwd`` with every symlink resolved (None when it cannot be). The one
    function here that reads the file system."""

    def resolve(path: str) -> str | None:
        try:
            return os.path.realpath(os.path.join(cwd, path))
        except (OSError, ValueError):  # a NUL byte, a component over NAME_MAX
            return None

    return resolve


def grant_for(subject: Subject, actor: str = "client") -> Grant:
    """The session grant that allows ``subject`` again (same tool, exact command)."""
    return Grant(subject.tool, subject.command, actor)


# --- matching --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Unit:
    """One thing a command line runs, as the rules see it: ``allowable`` texts that an
    allow rule may match (none when it is in doubt) and ``texts`` that deny and ask
    rules match."""

    name: str
    allowable: frozenset[str]
    texts: frozenset[str]
    doubt: str | None = None
    line: bool = False
    """The whole line: only a deny or an ask rule decides for it."""


def _units(reading: Reading) -> list[_Unit]:
    """What must each be allowed for ``reading`` to be: every simple command, and what
    each wrapper among them runs; and, for a line of several, the line as written (for
    deny and ask rules only: ``*| sh*``)."""
    if not reading.certain:
        return [_Unit(reading.command, frozenset(), reading.texts, reading.doubt)]
    units: list[_Unit] = []
    stack: list[Simple | _Unit] = list(reversed(reading.commands))
    while stack:
        simple = stack.pop()
        if isinstance(simple, _Unit):  # a wrapper, after what it runs
            units.append(simple)
            continue
        allow = frozenset({simple.text, simple.source}) - {""}
        texts = readings(simple)
        # what a wrapper runs comes first: a reason names `rm -rf /`, not `sudo rm -rf /`
        stack.append(_Unit(simple.text, allow, texts))
        if simple.runs is None:
            why = f"what {simple.argv[0]} runs is not known in full"
            units.append(_Unit(simple.text, frozenset(), texts, why))
        else:
            stack.extend(reversed(simple.runs))
    if len(units) > 1 or units[0].name != reading.command:
        units.append(_Unit(reading.command, frozenset(), folded(reading.command), line=True))
    return units


def _pattern_matches(rule: Rule, text: str) -> bool:
    if rule.command is not None:
        return fnmatchcase(text, rule.command)
    return re.fullmatch(rule.command_regex or "", text) is not None


def _command_matches(rule: Rule, unit: _Unit) -> bool:
    texts = unit.allowable if rule.decision == "allow" else unit.texts
    return any(_pattern_matches(rule, text) for text in texts)


def _paths_match(rule: Rule, subject: Subject) -> bool:
    pattern = rule.path or ""
    real = subject.real_paths
    if rule.decision == "allow":
        # allowing needs every file covered, where it really is
        if real is None:
            return all(fnmatchcase(p, pattern) for p in subject.paths)
        return bool(real) and all(fnmatchcase(p, pattern) for p in real)
    # denying or asking needs one file, as written or resolved
    return any(fnmatchcase(p, pattern) for p in (*subject.paths, *(real or ())))


def _fields_match(rule: Rule, subject: Subject) -> bool:
    if rule.tool is not None and not fnmatchcase(subject.tool, rule.tool):
        return False
    if rule.agent is not None and not fnmatchcase(subject.agent_id, rule.agent):
        return False
    if rule.project is not None and not fnmatchcase(subject.project, rule.project):
        return False
    if rule.path is not None:
        if not subject.paths or not _paths_match(rule, subject):
            return False
    return True


def _first(rules: Sequence[Rule], subject: Subject, unit: _Unit | None) -> int | None:
    """The number of the first rule that matches ``subject`` (its command read as
    ``unit``), if any."""
    for number, rule in enumerate(rules, 1):
        if not _fields_match(rule, subject):
            continue
        if rule.command is not None or rule.command_regex is not None:
            if unit is None or not _command_matches(rule, unit):
                continue
        return number
    return None


def matches(rule: Rule, subject: Subject) -> bool:
    """Whether ``rule`` matches ``subject`` on its own: everything it names matches
    (a rule naming a command or a path never matches a request without one; an allow
    rule's command must match every command the line runs)."""
    if subject.command is None:
        return _first([rule], subject, None) is not None
    return all(_first([rule], subject, u) is not None for u in _units(read(subject.command)))


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


def _rule_reason(rules: Sequence[Rule], number: int, part: str = "") -> str:
    """``rule 2 (...) for "git log -3": read-only``: the rule, the command of the line
    it matched (if it matters), and the rule's own reason."""
    rule = rules[number - 1]
    text = describe(rule, number) + part
    return f"{text}: {rule.reason}" if rule.reason else text


def decide(rules: Sequence[Rule], subject: Subject, grants: Iterable[Grant] = ()) -> Decision:
    """The policy's decision on ``subject``: the first matching rule's, else ``ask``;
    a grant that covers the subject turns ``ask`` (never ``deny``) into ``allow``.

    A command line is decided command by command (:func:`_units`): denied when one of
    them is, allowed when all of them are, else asked."""
    if subject.command is None:
        number = _first(rules, subject, None)
        decision = _one(rules, number)
    else:
        decision = _decide_units(rules, subject, _units(read(subject.command)))
    if decision.behavior == "ask":
        return _granted(subject, grants) or decision
    return decision


def _one(rules: Sequence[Rule], number: int | None) -> Decision:
    if number is None:
        return Decision("ask", DEFAULT_REASON)
    return Decision(rules[number - 1].decision, _rule_reason(rules, number), number, "rule")


def _decide_units(rules: Sequence[Rule], subject: Subject, units: list[_Unit]) -> Decision:
    found = [(unit, _first(rules, subject, unit)) for unit in units]
    # the line itself counts only when a deny or an ask rule matched it
    found = [
        (unit, number)
        for unit, number in found
        if not unit.line or (number is not None and rules[number - 1].decision != "allow")
    ]
    several = len({unit.name for unit, _n in found if not unit.line}) > 1

    def part(unit: _Unit, number: int) -> str:
        # which command of a line a command rule matched (a rule without one, or the
        # line itself, needs no such word)
        rule = rules[number - 1]
        if not several or unit.line or (rule.command is None and rule.command_regex is None):
            return ""
        return f" for {json.dumps(unit.name, ensure_ascii=False)}"

    for behavior in ("deny", "ask"):
        for unit, number in found:
            if number is not None and rules[number - 1].decision == behavior:
                reason = _rule_reason(rules, number, part(unit, number))
                return Decision(behavior, reason, number, "rule")
    for unit, number in found:
        if number is None:
            return Decision("ask", DEFAULT_REASON + _why_not(unit, several))
    # every unit allowed
    numbers = [n for _u, n in found if n is not None]
    reasons = dict.fromkeys(_rule_reason(rules, n, part(u, n)) for u, n in found if n is not None)
    return Decision("allow", "; ".join(reasons), numbers[0], "rule")


def _why_not(unit: _Unit, several: bool) -> str:
    """Why no rule allowed ``unit``, for an ``ask``: its doubt, or which command of a
    line no rule matched."""
    if unit.doubt is not None:
        return f" (no rule can allow it: {unit.doubt})"
    if several:
        name = json.dumps(unit.name, ensure_ascii=False)
        return f" (no rule allows {name}, one of the commands it runs)"
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
