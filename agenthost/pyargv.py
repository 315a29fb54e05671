"""The command line of a Python process of ours: ``python -P -m MODULE ARGS``.

Every process agenthost starts of its own code is ``sys.executable -m MODULE``: a host
started by ``serve --detach``, the daemon that ``run`` starts, a host the daemon execs,
an exec'd host factory, the demo agent. Plain ``-m`` puts the directory the process
starts in first on ``sys.path``, and these start in directories we do not choose: where
the user typed the command, the agent's project, the home. An ``agenthost/`` folder
there (any clone of a repository that has one) would be imported instead of the
installed package, and run with the user's rights.

``-P`` (Python 3.11's ``safe_path``) leaves that directory out and changes nothing
else. Not ``-I`` (isolated mode): it also drops the user's site-packages, where ``pip
install --user`` puts agenthost, and ignores every ``PYTHON*`` variable (a
``PYTHONPATH`` that points at a checkout, the demo agent's ``PYTHONUNBUFFERED``). Not
``PYTHONSAFEPATH=1`` in the environment either: the agents inherit the host's
environment, and their Python is their own business.

The ``agenthost`` console script needs nothing: its ``sys.path[0]`` is its bin
directory. An empty or relative entry in the user's own ``PYTHONPATH`` still names the
working directory, for every Python program they run, ours included (docs/operations.md).
"""

from __future__ import annotations

import sys
from typing import Final

SAFE_PATH: Final = "-P"
"""The interpreter option that keeps the working directory off ``sys.path``."""


def module_argv(module: str, *args: str) -> list[str]:
    """``python -P -m MODULE ARGS`` with the interpreter running us."""
    return [sys.executable, SAFE_PATH, "-m", module, *args]


def interpreter() -> str:
    """The interpreter our processes run with (what a sandbox must hold to start them)."""
    return sys.executable
