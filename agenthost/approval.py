"""What a person is asked to approve when an agent asks for a tool. Pure."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def approval_text(tool_input: str, arguments: Mapping[str, object]) -> str:
    """The command of the tool's ``arguments`` (its ``input``: an argument list quoted
    as a shell reads it), whole, else the summary ``tool_input``. (The summary is cut
    to a few hundred characters and put on one line; the input is what the agent will
    run. The page's conversation.js has the same.)"""
    for key in ("command", "cmd"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            import shlex

            return shlex.join(value)
    return tool_input
