# Two entry points matter (see README): `make demo` and `make test`.
# Both create the virtualenv .venv on first use; nothing needs installing by hand.
# `make demo` installs the package and its runtime dependencies only (about 70 MB);
# `make test` and the other development targets add the test and bench extras
# (pytest, mypy, ruff, Playwright, matplotlib, ...: about 530 MB).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The package alone (what `make demo` needs) ...
PACKAGE_STAMP := $(VENV)/.package
# ... and the whole development environment on top of it (the name every script and
# brief knows: `make .venv/.installed` gives an environment that runs the tests).
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench bench-daemon reliability soak clean e2e-clis \
	install uninstall vendor-xterm

# `make install` puts the command on the user's PATH: a virtualenv of its own under
# $(PREFIX)/share/agenthost (a regular, byte-compiled install of this checkout, so it keeps
# working when .venv/ is removed) and a link $(PREFIX)/bin/agenthost.
PREFIX ?= $(HOME)/.local
INSTALL_VENV := $(PREFIX)/share/agenthost/venv

$(PACKAGE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	@# An editable install is never byte-compiled by pip, and where PYTHONDONTWRITEBYTECODE
	@# is set nothing ever writes the .pyc files: compile once here (a start of the CLI or
	@# a host then skips compiling every module it imports).
	$(PY) -m compileall -q agenthost
	touch $(PACKAGE_STAMP)

$(STAMP): $(PACKAGE_STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

## The page's terminal (xterm.js and its fit addon) again from the npm registry with
## `npm pack`, each tarball checked against the SHA-512 pinned in
## agenthost/web/static/vendor/xterm/VERSIONS.json. Another version:
## `$(PY) scripts/vendor_xterm.py --xterm X --fit Y`.
vendor-xterm: $(PACKAGE_STAMP)
	$(PY) scripts/vendor_xterm.py

## Run the built-in demo agent in a host and attach to it (Ctrl-] detaches).
## Needs only the package: a first `make demo` installs nothing for the tests.
demo: $(PACKAGE_STAMP)
	$(VENV)/bin/agenthost demo

## Everything CI checks: lint, types, the whole test suite.
test: lint typecheck
	$(PY) -m pytest

## Install (or find, in ~/.cache/agenthost-e2e) the real agent CLIs: Claude Code, Codex, and
## the ACP agents (claude-agent-acp, codex-acp, Gemini CLI).
e2e-clis: $(STAMP)
	$(PY) tests/e2e/clis.py

## Style, and the layering contracts of pyproject.toml ([tool.importlinter]).
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) tests/layers.py

typecheck: $(STAMP)
	$(PY) -m mypy

## The throughput / latency / memory / start-up harness and the goals of issues 15 and 8
## (writes docs/performance.md and its plots, docs/img/*.png; four to six minutes).
bench: $(STAMP)
	$(PY) benchmarks/run.py

## How long a restarted daemon takes to rediscover and reattach 10/50/100 hosts
## (writes the figures into docs/daemon.md).
bench-daemon: $(STAMP)
	$(PY) benchmarks/daemon.py

## The reliability tests with their figures (docs/reliability.md), soak variants included;
## figures also go to benchmarks/results/reliability.jsonl.
reliability: $(STAMP)
	AGENTHOST_FIGURES=benchmarks/results/reliability.jsonl $(PY) -m pytest tests/reliability -m "soak or not soak"

## Only the long soak variants (minutes).
soak: $(STAMP)
	AGENTHOST_FIGURES=benchmarks/results/reliability.jsonl $(PY) -m pytest tests/reliability -m soak

## Install the `agenthost` command for this user: $(PREFIX)/bin/agenthost
## (PREFIX defaults to ~/.local; ~/.local/bin is on PATH on most distributions).
install:
	$(PYTHON) -m venv --clear $(INSTALL_VENV)
	$(INSTALL_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(INSTALL_VENV)/bin/python -m pip install --quiet .
	mkdir -p $(PREFIX)/bin
	ln -sfn $(INSTALL_VENV)/bin/agenthost $(PREFIX)/bin/agenthost
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; \
	  *) echo "note: $(PREFIX)/bin is not on your PATH; add it, e.g. in ~/.profile:" \
	          'export PATH="$(PREFIX)/bin:$$PATH"' ;; esac
	@echo "installed: $(PREFIX)/bin/agenthost"

uninstall:
	rm -f $(PREFIX)/bin/agenthost
	rm -rf $(PREFIX)/share/agenthost

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache
