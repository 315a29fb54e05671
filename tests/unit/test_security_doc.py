"""docs/security.md names the tests that show each defence: every one it names exists
(a renamed or removed test would leave a defence the threat model only claims)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "security.md"
# `web/test_links.py::test_x`, `::test_y` (same file as the reference before it),
# `integration/test_hostile.py` (a whole file)
REFERENCE = re.compile(r"`((?:[\w.]+/)*test_\w+\.py)?(?:::(test_\w+))?(?:\[[^\]]*\])?`")


def references() -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    current = ""
    for match in REFERENCE.finditer(DOC.read_text()):
        path, name = match.groups()
        if path is None and name is None:
            continue
        current = path or current
        assert current, f"{match.group(0)} names no file"
        found.append((current, name))
    return found


def test_the_threat_model_names_tests() -> None:
    assert len(references()) > 60


def test_every_test_the_threat_model_names_exists() -> None:
    missing = []
    for path, name in references():
        file = ROOT / "tests" / path
        if not file.is_file():
            missing.append(path)
        elif name is not None and not re.search(
            rf"^(async )?def {name}\(", file.read_text(), re.MULTILINE
        ):
            missing.append(f"{path}::{name}")
    assert not missing, missing
