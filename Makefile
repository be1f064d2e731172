# Two commands set everything up on a fresh machine:
#   make setup   creates .venv, installs placer, and runs `placer optimize` on the bundled example
#   make test    runs the test suite (what .ci/run runs)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup test test-all bench

$(BIN)/placer: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all,dev]'
	touch $(BIN)/placer

setup: $(BIN)/placer
	$(BIN)/placer optimize examples/pdd-two-dc.yaml

test: $(BIN)/placer
	$(BIN)/python -m pytest -q

test-all: $(BIN)/placer
	$(BIN)/python -m pytest -q -m ''

bench: $(BIN)/placer
	$(BIN)/python bench/bench_planner.py
