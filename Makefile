# Two entry points for a fresh machine: `make demo` (set up, build the bundled example) and
# `make test` (set up, run every test). Both create .venv from pyproject.toml first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ROOT ?= ./corpus-data
CONFIG ?= examples/tiny.toml

.PHONY: setup demo test lint

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/corpus build $(CONFIG) --root $(ROOT)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: setup
	bash scripts/test-deps.sh
	$(MAKE) lint
	HF_HUB_OFFLINE=1 $(BIN)/pytest -q --durations=25
