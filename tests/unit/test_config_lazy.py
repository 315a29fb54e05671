"""The configuration's models are built on first use, not at import: the daemon
imports :mod:`agenthost.config` at start (its notifier) and needs no configuration
before it is ready. Checked in a fresh interpreter (in this one, other tests have
built everything long ago)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agenthost import config


def loaded_after(code: str) -> dict[str, object]:
    """What a fresh interpreter says after running ``code`` (a JSON object it prints)."""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    result: dict[str, object] = json.loads(out.splitlines()[-1])
    return result


def test_importing_the_config_builds_no_model() -> None:
    seen = loaded_after(
        "import json, sys\n"
        "from agenthost import config\n"
        "print(json.dumps({'built': config.HomeConfig.__pydantic_complete__}))"
    )
    assert seen == {"built": False}


def test_the_default_and_refused_configs_are_made_once_on_first_use() -> None:
    assert config.DEFAULT_CONFIG is config.default_config() is config.DEFAULT_CONFIG
    assert config.DEFAULT_CONFIG == config.HomeConfig()
    refused = config.REFUSED_CONFIG
    assert refused is config.refused_config()
    assert refused.policy.session_grants is False and refused.notify.channels == {}
    with pytest.raises(AttributeError, match="NO_SUCH_CONFIG"):
        _ = config.NO_SUCH_CONFIG  # type: ignore[attr-defined]
