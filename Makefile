# The README's commands are these targets; each installs what it needs into .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint typecheck bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch is pinned to the CPU build first, so the [agents] extra does not pull a CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[all]"
	# BFCL's data, checkers and backends, without its pinned numpy and vendor SDKs.
	$(PY) -m pip install -q --no-deps bfcl-eval==2026.3.23
	# lm-eval's IFEval checkers (the Instruct-v0 conformance tests), without its model stack.
	$(PY) -m pip install -q --no-deps lm-eval==0.4.13
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m llmgym.cli demo

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(STAMP)
	$(PY) -m mypy

test: lint typecheck
	$(PY) -m pytest -n 2 -q

bench: $(STAMP)
	for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist *.egg-info
