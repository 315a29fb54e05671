"""What a shell command line runs, read with bash's own grammar. Sans-IO.

The approval policy may allow a command only when its meaning is certain. A command
line is certain when bash's grammar (tree-sitter-bash) reads it as simple commands of
literal words, joined by ``&&``, ``||``, ``;``, ``|`` or newlines: no expansion
(``$X``, ``${...}``, ``$(...)``, backticks, ``$((...))``, globs, braces, ``~``), no
``$'...'`` or ``$"..."`` quoting, no redirection but the harmless ones (``2>&1``,
``>/dev/null``), no assignment, no comment, no control structure, no background job,
no character that looks like another or cannot be seen. Every word's value is then
computed twice, from the grammar's tree and by :mod:`shlex`, and the two must agree.
A shell run with ``-c`` (``bash -lc '...'``) is read in turn, its script's commands
taking its place.

Anything else is *in doubt*: :attr:`Reading.doubt` says why, and the policy never
allows it (a person decides). For deny rules a reading in doubt still offers every
text it could mean (:attr:`Reading.texts`): the line as written, each command found
in it, with ``$'...'`` decoded and look-alike characters folded, the commands that
wrappers such as ``env``, ``sudo``, ``xargs`` or ``find -exec`` run, and the scripts
of nested shells and ``eval``.

What a name means is the agent's environment's business (its ``PATH``, the functions
of a persistent shell): this module reads text, it is not a sandbox.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

from tree_sitter import Language, Node, Parser

MAX_COMMAND_CHARS: Final = 65536
"""A longer command line is in doubt (reading it costs time and memory for nothing a
person would approve unread)."""
MAX_DEPTH: Final = 4
"""Shells nested deeper than this (``bash -c "bash -c '...'"``) are in doubt."""

SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash", "ksh", "mksh", "yash", "posh"})
"""Shells whose ``-c`` script is read in turn (their grammar is bash's for what is
certain here)."""
_OTHER_SHELLS: Final = frozenset({"fish", "csh", "tcsh", "nu", "elvish", "xonsh", "busybox"})
"""Shells whose scripts are not read here: given a script with ``-c``, in doubt."""
_SHELL_FLAGS: Final = frozenset("leuxvc")
_SHELL_LONG: Final = frozenset({"--login", "--noprofile", "--norc", "--posix"})

# Wrappers that run another command: their flags, the options that take a value, and
# how many operands come before the command (timeout's DURATION). An option not listed
# makes what the wrapper runs unknown: were it to take a value, the command would start
# a word later than it seems.
_WRAPPERS: Final[dict[str, tuple[frozenset[str], frozenset[str], int]]] = {
    "env": (
        frozenset({"-i", "--ignore-environment", "-0", "--null", "-v", "--debug", "-"}),
        frozenset({"-u", "--unset", "-C", "--chdir"}),
        0,
    ),
    "sudo": (
        frozenset({"-A", "-E", "-H", "-k", "-n", "-P", "-S", "--preserve-env"}),
        frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U", "--user"}),
        0,
    ),
    "doas": (frozenset({"-n"}), frozenset({"-u", "-C"}), 0),
    "nice": (frozenset(), frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), frozenset(), 0),
    "time": (
        frozenset({"-p", "-v", "-a", "-q", "--portability", "--verbose", "--append", "--quiet"}),
        frozenset({"-f", "--format", "-o", "--output"}),
        0,
    ),
    "timeout": (
        frozenset({"--preserve-status", "--foreground", "-v", "--verbose"}),
        frozenset({"-s", "--signal", "-k", "--kill-after"}),
        1,
    ),
    "stdbuf": (frozenset(), frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "setsid": (frozenset({"-c", "-f", "-w", "--ctty", "--fork", "--wait"}), frozenset(), 0),
    "ionice": (
        frozenset({"-t", "--ignore"}),
        frozenset({"-c", "-n", "--class", "--classdata"}),
        0,
    ),
    "command": (frozenset({"-p"}), frozenset(), 0),
    "builtin": (frozenset(), frozenset(), 0),
    "exec": (frozenset({"-c", "-l"}), frozenset({"-a"}), 0),
    "xargs": (frozenset(), frozenset(), 0),  # runs with arguments from its input: unknown
}
_EXEC_ACTIONS: Final = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
# Commands that run text they are given as code: never certain.
_CODE_RUNNERS: Final = frozenset({"eval", "alias", "trap", "source", "."})

# Node types whose words are literal when their text passes the checks below.
_LITERAL_PARTS: Final = frozenset({"word", "number", "raw_string", "string", "concatenation"})
# Characters that mean something to bash outside quotes (globs, braces, tilde,
# expansions, operators, quoting that shlex does not know).
_UNQUOTED_SPECIAL: Final = frozenset("$`(){}[]*?!&;|<>\"'")
# A tilde expands at a word's start and after = or : (``a=~/x``); ``HEAD~1`` is literal.
_TILDE: Final = re.compile(r"(?:^|[=:])~")
_MASK: Final = bytes(b if b < 0x80 else ord("x") for b in range(256))
_ESCAPED: Final = re.compile(r"\\.")
_SAFE_DUPS: Final = re.compile(r"\d?[<>]&\d")  # 2>&1, >&2, 0<&3
_DEV_NULL: Final = frozenset({">", ">>", "&>", "&>>"})

# What each kind of construct is called in a reason.
_CONSTRUCTS: Final = {
    "ansi_c_string": "$'…' quoting",
    "translated_string": '$"…" quoting',
    "simple_expansion": "a variable ($NAME)",
    "expansion": "a parameter expansion (${…})",
    "command_substitution": "a command substitution ($(…) or `…`)",
    "process_substitution": "a process substitution (<(…) or >(…))",
    "arithmetic_expansion": "an arithmetic expansion ($((…)))",
    "brace_expression": "a brace expansion ({a..b})",
    "variable_assignment": "a variable assignment (NAME=…)",
    "declaration_command": "a declaration (export, declare, local, readonly)",
    "unset_command": "unset",
    "file_redirect": "a redirection (>, <, >>)",
    "heredoc_redirect": "a here-document (<<)",
    "herestring_redirect": "a here-string (<<<)",
    "subshell": "a subshell ( … )",
    "compound_statement": "a group { …; }",
    "negated_command": "a negation (!)",
    "test_command": "a test [[ … ]]",
    "comment": "a comment (#…)",
    "function_definition": "a function definition",
    "if_statement": "if",
    "for_statement": "a for loop",
    "c_style_for_statement": "a for loop",
    "while_statement": "a while loop",
    "case_statement": "case",
}


class Doubt(Exception):
    """Why a command line's meaning is not certain (internal: becomes ``Reading.doubt``)."""


@dataclass(frozen=True, slots=True)
class Simple:
    """One simple command whose every word is literal."""

    argv: tuple[str, ...]
    source: str = field(default="", compare=False)
    """The command as written in the line."""
    runs: tuple[Simple, ...] | None = ()
    """What it runs in turn as a wrapper (``env X``, ``timeout 5 X``): known exactly,
    or None when its arguments are not all known (``xargs rm``, ``find -exec rm {}``)."""

    @property
    def text(self) -> str:
        """The command as rules see it: its words, quoted only where needed."""
        return shlex.join(self.argv)


@dataclass(frozen=True, slots=True)
class Reading:
    """What a command line runs."""

    command: str
    commands: tuple[Simple, ...] = ()
    """The simple commands it runs, in order, when it is certain (nested shells read
    in turn); empty when in doubt."""
    doubt: str | None = None
    """Why its meaning is not certain (None: certain)."""
    texts: frozenset[str] = field(default_factory=frozenset)
    """Every text it could mean, for rules that deny or ask: the line itself, each
    command found in it (decoded, folded, unwrapped)."""

    @property
    def certain(self) -> bool:
        """Whether every command it runs is known, word for word."""
        return self.doubt is None


RESERVED_WORDS: Final = frozenset(
    "! case coproc do done elif else esac fi for function if in select then time until "
    "while { } [[ ]]".split()
)
"""Words bash reads as its own syntax when unquoted where a command begins."""
_GRAMMAR_WORDS: Final = RESERVED_WORDS | frozenset(
    "declare typeset export local readonly unset unsetenv [".split()
)
"""What the grammar reads as a construct of its own, not a command, when bare."""


_BARE_WORD: Final = re.compile(r"[A-Za-z0-9_./,+-]+")
"""Words left unquoted when an argv is joined into a line: nothing in them is syntax."""


def _argv_word(word: str) -> str:
    """``word`` as a literal for bash's grammar: bare only when nothing in it could be
    syntax, else single-quoted. (``shlex.quote`` leaves ``if`` and ``1@`` bare; the
    first is the start of an ``if`` to bash, the second unreadable to its grammar.)"""
    if _BARE_WORD.fullmatch(word) and word not in _GRAMMAR_WORDS:
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def read_argv(argv: list[str] | tuple[str, ...]) -> Reading:
    """The reading of a command given as an argv list (no shell reads the list itself;
    a shell among its words reads its script in turn)."""
    return read(" ".join(_argv_word(word) for word in argv))


@lru_cache(maxsize=32)
def read(command: str) -> Reading:
    """The reading of ``command``, a shell command line."""
    texts: set[str] = set()
    _add(texts, command)
    try:
        commands = _certain(command, 0)
    except Doubt as doubt:
        _loose(command, 0, texts)
        return Reading(command, (), str(doubt), frozenset(texts))
    for simple in commands:
        texts |= readings(simple)
    return Reading(command, tuple(commands), None, frozenset(texts))


# --- the certain reading -------------------------------------------------------------------


@lru_cache(maxsize=1)
def _parser() -> Parser:
    import tree_sitter_bash

    return Parser(Language(tree_sitter_bash.language()))


def _tree(command: str) -> tuple[Node, bytes]:
    """The syntax tree of ``command`` and its UTF-8 bytes, which the tree's byte
    offsets index (read node texts there: the tree was parsed from a masked copy)."""
    # a lone surrogate (JSON may carry one) becomes "?": such a line is in doubt anyway
    source = command.encode("utf-8", "replace")
    # tree-sitter-bash's scanner passes a character after `{` to isdigit(), which reads
    # out of bounds for code points over 255 and can crash the process (upstream issue
    # tree-sitter/tree-sitter-bash#337). Bash reads every non-ASCII character as part of
    # a word, as it reads "x": each byte of one becomes "x", every offset stays true.
    masked = source.translate(_MASK) if not source.isascii() else source
    return _parser().parse(masked).root_node, source


def _check_characters(command: str) -> None:
    if len(command) > MAX_COMMAND_CHARS:
        raise Doubt(f"it is longer than {MAX_COMMAND_CHARS} characters")
    if "\\\n" in command:
        raise Doubt("it continues a line with a backslash")
    for char in command:
        if char in "\t\n":
            continue
        category = unicodedata.category(char)
        if category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or (
            category == "Zs" and char != " "
        ):
            raise Doubt(f"it contains the invisible or control character U+{ord(char):04X}")


def _certain(command: str, depth: int) -> list[Simple]:
    """The simple commands of ``command``; Doubt when its meaning is not certain."""
    _check_characters(command)
    root, source = _tree(command)
    if root.has_error:
        raise Doubt("bash's grammar cannot read it (an unclosed quote, a stray operator)")
    found: list[Simple] = []
    for node in _statements(root, source):
        argv, text = _argv(node, source)
        found.extend(_expand(argv, depth, text))
    if not found:
        raise Doubt("it runs no command")
    return found


def _statements(root: Node, source: bytes) -> Iterator[Node]:
    """The ``command`` nodes of a line made only of lists and pipelines, in order."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in ("program", "list", "pipeline"):
            for child in reversed(node.children):
                if child.is_named:
                    stack.append(child)
                elif child.type == "&":
                    raise Doubt("it runs a command in the background (&)")
                elif child.type not in (";", "&&", "||", "|", "|&", "\n"):
                    raise Doubt(f"it uses {child.type!r}")
        elif node.type == "redirected_statement":
            _check_redirects(node, source)
            body = node.child_by_field_name("body")
            if body is None:
                raise Doubt("it redirects nothing but itself")
            stack.append(body)
        elif node.type == "command":
            yield node
        else:
            raise Doubt(f"it uses {_construct(node.type)}")


def _check_redirects(node: Node, source: bytes) -> None:
    for child in node.children:
        if child.type in ("heredoc_redirect", "herestring_redirect"):
            raise Doubt(f"it uses {_construct(child.type)}")
        if child.type != "file_redirect":
            continue
        text = _text(child, source).replace(" ", "")
        if _SAFE_DUPS.fullmatch(text):
            continue
        destination = child.child_by_field_name("destination")
        operator = next((c.type for c in child.children if not c.is_named), "")
        if (
            destination is not None
            and destination.type == "word"
            and _text(destination, source) == "/dev/null"
            and operator in _DEV_NULL
        ):
            continue
        raise Doubt(f"it redirects input or output ({_text(child, source)})")


def _argv(command: Node, source: bytes) -> tuple[list[str], str]:
    """The words of a simple command, and its text as written."""
    argv: list[str] = []
    for child in command.children:
        if child.type == "command_name":
            parts = child.named_children
            if len(parts) != 1:
                raise Doubt("its command name is not one word")
            argv.append(_literal(parts[0], source))
        elif child.type in _LITERAL_PARTS:
            argv.append(_literal(child, source))
        elif child.is_named:
            raise Doubt(f"it uses {_construct(child.type)}")
        elif child.type == "$":  # $"...": a translated string
            raise Doubt(f"it uses {_construct('translated_string')}")
        else:
            raise Doubt(f"it uses {child.type!r}")
    text = _text(command, source)
    # a second reader of the same words: both must agree on every word
    try:
        check = shlex.split(text)
    except ValueError as exc:
        raise Doubt(f"its quoting cannot be read with certainty ({exc})") from None
    if check != argv:
        raise Doubt("its words cannot be read with certainty")
    if argv and posixpath.basename(argv[0]) in _CODE_RUNNERS:
        raise Doubt(f"{argv[0]} runs text as code")
    return argv, text


def _literal(node: Node, source: bytes) -> str:
    """The value of one word made only of literal parts."""
    if node.type == "concatenation":
        if _text(node, source) == "{}":  # find's placeholder: literal to bash
            return "{}"
        for part in node.children:
            if part.type not in _LITERAL_PARTS or part.type == "concatenation":
                raise Doubt(f"it uses {_construct(part.type)}")
            _check_part(part, source)
    elif node.type in _LITERAL_PARTS:
        _check_part(node, source)
    else:
        raise Doubt(f"it uses {_construct(node.type)}")
    try:
        words = shlex.split(_text(node, source))
    except ValueError as exc:
        raise Doubt(f"its quoting cannot be read with certainty ({exc})") from None
    if len(words) != 1:
        raise Doubt("a word of it cannot be read with certainty")
    return words[0]


def _check_part(node: Node, source: bytes) -> None:
    text = _text(node, source)
    if node.type in ("word", "number"):
        index = text.find("\\")
        while index != -1:
            escaped = text[index + 1 : index + 2]
            if not escaped or not escaped.isprintable() or not escaped.isascii():
                raise Doubt("a backslash in it escapes nothing certain")
            index = text.find("\\", index + 2)
        unescaped = _ESCAPED.sub("", text)
        special = sorted(set(unescaped) & _UNQUOTED_SPECIAL)
        if special:
            raise Doubt(f"it uses {_unquoted(special[0])}")
        if _TILDE.search(unescaped):
            raise Doubt(f"it uses {_unquoted('~')}")
    elif node.type == "string":
        for child in node.children:
            if child.type == '"':
                continue
            if child.type != "string_content":
                raise Doubt(f"it uses {_construct(child.type)}")
            content = _text(child, source)
            if "$" in content or "`" in content:
                raise Doubt("it uses $ or ` inside double quotes")
            if re.search(r"\\[$`\n]", content):
                raise Doubt("it escapes $, ` or a newline inside double quotes")
    # raw_string ('...'): every character literal


def _unquoted(char: str) -> str:
    if char in "*?[]":
        return f"a pattern that the shell expands to file names ({char})"
    if char in "{}":
        return "a brace expansion ({…})"
    if char == "~":
        return "a home directory expansion (~)"
    if char == "$":
        return "an expansion ($)"
    if char == "`":
        return "a command substitution (`)"
    return f"the shell character {char!r} unquoted"


def _construct(kind: str) -> str:
    return _CONSTRUCTS.get(kind, kind.replace("_", " "))


def _text(node: Node, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _expand(argv: list[str], depth: int, source: str = "") -> list[Simple]:
    """``argv`` as the commands it runs: a shell's script read in turn in its place; a
    wrapper with what it runs."""
    script = shell_script(argv)
    if script is not None:
        if depth >= MAX_DEPTH:
            raise Doubt(f"it nests shells more than {MAX_DEPTH} deep")
        try:
            return _certain(script, depth + 1)
        except Doubt as inner:
            raise Doubt(f"the script it gives {argv[0]} is in doubt: {inner}") from None
    name = posixpath.basename(argv[0])
    if name in SHELLS | _OTHER_SHELLS and any(
        a.startswith("-") and not a.startswith("--") and "c" in a for a in argv[1:]
    ):
        raise Doubt(f"it gives {argv[0]} a script that cannot be read in turn")
    return [Simple(tuple(argv), source, _runs(argv, depth))]


def shell_script(argv: list[str] | tuple[str, ...]) -> str | None:
    """The script of ``bash [-l] [-e] ... -c SCRIPT [NAME ARGS...]``, else None."""
    if not argv or posixpath.basename(argv[0]) not in SHELLS:
        return None
    reads_c = False
    for arg in argv[1:]:
        if arg in _SHELL_LONG:
            continue
        if arg.startswith("-") and len(arg) > 1 and not arg.startswith("--"):
            if not set(arg[1:]) <= _SHELL_FLAGS:
                return None
            reads_c = reads_c or "c" in arg
            continue
        return arg if reads_c else None
    return None


def _runs(argv: list[str], depth: int) -> tuple[Simple, ...] | None:
    """What the wrapper ``argv`` runs (empty when it is no wrapper; None when its
    arguments are not all known)."""
    name = posixpath.basename(argv[0])
    if name == "find":
        return None if _EXEC_ACTIONS & set(argv) else ()
    spec = _WRAPPERS.get(name)
    if spec is None:
        return ()
    inner = _wrapped(argv, spec) if name != "xargs" else None
    if inner is None:
        return None
    if not inner:  # `env` alone, `command -v x`: runs nothing more
        return ()
    try:
        return tuple(_expand(inner, depth))
    except Doubt:
        return None


def _wrapped(argv: list[str], spec: tuple[frozenset[str], frozenset[str], int]) -> list[str] | None:
    """The command after a wrapper's options and operands (None: an option not known)."""
    flags, valued, operands = spec
    name = posixpath.basename(argv[0])
    index = 1
    while index < len(argv):
        arg = argv[index]
        if arg == "--":
            index += 1
            break
        if name == "env" and "=" in arg and not arg.startswith("-"):
            index += 1  # NAME=VALUE
            continue
        if not arg.startswith("-") or (arg == "-" and name != "env"):
            break
        if name == "command" and arg in ("-v", "-V"):
            return []  # prints what a name is, runs nothing
        option = arg.split("=", 1)[0]
        if arg in flags or (name == "nice" and arg[1:].isdigit()):
            index += 1
        elif option in valued:
            index += 1 if "=" in arg else 2
        elif arg[:2] in valued and not arg.startswith("--"):
            index += 1  # a short option with its value attached: -oL, -n10
        else:
            return None
    index += operands
    return argv[index:] if index <= len(argv) else None


# --- texts for deny rules ------------------------------------------------------------------


def readings(simple: Simple) -> frozenset[str]:
    """Every text a simple command could mean, for deny rules: its words, its text as
    written, its name without a directory, look-alikes folded, and what it runs as a
    wrapper (``sudo -u x rm -rf /`` reads ``rm -rf /`` too)."""
    texts: set[str] = set()
    _simple_texts(simple, texts)
    return frozenset(texts)


def folded(text: str) -> frozenset[str]:
    """``text`` as written and with look-alike and invisible characters folded."""
    texts: set[str] = set()
    _add(texts, text)
    return frozenset(texts)


def _add(texts: set[str], text: str) -> None:
    texts.add(text)
    folded = unicodedata.normalize("NFKC", text)
    texts.add(folded)
    stripped = "".join(c for c in folded if unicodedata.category(c) not in ("Cf", "Cc") or c == " ")
    texts.add(stripped)


def _simple_texts(simple: Simple, texts: set[str]) -> None:
    _add(texts, simple.text)
    _add(texts, " ".join(simple.argv))
    _add(texts, simple.source)
    _named(list(simple.argv), texts)
    for inner in simple.runs or ():
        _simple_texts(inner, texts)
    _suffixes(list(simple.argv), texts)


def _named(argv: list[str], texts: set[str]) -> None:
    """``/bin/rm -rf x`` reads ``rm -rf x`` too, and so does zsh's ``=rm -rf x`` (a
    word that starts with ``=`` is the path of the command it names)."""
    if argv and ("/" in argv[0] or argv[0].startswith("=")):
        words = [posixpath.basename(argv[0].lstrip("=")), *argv[1:]]
        _add(texts, " ".join(words))
        _add(texts, shlex.join(words))


def _suffixes(argv: list[str], texts: set[str]) -> None:
    """A wrapper's every tail (``sudo -u x rm -rf /`` reads ``rm -rf /`` too), and the
    commands of ``find -exec``."""
    if not argv:
        return
    name = posixpath.basename(argv[0])
    if name in _WRAPPERS or name in _CODE_RUNNERS:
        for start in range(1, len(argv)):
            _add(texts, shlex.join(argv[start:]))
            _add(texts, " ".join(argv[start:]))
            _named(argv[start:], texts)
    if name == "find":
        for index, arg in enumerate(argv):
            if arg in _EXEC_ACTIONS:
                tail = argv[index + 1 :]
                end = next((i for i, a in enumerate(tail) if a in (";", "+")), len(tail))
                _add(texts, " ".join(tail[:end]))
                _add(texts, shlex.join(tail[:end]))
                _named(tail[:end], texts)


def _loose(command: str, depth: int, texts: set[str]) -> None:
    """Every text a line in doubt could mean: each command node found anywhere in it
    (inside substitutions too), its words decoded where they can be, and the scripts
    of shells and ``eval`` read in turn."""
    if depth > MAX_DEPTH or len(command) > MAX_COMMAND_CHARS:
        return
    root, source = _tree(command)
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "command":
            continue
        _add(texts, _text(node, source))
        words = [_loose_word(child, source) for child in node.children if _is_word(child)]
        if not words:
            continue
        _add(texts, " ".join(words))
        _add(texts, shlex.join(words))
        _named(words, texts)
        _suffixes(words, texts)
        name = posixpath.basename(words[0])
        script = shell_script(words)
        if script is None and name in ("eval", "source", "."):
            script = " ".join(words[1:])
        if script is None and name in _WRAPPERS:
            script = " ".join(words[1:])
        if script:
            _add(texts, script)
            _loose(script, depth + 1, texts)


def _is_word(node: Node) -> bool:
    return node.type == "command_name" or (
        node.is_named and node.type not in ("variable_assignment", "file_redirect", "comment")
    )


def _loose_word(node: Node, source: bytes) -> str:
    """A word's likely value: literal parts unquoted, ``$'...'`` decoded, anything else
    as written."""
    if node.type == "command_name" and node.named_children:
        node = node.named_children[0]
    parts = node.children if node.type == "concatenation" else [node]
    out = []
    for part in parts:
        text = _text(part, source)
        if part.type == "ansi_c_string":
            out.append(ansi_c(text[2:-1]))
        elif part.type in ("word", "raw_string", "string", "number"):
            try:
                words = shlex.split(text)
            except ValueError:
                words = [text]
            out.append("".join(words) if words else "")
        else:
            out.append(text)
    return "".join(out)


_ANSI_SIMPLE: Final = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_ANSI_ESCAPE: Final = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.DOTALL
)


def ansi_c(body: str) -> str:
    """The value of bash's ``$'body'`` quoting (``\\x3b`` is ``;``, ``\\073`` too)."""

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        head = code[0]
        if head in "xuU" and len(code) > 1:
            value = int(code[1:], 16)
            return chr(value) if value < 0x110000 else ""
        if head in "01234567":
            return chr(int(code, 8) & 0xFF)
        if head == "c" and len(code) == 2:
            return chr(ord(code[1].upper()) & 0x1F)
        return _ANSI_SIMPLE.get(code, "\\" + code)

    return _ANSI_ESCAPE.sub(one, body)
