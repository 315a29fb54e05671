# Two entry points matter (see README): `make demo` and `make test`.
# Both create the virtualenv .venv on first use; nothing needs installing by hand.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench bench-daemon reliability soak clean e2e-clis

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

## Run the built-in demo agent in a host and attach to it (Ctrl-C detaches).
demo: $(STAMP)
	$(VENV)/bin/agenthost demo

## Everything CI checks: lint, types, the whole test suite.
test: lint typecheck
	$(PY) -m pytest

## Install (or find, in ~/.cache/agenthost-e2e) the real Claude Code and Codex CLIs.
e2e-clis: $(STAMP)
	$(PY) tests/e2e/clis.py

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(STAMP)
	$(PY) -m mypy

## The throughput / latency / memory / start-up harness and the goals of issue 8
## (writes docs/performance.md and its plots, docs/img/*.png; three to five minutes).
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

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
