"""Shared test set-up."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from state_stores import STORES, MakeStore

from jobscheduler.state import StateStore


@pytest.fixture(autouse=True)
def _restore_root_logging() -> Iterator[None]:
    """The command line configures the root logger (as a program should); undo it after
    each test, so one test's logging set-up never changes what another captures."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(params=sorted(STORES))
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """Opens stores of one implementation of `STORES` (the test runs once per store)."""
    maker = MakeStore(request.param, STORES[request.param], tmp_path)
    yield maker
    maker.close()


@pytest.fixture
def store(make_store: MakeStore) -> StateStore:
    """A new, empty store of each implementation in turn."""
    return make_store()
