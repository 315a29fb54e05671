"""Every Python process of ours starts with ``-P`` (agenthost/pyargv.py), and nothing in
the package builds such a command line by itself (tests/integration/test_hostile_cwd.py
shows the processes at work in a directory with a planted ``agenthost/``)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from agenthost.agents.demo import DemoAdapter
from agenthost.hostoptions import HostOptions
from agenthost.pyargv import module_argv

PACKAGE = Path(__file__).resolve().parents[2] / "agenthost"


def test_module_argv_keeps_the_working_directory_off_the_path() -> None:
    assert module_argv("agenthost", "serve", "--x") == [
        sys.executable,
        "-P",
        "-m",
        "agenthost",
        "serve",
        "--x",
    ]


def test_hosts_and_the_demo_agent_use_it() -> None:
    options = HostOptions(agent_id="a1", home=Path("/h"))
    assert options.command_line()[:4] == module_argv("agenthost")
    assert DemoAdapter().build_command([])[:4] == module_argv("agenthost.agents.demo_agent")


def uses_of_sys_executable(path: Path) -> list[int]:
    """The lines of ``path`` that read ``sys.executable``."""
    tree = ast.parse(path.read_text(), str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "executable"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    ]


def test_no_other_module_builds_a_python_command_line() -> None:
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "pyargv.py" and (lines := uses_of_sys_executable(path))
    }
    assert found == {}, "start our Python with agenthost.pyargv.module_argv"


def test_the_check_sees_a_use(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("import sys\nargv = [sys.executable, '-m', 'agenthost']\n")
    assert uses_of_sys_executable(sample) == [2]
