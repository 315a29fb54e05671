"""The published JSON Schema (docs/schema/) is what the models say, and it is usable."""

from __future__ import annotations

import difflib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agenthost.cli import cli
from agenthost.cli.schema import schema_texts
from agenthost.daemon.protocol import DAEMON_MESSAGES
from agenthost.protocol import HOST_MESSAGES

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schema"
REGENERATE = "agenthost schema --out docs/schema"


@pytest.mark.parametrize("name", ["host.json", "daemon.json"])
def test_the_checked_in_schema_matches_the_models(name: str) -> None:
    path = SCHEMA_DIR / name
    want = schema_texts()[name]
    have = path.read_text(encoding="utf-8") if path.exists() else ""
    if have != want:
        diff = "".join(
            difflib.unified_diff(
                have.splitlines(keepends=True),
                want.splitlines(keepends=True),
                f"docs/schema/{name} (checked in)",
                f"docs/schema/{name} (from the models)",
                n=2,
            )
        )
        pytest.fail(
            f"docs/schema/{name} differs from the models: the protocol changed. If that "
            f"is intended, run `{REGENERATE}` and commit the file.\n{diff[:4000]}",
            pytrace=False,
        )


def test_every_message_and_frame_is_described() -> None:
    for table in (HOST_MESSAGES, DAEMON_MESSAGES):
        doc = table.json_schema()
        assert doc["$schema"].endswith("2020-12/schema") and doc["version"] == table.version
        assert set(doc["messages"]) == {str(t) for t in table.types}
        assert set(doc["frames"]) == set(table.frames)
        defs = doc["$defs"]
        refs = [doc["request"], *doc["frames"].values()]
        for message in doc["messages"].values():
            refs += [r for r in (message["request"], message["response"]) if r is not None]
        for ref in refs:
            assert ref["$ref"].removeprefix("#/$defs/") in defs
    host = HOST_MESSAGES.json_schema()
    assert host["messages"]["host.detach"]["response"] is None
    assert host["messages"]["host.respond"]["since"] == "1.1"
    assert "since" not in host["messages"]["host.ping"]
    assert "unknown_type" in host["error_codes"]
    event = host["$defs"]["StreamEvent"]
    assert event["properties"]["timestamp"] == {
        "format": "date-time",
        "title": "Timestamp",
        "type": "string",
    }
    assert sorted(event["required"]) == event["required"]
    assert "notice" in DAEMON_MESSAGES.json_schema()["frames"]
    assert "notice_type" in DAEMON_MESSAGES.json_schema()["values"]


def test_the_documents_are_stable_text() -> None:
    first, second = schema_texts(), schema_texts()
    assert first == second
    for text in first.values():
        assert text.endswith("}\n") and not text.endswith("\n\n")
        assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"


def test_the_command_prints_and_writes(tmp_path: Path) -> None:
    runner = CliRunner()
    one = runner.invoke(cli, ["schema", "daemon"])
    assert one.exit_code == 0, one.output
    assert one.output == schema_texts()["daemon.json"]
    both = runner.invoke(cli, ["schema"])
    assert both.exit_code == 0, both.output
    assert set(json.loads(both.output)) == {"host", "daemon"}

    out = tmp_path / "new" / "schema"
    wrote = runner.invoke(cli, ["schema", "--out", str(out)])
    assert wrote.exit_code == 0, wrote.output
    assert sorted(p.name for p in out.iterdir()) == ["daemon.json", "host.json"]
    assert (out / "host.json").read_text(encoding="utf-8") == schema_texts()["host.json"]
    again = runner.invoke(cli, ["schema", "--out", str(out)])
    assert again.output.count("up to date") == 2

    blocked = tmp_path / "file"
    blocked.write_text("")
    failed = runner.invoke(cli, ["schema", "--out", str(blocked / "schema")])
    assert failed.exit_code == 1 and "cannot write the schema" in failed.output
    assert runner.invoke(cli, ["schema", "--out", str(blocked)]).exit_code == 2  # a file


def test_schema_help_loads_no_model() -> None:
    code = (
        "import sys\n"
        "from agenthost.cli import main\n"
        "sys.argv = ['agenthost', 'schema', '--help']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('LOADED', ','.join(m for m in ('pydantic', 'agenthost.protocol')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "Usage: agenthost schema" in out
    assert out.rstrip().endswith("LOADED")
