"""Each adapter says whether its output is structured; the attach session asks the
adapter of the agent's kind (no list of its own)."""

from __future__ import annotations

import subprocess
import sys

from agenthost.agents import AGENT_KINDS, adapter_class, structured_output


def test_the_adapters_say_whether_their_output_is_structured() -> None:
    assert {kind: structured_output(kind) for kind in AGENT_KINDS} == {
        "acp": True,
        "claude": True,
        "codex": True,
        "demo": True,
        "lines": False,
        "pty": False,
    }
    for kind in AGENT_KINDS:
        cls = adapter_class(kind)
        assert cls is not None and cls.structured is structured_output(kind)
    assert structured_output(None) is False and structured_output("nope") is False


def test_the_session_asks_the_adapter() -> None:
    from agenthost.cli import session

    assert not hasattr(session, "STRUCTURED_BACKENDS")
    attach = session.AttachSession(
        "a1", session.Path("/tmp"), start=session.Start(), follow=True, as_json=True
    )
    attach.backend = "lines"
    assert attach.interrupt_signals
    attach.backend = "codex"
    assert not attach.interrupt_signals


def test_asking_loads_only_that_kinds_adapter() -> None:
    code = (
        "import sys\n"
        "from agenthost.agents import structured_output\n"
        "structured_output('lines')\n"
        "print(','.join(m for m in sys.modules if m.startswith('agenthost.agents.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    # (programs: where an agent's program is, which every adapter names; pure and small)
    base = {"agenthost.agents.base", "agenthost.agents.programs"}
    assert set(out.strip().split(",")) == {*base, "agenthost.agents.lines"}
