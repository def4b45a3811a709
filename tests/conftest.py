"""Shared test set-up."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from pg_server import PgServer, start
from state_stores import NEEDS_PG, STORES, MakeStore

from jobscheduler.clock import FakeClock
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import StateStore

# Hypothesis judges an example by what it finds, never by how long it took: CI shares two
# cores with everything else, and a deadline there fails a correct test now and then.
settings.register_profile(
    "shared-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("shared-machine")


@pytest.fixture(autouse=True)
def _restore_root_logging() -> Iterator[None]:
    """The command line configures the root logger (as a program should); undo it after
    each test, so one test's logging set-up never changes what another captures."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def scheduler(clock: FakeClock) -> Iterator[Scheduler]:
    """A `Scheduler` in memory with 4 workers on the test file's `clock` fixture (each file
    starts its clock where its tests need it); a file may define its own."""
    s = Scheduler(clock=clock, max_workers=4)
    yield s
    s.shutdown(wait=False)


@pytest.fixture(params=sorted(STORES))
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """Opens stores of one implementation of `STORES` (the test runs once per store)."""
    pg = request.getfixturevalue("pg_server") if request.param in NEEDS_PG else None
    maker = MakeStore(request.param, STORES[request.param], tmp_path, pg)
    yield maker
    maker.close()


@pytest.fixture
def store(make_store: MakeStore) -> StateStore:
    """A new, empty store of each implementation in turn."""
    return make_store()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A real, throwaway PostgreSQL server for the session (tests/pg_server.py); fails (never
    skips) when PostgreSQL is not installed: `make test` installs it."""
    server = start()
    yield server
    server.stop()
