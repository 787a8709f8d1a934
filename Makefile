# Footfall — the two commands are `make run` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
DATA ?= ./footfall-data

.PHONY: install run test test-unit bench clean services-start services-stop

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/footfall serve --host $(HOST) --port $(PORT) --data $(DATA)

# Starts local Kafka and Redis (deploy/local) unless FOOTFALL_KAFKA_BOOTSTRAP /
# FOOTFALL_REDIS_URL already name them, runs the whole suite, stops what it started.
test: install
	@set -euo pipefail; \
	started=""; \
	if [ -z "$${FOOTFALL_KAFKA_BOOTSTRAP:-}" ] || [ -z "$${FOOTFALL_REDIS_URL:-}" ]; then \
	  env_out="$$(deploy/local/services.sh start)" || exit 1; eval "$$env_out"; started=1; \
	fi; \
	trap '[ -n "$$started" ] && deploy/local/services.sh stop >&2 || true' EXIT; \
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: install
	$(PY) -m pytest tests/unit tests/oracle $(PYTEST_ARGS)

bench: install
	$(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
