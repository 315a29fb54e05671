"""Pydantic's plugin lookup, skipped when no installed distribution offers a plugin.

The first model pydantic builds in a process has it look for plugins: it imports
``importlib.metadata`` (with email, zipfile, csv...) and reads the entry points of every
installed distribution. That is ~16 ms of CPU, paid by the daemon before it is ready
and by a host at its first request that needs a model, for plugins that are almost
never there. :func:`skip_lookup_without_plugins` looks for the ``pydantic`` entry-point
group itself, in the places ``importlib.metadata`` reads (the ``*.dist-info`` and
``*.egg-info`` directories of ``sys.path``), and only when there is none tells pydantic
"no plugins" up front. Anything it cannot see through (a zip on ``sys.path``, a
finder of distributions of its own) leaves pydantic's own lookup in place: with or
without this module, the same plugins are loaded (and ``PYDANTIC_DISABLE_PLUGINS``
disables them as before; it does not save the lookup's cost, as pydantic imports
``importlib.metadata`` with its loader whatever the variable says).
"""

from __future__ import annotations

import functools
import os
import sys
import types
from collections.abc import Iterable
from importlib.machinery import PathFinder
from typing import Any, Final

LOADER: Final = "pydantic.plugin._loader"
"""The module of pydantic (2.x) that finds the plugins: ``get_plugins()``."""

GROUP: Final = "[pydantic]"
"""The section of ``entry_points.txt`` that declares a pydantic plugin."""


def declares_plugin(text: str) -> bool:
    """Whether an ``entry_points.txt`` has a ``[pydantic]`` section."""
    return any(line.strip() == GROUP for line in text.splitlines())


def may_have_plugins(path: Iterable[str], meta_path: Iterable[Any]) -> bool:
    """Whether a distribution on ``path`` may declare a pydantic plugin (or one may come
    from a finder of ``meta_path`` whose distributions this cannot list)."""
    for finder in meta_path:
        if hasattr(finder, "find_distributions") and finder is not PathFinder:
            return True
    for entry in path:
        try:
            names = os.listdir(entry or ".")
        except NotADirectoryError:
            return True  # a zip file: importlib.metadata reads inside it
        except OSError:
            continue  # a missing directory holds no distribution
        for name in names:
            if not name.lower().endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(entry or ".", name, "entry_points.txt"), "rb") as fh:
                    text = fh.read().decode("utf-8", "replace")
            except (FileNotFoundError, NotADirectoryError):
                continue  # no entry points (an egg-info may be a single file)
            except OSError:
                return True  # unreadable: let pydantic decide
            if declares_plugin(text):
                return True
    return False


def _no_plugins() -> tuple[()]:
    return ()


@functools.cache
def skip_lookup_without_plugins() -> bool:
    """Tell pydantic there are no plugins when none is installed, before it builds a
    first model; whether it was told (False: its own lookup runs, as without this)."""
    if LOADER in sys.modules or may_have_plugins(sys.path, sys.meta_path):
        return False
    loader = types.ModuleType(LOADER, "pydantic's plugin loader: no plugin is installed")
    loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
    sys.modules[LOADER] = loader
    return True
