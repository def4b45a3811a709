PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_DEV := $(VENV)/.dev-installed
STAMP_RUN := $(VENV)/.run-installed

.PHONY: demo test lint typecheck pytest bench clean postgres

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

pytest: $(STAMP_DEV) postgres
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

bench: $(STAMP_DEV) postgres
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache
