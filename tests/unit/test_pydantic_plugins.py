"""Pydantic's plugin lookup is skipped only when no distribution declares a plugin:
the same plugins are loaded with or without :mod:`agenthost.pydanticplugins`.

The checks of processes run in a fresh interpreter (in this one, pydantic has long
looked its plugins up), with real distributions on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from importlib.machinery import PathFinder
from pathlib import Path

import pytest

from agenthost.pydanticplugins import declares_plugin, may_have_plugins

PLUGIN = """
class Plugin:
    def new_schema_validator(self, *args, **kwargs):
        return None, None, None

plugin = Plugin()
"""


def distribution(site: Path, name: str, entry_points: str | None) -> None:
    """A minimal installed distribution ``name`` 1.0 in ``site``."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)


def after_a_model_build(site: Path) -> dict[str, bool]:
    """Build one of our models in a fresh interpreter with ``site`` on its path."""
    code = (
        "import json, sys\n"
        "from agenthost.protocol import StatusResponse\n"
        "StatusResponse.model_rebuild()\n"
        "print(json.dumps({'metadata': 'importlib.metadata' in sys.modules,"
        " 'plugin': 'fakeplugin' in sys.modules}))"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=60,
    ).stdout
    result: dict[str, bool] = json.loads(out.splitlines()[-1])
    return result


def test_without_a_plugin_pydantic_does_not_look_for_one(tmp_path: Path) -> None:
    distribution(tmp_path, "other", "[console_scripts]\nother = other:main\n")
    assert after_a_model_build(tmp_path) == {"metadata": False, "plugin": False}


def test_an_installed_plugin_is_still_loaded(tmp_path: Path) -> None:
    distribution(tmp_path, "fakeplugin", "[pydantic]\nfake = fakeplugin:plugin\n")
    (tmp_path / "fakeplugin.py").write_text(PLUGIN)
    assert after_a_model_build(tmp_path) == {"metadata": True, "plugin": True}


@pytest.mark.parametrize(
    ("text", "declares"),
    [
        ("[pydantic]\nx = y:z\n", True),
        ("[console_scripts]\na = b:c\n\n  [pydantic]  \nx = y:z\n", True),
        ("[console_scripts]\npydantic = b:c\n", False),
        ("# [pydantic]\n[pydantic.v1]\n", False),
        ("", False),
        ("\x00\xff[garbage", False),
    ],
)
def test_declares_plugin(text: str, declares: bool) -> None:
    assert declares_plugin(text) is declares


def test_what_may_hold_a_plugin(tmp_path: Path) -> None:
    site = tmp_path / "site"
    distribution(site, "plain", None)
    (site / "single.egg-info").write_text("Name: single\n")  # an egg-info file
    (site / "binary-1.0.dist-info").mkdir()
    (site / "binary-1.0.dist-info" / "entry_points.txt").write_bytes(b"\xff\xfe\x00[x]")
    missing = str(tmp_path / "missing")
    assert not may_have_plugins([str(site), missing], [PathFinder])
    # a zip on the path, a finder of distributions of its own: pydantic looks itself
    archive = tmp_path / "lib.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("x.dist-info/entry_points.txt", "[pydantic]\n")
    assert may_have_plugins([str(site), str(archive)], [PathFinder])

    class Finder:
        def find_distributions(self) -> list[object]:
            return []

    assert may_have_plugins([str(site)], [PathFinder, Finder()])
    distribution(site, "plug", "[pydantic]\np = plug:p\n")
    assert may_have_plugins([str(site)], [PathFinder])
