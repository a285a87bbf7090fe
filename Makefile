# Two commands: `make demo` (set up, benchmark a model, check it, write the report)
# and `make test` (lint, type-check the core, run the whole test suite).
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3
MODEL ?= dqn

.PHONY: demo test setup lint clean

# torch first and exactly this pin: the local CPU wheel (any other spec pulls a multi-GB CUDA build)
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[pipeline,dev,export,profile]"
	touch $@

setup: $(BIN)/.installed

demo: $(BIN)/.installed
	PATH="$(CURDIR)/$(BIN):$$PATH" MODEL=$(MODEL) ./scripts/demo.sh

lint: $(BIN)/.installed
	$(BIN)/ruff check perfgate tests benchmarks scripts
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: $(BIN)/.installed lint
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .perfgate .pytest_cache .mypy_cache .ruff_cache
