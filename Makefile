# The two set-up commands of README: `make train` (train connect_four, small preset, on CPU) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUN_DIR ?= runs/connect_four

$(BIN)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

.PHONY: install train test
install: $(BIN)/.installed

train: $(BIN)/.installed
	$(BIN)/az-jax train --game connect_four --preset small --run-dir $(RUN_DIR)

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q -n 2 tests
