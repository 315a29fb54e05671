"""Every link between the docs leads somewhere: the file exists, and the section an
anchor names is a heading of that file (docs/daemon.md's contents pointed at sections
that had moved, issue 28)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.MULTILINE)


def prose(text: str) -> str:
    """``text`` without its code blocks (a heading or a link in code is neither)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text (a link's label, no markup),
    lower case, without punctuation but `-` and `_`, spaces as `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    """Every anchor of ``doc``'s headings; a repeated one gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(prose(doc.read_text())):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken(doc: Path) -> list[str]:
    """The links of ``doc`` to a file that does not exist or to an anchor it lacks."""
    wrong = []
    for match in LINK.finditer(CODE.sub("", prose(doc.read_text()))):
        target = match.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            wrong.append(f"{doc.name}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            wrong.append(f"{doc.name}: {target}: no such section")
    return wrong


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_link_leads_somewhere(doc: Path) -> None:
    assert not (wrong := broken(doc)), wrong


def test_github_anchors() -> None:
    assert slug("4. The merged stream: `daemon.watch`") == "4-the-merged-stream-daemonwatch"
    assert slug("Commands without `--json`") == "commands-without---json"
    assert slug("13. Worktrees: an agent per branch") == "13-worktrees-an-agent-per-branch"
    assert slug("See [the page](web.md)") == "see-the-page"


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# One\n\n## Two: `x.y`\n\n```\n# not a heading\n```\n")
    doc.write_text(
        "[ok](b.md#two-xy) [ok](b.md) [ok](#here) `[code](nowhere.md)`\n"
        "[bad](b.md#11-limits) [bad](c.md) [bad](b.md#not-a-heading) [bad](#there)\n"
        "## Here\n"
    )
    assert len(broken(doc)) == 4, broken(doc)
