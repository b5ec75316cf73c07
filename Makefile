# The two set-up commands of README: `make train` (train connect_four, small preset, on CPU) and `make test` (ruff
# lint and format check, mypy, then the tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUN_DIR ?= runs/connect_four-small
APT_PACKAGES := $(shell cat .ci/apt-packages.txt 2>/dev/null)

# Installs with the exact versions of constraints.txt (the ones the suite passed with): az_jax for `make train`; the
# tests' tools and the compile-only TPU/GPU compilers (libtpu is ~0.7 GB: `make train` does without it) for `make test`.
$(BIN)/.installed: setup.cfg pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e .
	touch $@

$(BIN)/.installed-test: $(BIN)/.installed
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,preflight]'
	touch $@

.PHONY: install system-deps train check test test-latest constraints
install: $(BIN)/.installed-test

# Debian packages the tests use (GNU Go, Stockfish): installed with apt-get when missing (needs root, as in CI).
system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	fi

train: $(BIN)/.installed
	$(BIN)/az-jax train --game connect_four --preset small --run-dir $(RUN_DIR)

# The static gates first (seconds), then the tests.
check: $(BIN)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Sabaki's GTP controller (@sabaki/gtp, pinned by tests/js/package-lock.json), which drives `az-jax gtp` in the tests.
JS_DEPS := tests/js/node_modules/.package-lock.json
$(JS_DEPS): tests/js/package.json tests/js/package-lock.json
	npm ci --prefix tests/js --no-audit --no-fund

# The suite in three parts, each in fresh worker processes: in whole-suite runs (jax/jaxlib 0.10.2) an xdist worker
# that had run three quarters of the tests or more died inside XLA:CPU (a segfault or an abort while compiling or
# serialising a program), four runs in a row, each time in another test that passes alone. Every part runs; the
# target fails if one did.
TEST_PARTS := 'tests/test_a*.py' 'tests/test_[b-l]*.py' 'tests/test_[m-z]*.py'
test: check system-deps $(JS_DEPS)
	status=0; for part in $(TEST_PARTS); do $(BIN)/python -m pytest -q -n 2 $$part || status=1; done; exit $$status

# The suite against the newest releases of every dependency (no constraints), in its own environment .venv-latest.
test-latest: system-deps $(JS_DEPS)
	$(PYTHON) -m venv .venv-latest
	.venv-latest/bin/python -m pip install -q --upgrade pip
	.venv-latest/bin/python -m pip install -q --upgrade -e '.[test,preflight]'
	status=0; for part in $(TEST_PARTS); do .venv-latest/bin/python -m pytest -q -n 2 $$part || status=1; done; \
	exit $$status

# Rewrites constraints.txt from the current .venv (after `make test-latest` passed and .venv was upgraded).
constraints: $(BIN)/.installed-test
	{ head -2 constraints.txt; $(BIN)/python -m pip list --format=freeze --exclude-editable | grep -v '^#'; } > constraints.txt.tmp
	mv constraints.txt.tmp constraints.txt
