# Footfall — the two commands are `make run` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUNTIME := $(VENV)/.runtime-installed
TESTDEPS := $(VENV)/.test-installed
HOST ?= 127.0.0.1
PORT ?= 8000
DATA ?= ./footfall-data
# pytest-xdist processes for the parallel phase of `make test`: one more than the 2 cores here,
# since many tests wait on subprocesses and sockets (clean-clone .ci/run: 13:41 wall with 3, 14:59 with 2).
TEST_WORKERS ?= 3
TYPECHECK := build/typecheck/footfall

.PHONY: install install-test run test test-unit lint bench clean browser

# `make run` needs the runtime dependencies only; pip prints each package as it goes.
# The /import fast path's Rust extension (shared/events/fastpath) is built by `pip install`:
# a change to its sources re-installs (cargo rebuilds only what changed).
# rustup installs cargo in ~/.cargo/bin, which a non-login shell may not have on its PATH.
export PATH := $(HOME)/.cargo/bin:$(PATH)
FASTPATH := shared/events/fastpath/Cargo.toml shared/events/fastpath/Cargo.lock $(wildcard shared/events/fastpath/src/*.rs)

$(RUNTIME): pyproject.toml setup.py $(FASTPATH)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "make: installing Footfall and its runtime dependencies into $(VENV) ..."
	$(PY) -m pip install --upgrade --progress-bar on pip
	$(PY) -m pip install --progress-bar on -e .
	@touch $(RUNTIME)

# `make test` adds the test and lint tools.
$(TESTDEPS): $(RUNTIME)
	@echo "make: installing the test and lint tools ..."
	$(PY) -m pip install --progress-bar on -e '.[test]'
	@touch $(TESTDEPS)

install: $(RUNTIME)

install-test: $(TESTDEPS)

run: install
	$(VENV)/bin/footfall serve --host $(HOST) --port $(PORT) --data $(DATA)

# The gates: ruff (lint + format) and mypy --strict over the installed names
# (footfall.shared, footfall.services) through a link tree of the two folders.
lint: install-test
	@mkdir -p $(TYPECHECK)
	@ln -sfn ../../../shared $(TYPECHECK)/shared
	@ln -sfn ../../../services $(TYPECHECK)/services
	@ln -sfn ../../../testing $(TYPECHECK)/testing
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# Runs the gates, starts local Kafka and Redis (deploy/local) unless FOOTFALL_KAFKA_BOOTSTRAP /
# FOOTFALL_REDIS_URL already name them, runs the whole suite, stops what it started.
# The `serial` tests stop and restart Kafka or Redis, so they never share a pair with the
# parallel phase: when this target starts the services itself it starts a second pair
# (SERIAL_RUN_DIR, ports below) and runs the serial tests on it beside the parallel phase
# (they mostly wait on restarts; their output follows the parallel phase's); with services
# given through the environment they run after the parallel phase, on those.
# The web UI's browser tests (tests/e2e/test_ui_browser.py) drive Debian's `chromium`:
# installed here when it is missing and we are root (CI); otherwise those tests skip locally.
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: installing chromium for the browser tests ..."; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else echo "make: chromium is missing and we are not root: the browser tests will skip"; fi; \
	fi

SERIAL_RUN_DIR := deploy/local/.run-serial
SERIAL_ENV := FOOTFALL_LOCAL_RUN_DIR=$(CURDIR)/$(SERIAL_RUN_DIR) FOOTFALL_LOCAL_KAFKA_PORT=19192 \
	FOOTFALL_LOCAL_KAFKA_CONTROLLER_PORT=19193 FOOTFALL_LOCAL_REDIS_PORT=16479

test: lint browser
	@set -euo pipefail; \
	started=""; serial_started=""; serial_pid=""; env_out=""; \
	stop_all() { \
	  if [ -n "$$serial_pid" ]; then kill "$$serial_pid" 2>/dev/null || true; fi; \
	  if [ -n "$$started" ]; then deploy/local/services.sh stop >&2 || true; fi; \
	  if [ -n "$$serial_started" ]; then env $(SERIAL_ENV) deploy/local/services.sh stop >&2 || true; fi; \
	}; \
	trap stop_all EXIT; \
	if [ -z "$${FOOTFALL_KAFKA_BOOTSTRAP:-}" ] || [ -z "$${FOOTFALL_REDIS_URL:-}" ]; then \
	  env_out="$$(deploy/local/services.sh start)" || exit 1; started=1; \
	fi; \
	if [ -z "$${FOOTFALL_KAFKA_BOOTSTRAP:-}" ] && [ -z "$${FOOTFALL_REDIS_URL:-}" ]; then \
	  serial_out="$$(env $(SERIAL_ENV) deploy/local/services.sh start)" || exit 1; serial_started=1; \
	  echo "make: the serial tests (they stop and restart Kafka or Redis) run on a second pair, beside the parallel phase"; \
	  mkdir -p build; \
	  ( eval "$$serial_out"; export $(SERIAL_ENV); \
	    exec $(PY) -m pytest -p no:cacheprovider -m serial $(PYTEST_ARGS) ) > build/serial-tests.log 2>&1 & \
	  serial_pid=$$!; \
	fi; \
	eval "$$env_out"; \
	rc=0; \
	$(PY) -m pytest -n $(TEST_WORKERS) -m "not serial" --durations=25 $(PYTEST_ARGS) || rc=$$?; \
	s=0; \
	if [ -n "$$serial_pid" ]; then \
	  wait "$$serial_pid" || s=$$?; serial_pid=""; \
	  echo "make: the serial phase's output"; cat build/serial-tests.log; \
	else \
	  echo "make: the serial phase (tests that stop and restart Kafka or Redis)"; \
	  $(PY) -m pytest -m serial $(PYTEST_ARGS) || s=$$?; \
	fi; \
	[ $$s -eq 0 ] || [ $$s -eq 5 ] || rc=$$s; \
	exit $$rc

test-unit: install-test
	$(PY) -m pytest tests/unit tests/oracle -n 2 $(PYTEST_ARGS)

bench: install-test
	$(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
