"""The package's public names: all of them importable, none loaded before use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import agenthost


@pytest.mark.parametrize("name", sorted(agenthost.__all__))
def test_every_public_name_resolves(name: str) -> None:
    value = getattr(agenthost, name)
    assert value is not None
    # Resolved names are cached in the module, so the second lookup is the same object.
    assert getattr(agenthost, name) is value


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        agenthost.no_such_thing  # type: ignore[attr-defined]  # noqa: B018


def test_dir_lists_the_public_api() -> None:
    assert set(agenthost.__all__) <= set(dir(agenthost))


def test_importing_the_package_loads_neither_client_nor_asyncio() -> None:
    # A fresh interpreter: this one has long since imported everything.
    code = (
        "import sys, agenthost, agenthost.errors\n"
        "print(sorted(m for m in ('asyncio', 'agenthost.client', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"
