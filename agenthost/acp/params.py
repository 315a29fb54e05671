"""Reading what an editor sends: the params of ACP requests. Sans-IO.

Every value from the editor is checked here; what is not what a method takes raises
:class:`BadParams`, which the bridge answers with INVALID_PARAMS.
"""

from __future__ import annotations

from typing import Any, Final, TypeGuard

from agenthost.acp import schema


class BadParams(Exception):
    """A request's params are not what its method takes (INVALID_PARAMS)."""


def prompt_text(blocks: Any) -> str:
    """The text sent to the agent for a prompt's content blocks: text as it is,
    resources as readable references (BadParams for images, audio, or garbage)."""
    if not isinstance(blocks, list) or not blocks:
        raise BadParams("prompt must be a non-empty list of content blocks")
    parts = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "resource_link" and isinstance(block.get("uri"), str):
            name = block.get("name")
            label = name if isinstance(name, str) and name else block["uri"]
            parts.append(f"[{label}]({block['uri']})")
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            parts.append(_resource_text(block["resource"]))
        elif kind in ("image", "audio"):
            raise BadParams(f"{kind} content is not supported: this agent takes text only")
        else:
            raise BadParams(f"not a content block this agent reads: {str(block)[:100]}")
    text = "".join(parts)
    if not text.strip():
        raise BadParams("the prompt has no text")
    return text


def _resource_text(resource: dict[str, Any]) -> str:
    uri = resource.get("uri")
    if not isinstance(uri, str):
        raise BadParams("an embedded resource needs a uri")
    text = resource.get("text")
    if not isinstance(text, str):  # a blob: the agent gets where it is
        return f"[{uri}]({uri})"
    return f'\n<context ref="{uri}">\n{text}\n</context>\n'


def resume_after(params: dict[str, Any]) -> tuple[str, int] | None:
    """Where a session/load resumes: ``_meta.agenthost.after`` (and ``epoch``)."""
    meta = optional(params, "_meta", dict)
    ours = optional(meta or {}, schema.META_KEY, dict)
    if ours is None or ours.get("after") is None:
        return None
    after, epoch = ours.get("after"), ours.get("epoch", "")
    if not is_int(after) or after < 0:
        raise BadParams("_meta.agenthost.after must be a non-negative integer")
    if not isinstance(epoch, str):
        raise BadParams("_meta.agenthost.epoch must be a string")
    return epoch, after


_TYPE_NAMES: Final[dict[type, str]] = {dict: "an object", list: "a list", str: "a string"}


def optional(params: dict[str, Any], key: str, kind: type) -> Any:
    """``params[key]``, None when absent or null; BadParams when it is not a ``kind``."""
    value = params.get(key)
    if value is not None and not isinstance(value, kind):
        raise BadParams(f"{key} must be {_TYPE_NAMES.get(kind, kind.__name__)}")
    return value


def is_int(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a JSON integer (``True`` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)
