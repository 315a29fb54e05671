"""The demo agent's interrupts, in one process: an interrupt stops the running turn, or
the turn of a message queued but not started yet (it used to be lost when it came
between the message and the start of its turn), and nothing when nothing waits."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

from agenthost.agents.demo_agent import Demo


def run_turn(demo: Demo, text: str) -> list[dict[str, object]]:
    out = io.StringIO()
    with redirect_stdout(out):
        demo.turn(text)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def interrupted(lines: list[dict[str, object]]) -> bool:
    (result,) = [line for line in lines if line["type"] == "result"]
    return result["result"] == "interrupted"


def test_an_interrupt_between_a_message_and_its_turn_stops_that_turn() -> None:
    demo = Demo(pace=0.01)
    demo.queued()  # the reader queued "/sleep 600"...
    demo.interrupt()  # ...and the interrupt came before the main thread started it
    assert interrupted(run_turn(demo, "/sleep 600"))  # returns at once
    demo.queued()
    assert not interrupted(run_turn(demo, "/sleep 0"))  # the next turn is not touched


def test_an_interrupt_with_nothing_running_or_waiting_stops_nothing() -> None:
    demo = Demo(pace=0.01)
    demo.interrupt()
    demo.queued()
    assert not interrupted(run_turn(demo, "/sleep 0"))


def test_an_interrupt_during_a_turn_leaves_the_queued_message_alone() -> None:
    demo = Demo(pace=0.01)
    demo.queued()
    demo.queued()  # a second message waits behind the first
    demo._start_turn()  # the first turn runs when the interrupt comes
    demo.interrupt()
    demo._end_turn()
    assert not interrupted(run_turn(demo, "/sleep 0"))
