"""The paths the docs name are the paths the code uses.

A newcomer copies paths from the docs: a `config.toml` written where agenthost never
looks is a webhook that silently never fires (issue 28). So every doc (docs/*.md and
README.md) is scanned for the home's default and for the files of the home, and each is
checked against agenthost/paths.py and the modules that define the files; the one
place that lists them all (docs/cli.md, "Files under the home directory") must list
exactly what the code makes, and every file name the code writes under the home must
be among them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.attention.keys import link_key_path
from agenthost.attention.ledger import ledger_path as notices_path
from agenthost.config import config_path
from agenthost.daemon.files import (
    daemon_lock_path,
    daemon_log_path,
    daemon_socket_path,
    registry_path,
)
from agenthost.daemon.worktrees import worktree_path
from agenthost.journal.segments import META, segment_name
from agenthost.paths import (
    default_home,
    hook_socket_path,
    hosts_dir,
    journal_dir,
    journals_dir,
    lock_path,
    log_path,
    logs_dir,
    socket_path,
    webhooks_dir,
    worktrees_dir,
)
from agenthost.privatedb import SIDE_FILES
from agenthost.web.linkledger import ledger_path as links_path
from agenthost.web.tokens import TokenStore, load_secret, web_dir

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
THE_LIST = ROOT / "docs" / "cli.md"
THE_LIST_HEADING = "## Files under the home directory"

AGENT = "AGENT0"  # stands for any agent id in the templates below
SEGMENT = segment_name(1)  # stands for any segment of a journal
ID_RE = r"(?:<[\w ]+>|[A-Za-z0-9][A-Za-z0-9._-]*)"
"""How the docs write an agent id in a path: a placeholder (`<id>`, `<agent_id>`,
`<agent id>`), `ID`, or a real id of an example (`web-1`)."""


def home_files(home: Path) -> set[str]:
    """Every file and directory the code makes under ``home``, relative to it, with
    AGENT for the agent id and SEGMENT for a journal segment; directories end in /."""
    files = {
        socket_path(home, AGENT),
        hook_socket_path(home, AGENT),
        lock_path(home, AGENT),
        log_path(home, AGENT),
        journal_dir(home, AGENT) / META,
        journal_dir(home, AGENT) / SEGMENT,
        daemon_socket_path(home),
        daemon_lock_path(home),
        registry_path(home),
        daemon_log_path(home),
        config_path(home),
        link_key_path(home),
        notices_path(home),
        TokenStore(home).path,
        links_path(home),
        webhooks_dir(home) / f"{AGENT}.toml",
        webhooks_dir(home) / f"{AGENT}.secret",
    }
    # the session secret's name is not exported: have the code make it
    before = set(web_dir(home).glob("*")) if web_dir(home).exists() else set()
    load_secret(home)
    files |= set(web_dir(home).glob("*")) - before
    dirs = {
        hosts_dir(home),
        hook_socket_path(home, AGENT).parent,
        logs_dir(home),
        journals_dir(home),
        journal_dir(home, AGENT),
        worktrees_dir(home),
        webhooks_dir(home),
        worktree_path(home, AGENT),
        web_dir(home),
        link_key_path(home).parent,
    }
    return {str(p.relative_to(home)) for p in files} | {f"{p.relative_to(home)}/" for p in dirs}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    return home_files(tmp_path_factory.mktemp("home"))


def template_re(template: str) -> re.Pattern[str]:
    """A regex that matches how the docs may write ``template``."""
    text = re.escape(template).replace(re.escape(AGENT), ID_RE)
    text = text.replace(re.escape(SEGMENT), r"\d{20}\.jsonl")
    if template.endswith("/"):  # a directory, with or without its slash
        text += "?"
    elif template.endswith(".db"):  # and SQLite's files beside it
        text += "(?:" + "|".join(SIDE_FILES) + ")?"
    return re.compile(text)


def known(relative: str, made: set[str]) -> bool:
    return any(template_re(t).fullmatch(relative) for t in made)


# --- what the docs say --------------------------------------------------------------------

COMPONENT = r"(?:<[\w ]+>|[\w.*-])+"
HOME_PATH = re.compile(rf"<home>/({COMPONENT}(?:/{COMPONENT})*/?)")
"""`<home>/hosts/<id>.sock`, `<home>/worktrees/<agent id>`, ..."""
BARE = re.compile(
    rf"`((?:hosts|logs|journal|web|attention|worktrees)/(?:{COMPONENT}(?:/{COMPONENT})*/?)?)`"
    r"|`(daemon\.(?:sock|lock|db|db-wal|db-shm)|config\.toml)`"
)
"""A file of the home named without its `<home>/` (the tables of config.md, operations.md)."""
LOOKS_LIKE_A_HOME = re.compile(r"(?:~|\$HOME|/home/me)/\.[\w./-]*agenthost[\w./<>-]*")
"""A path under the user's home directory that names an agenthost directory."""


def occurrences(docs: list[Path], pattern: re.Pattern[str]) -> Iterator[tuple[str, re.Match[str]]]:
    """Each match of ``pattern`` in ``docs``, with where it is (file:line)."""
    for doc in docs:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for match in pattern.finditer(line):
                yield f"{doc.name}:{number}", match


def clean(path: str) -> str:
    """A path as written in a sentence, without the sentence's full stop."""
    return path.rstrip(".,;:")


def the_default_home(monkeypatch: pytest.MonkeyPatch) -> str:
    """The home the code picks when nothing is set, with `~` for the user's home."""
    monkeypatch.delenv("AGENTHOST_HOME", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("HOME", "/home/me")
    return "~/" + str(default_home().relative_to("/home/me"))


def makefile_value(name: str) -> str:
    match = re.search(rf"^{name}\s*[?:]?=\s*(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, name
    return match.group(1).strip()


def not_the_home() -> dict[str, str]:
    """Directories under `~` the docs may name that are not the home, each checked
    against what makes them."""
    prefix = makefile_value("PREFIX").replace("$(HOME)", "~")
    install = makefile_value("INSTALL_VENV").replace("$(PREFIX)", prefix)
    assert install.endswith("/share/agenthost/venv")
    e2e = (ROOT / "tests" / "e2e" / "clis.py").read_text()
    assert '".cache" / "agenthost-e2e"' in e2e or "agenthost-e2e" in e2e
    return {
        # `make install`
        install.removesuffix("/venv"): "make install's virtualenv",
        f"{prefix}/bin/agenthost": "make install's link",
        # the end-to-end tests' real agent CLIs
        "~/.cache/agenthost-e2e": "the e2e tests' CLIs",
        # files the user keeps for agenthost (env files of the systemd units, secrets
        # the config names): examples of the user's own, never read unless named
        "~/.config/agenthost": "the user's own files",
    }


def wrong_homes(docs: list[Path], default: str) -> list[str]:
    """The paths under `~` in ``docs`` that look like agenthost's but are neither the
    home (``default``) nor one of :func:`not_the_home`."""
    others = not_the_home()
    wrong = []
    for where, match in occurrences(docs, LOOKS_LIKE_A_HOME):
        path = clean(match.group(0)).replace("$HOME", "~").replace("/home/me", "~")
        if path == default or path.startswith(default + "/"):
            continue
        if not any(path == o or path.startswith(o + "/") for o in others):
            wrong.append(f"{where}: {path} (the home is {default})")
    return wrong


def wrong_files(docs: list[Path], default: str, made: set[str]) -> list[str]:
    """The files of the home named in ``docs`` (as `<home>/...`, under the default
    home, or bare in backquotes) that the code does not make."""
    in_home = re.compile(
        rf"(?:~|/home/me){re.escape(default.removeprefix('~'))}/({COMPONENT}(?:/{COMPONENT})*/?)"
    )
    wrong = []
    for pattern in (HOME_PATH, in_home):
        for where, match in occurrences(docs, pattern):
            if not known(clean(match.group(1)), made):
                wrong.append(f"{where}: {match.group(0)}")
    for where, match in occurrences(docs, BARE):
        name = match.group(1) or match.group(2)
        if name.endswith(".py"):  # a test's file (security.md), not the home's
            continue
        if not known(clean(name), made):
            wrong.append(f"{where}: {name}")
    return wrong


# --- the tests --------------------------------------------------------------------------


def test_the_docs_name_the_home_the_code_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = wrong_homes(DOCS, the_default_home(monkeypatch))
    assert not wrong, "\n".join(wrong)


def test_the_docs_name_the_files_the_code_uses(
    made: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = wrong_files(DOCS, the_default_home(monkeypatch), made)
    assert not wrong, "\n".join(wrong)


def the_list() -> set[str]:
    """The tree of docs/cli.md's "Files under the home directory", as paths relative to
    the home (directories end in /)."""
    text = THE_LIST.read_text()
    block = text.split(THE_LIST_HEADING, 1)[1].split("```", 2)[1]
    listed: set[str] = set()
    parents: list[str] = []
    for line in block.splitlines()[1:]:
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= 20:  # a description's second line
            continue
        name = line.split()[0]
        if name == "<home>/":
            parents = []
            continue
        depth = indent // 2 - 1
        parents = parents[:depth] + [name]
        listed.add("".join(parents))
    return listed


def test_the_home_directory_list_is_the_codes(made: set[str]) -> None:
    listed = the_list()
    missing = sorted(t for t in made if not any(template_re(t).fullmatch(x) for x in listed))
    unknown = sorted(x for x in listed if not known(x, made))
    assert (missing, unknown) == ([], []), f"not listed: {missing}; not made: {unknown}"


def test_every_name_the_code_puts_in_the_home_is_known(made: set[str]) -> None:
    """A new file of the home (a literal beside `home /` in the package) must be added
    to home_files above, and so to the list of docs/cli.md."""
    literal = re.compile(r'\b(?:home|_dir\(home\))\s*/\s*"([^"]+)"')
    names = set()
    for source in (ROOT / "agenthost").rglob("*.py"):
        names |= set(literal.findall(source.read_text()))
    parts = {part.rstrip("/") for t in made for part in t.split("/")}
    assert names and names <= parts, sorted(names - parts)


@pytest.mark.parametrize(
    "text",
    [
        "`<home>/config.tmol`",
        "In `~/.agenthost/config.toml`",
        "the home is `$AGENTHOST_HOME`, else `~/.agenthost`",
        "`<home>/host/<id>.sock`",
        "`web/token.json`",
        "`~/.local/state/agenthost/journals/x`",
        "/home/me/.local/state/agenthost/daemon.pid",
        "`<home>/daemon.db-log`",
    ],
)
def test_a_wrong_path_is_caught(
    text: str, made: set[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The scan itself: each of these wrong paths is found."""
    doc = tmp_path / "wrong.md"
    doc.write_text(f"Some text {text}.\n")
    default = the_default_home(monkeypatch)
    assert wrong_homes([doc], default) + wrong_files([doc], default, made), text


def test_right_paths_pass(made: set[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    doc = tmp_path / "right.md"
    doc.write_text(
        "`<home>/hosts/<id>.sock`, `<home>/hosts/web-1.sock`, `<home>/worktrees/<agent id>`,\n"
        "`<home>/journal/<agent_id>/00000000000000104857.jsonl`, `<home>/daemon.db-wal`,\n"
        "~/.local/state/agenthost/config.toml and `~/.config/agenthost/hook.secret`;\n"
        "`web/tokens.json`, `hosts/ID.lock`, `daemon.lock`, `<home>/web/secret`.\n"
    )
    default = the_default_home(monkeypatch)
    assert wrong_homes([doc], default) + wrong_files([doc], default, made) == []
