# All set-up happens here: a fresh machine needs only Python 3.11.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test lint bench clean

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/telapa demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --durations=15

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

# Benchmarks install the reference implementations (SB3 + torch) on demand.
bench: $(STAMP)
	$(BIN)/pip install --quiet -c requirements.lock -e ".[dev,bench]"
	$(BIN)/python benchmarks/env_throughput.py
	$(BIN)/python benchmarks/ppo_throughput.py

clean:
	rm -rf $(VENV) .pytest_cache
