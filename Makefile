PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_DEV := $(VENV)/.dev-installed
STAMP_RUN := $(VENV)/.run-installed

.PHONY: demo test lint typecheck pytest bench bench-cluster clean postgres chromium

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[demo]'
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(STAMP_RUN)

demo: $(STAMP_RUN)
	$(BIN)/python demo.py

lint: $(STAMP_DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check jobscheduler tests bench demo.py

typecheck: $(STAMP_DEV)
	$(BIN)/mypy

# The state store's tests start a real PostgreSQL server (tests/pg_server.py): install
# Debian's postgresql where initdb is missing (CI runs as root; elsewhere through sudo).
postgres:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then \
		echo "installing PostgreSQL (initdb is missing)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y postgresql; \
	fi

# The status page's tests drive a real headless Chromium through Playwright, using Debian's
# chromium (Playwright's own browser download is never used): install it where it is missing.
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
		echo "installing chromium (the status page's browser tests use it)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y chromium; \
	fi

# The tests run in PYTEST_WORKERS processes (pytest-xdist): most of a test's time is spent
# waiting on the daemons, servers and commands it starts, so 4 workers keep 2 cores busy.
# `--dist loadgroup` sends the tests of one `xdist_group` to one worker (a file whose tests
# share an expensive module fixture). Compiling first spares every process the tests start
# (daemons, CLI runs) compiling the package again where PYTHONDONTWRITEBYTECODE is set.
# PYTEST_WORKERS=0 runs the tests in this one process (docs/testing.md).
PYTEST_WORKERS ?= 4

pytest: $(STAMP_DEV) postgres chromium
	$(BIN)/python -m compileall -q -x '/\.venv' jobscheduler bench tests demo.py
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup

test: lint typecheck pytest

bench: $(STAMP_DEV) postgres
	$(BIN)/python bench/run_all.py

# Several nodes on PostgreSQL, jobscheduler vs APScheduler 4 (~13 min; not in run_all): the
# script creates bench/.venv-aps4 for APScheduler 4.0.0a6 when it is missing.
bench-cluster: $(STAMP_DEV) postgres
	$(BIN)/python bench/cluster.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache
