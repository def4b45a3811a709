"""The stores the state-store suites run over (`STORES`), and `MakeStore`, which opens them.

The fixtures `make_store` and `store` (in ``conftest.py``) run a test once per store here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pg_server import PgServer

from jobscheduler.state import MemoryStateStore, StateStore
from jobscheduler.state.postgres import PostgresStateStore
from jobscheduler.state.sqlite import SqliteStateStore

__all__ = ["STORES", "MakeStore", "StoreFactory"]

StoreFactory = Callable[..., StateStore]


def _memory(
    directory: Path, *, limit: int, output_limit: int | None, pg: PgServer | None
) -> StateStore:
    return MemoryStateStore(limit, output_limit=output_limit)


def _sqlite(
    directory: Path, *, limit: int, output_limit: int | None, pg: PgServer | None
) -> StateStore:
    # History is bounded by prune in a SQL store, not by count: `limit` does not apply.
    return SqliteStateStore(directory / "state.db", output_limit=output_limit)


def _postgres(
    directory: Path, *, limit: int, output_limit: int | None, pg: PgServer | None
) -> StateStore:
    assert pg is not None
    return PostgresStateStore(pg.fresh_schema_url(), output_limit=output_limit)


STORES: dict[str, StoreFactory] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
}

# The stores that need the session's PostgreSQL server (the fixture `pg_server`).
NEEDS_PG = {"postgres"}

# The stores whose history is bounded by count (`limit`) as it is written.
BOUNDED = {"memory"}


class MakeStore:
    """Opens stores of the implementation under test; closes them all at the end."""

    def __init__(
        self, name: str, factory: StoreFactory, directory: Path, pg: PgServer | None = None
    ) -> None:
        self.name = name
        self.pg = pg
        self.factory = factory
        self.directory = directory
        self.opened: list[StateStore] = []

    def __call__(self, *, limit: int = 1000, output_limit: int | None = 4096) -> StateStore:
        where = self.directory / f"store-{len(self.opened)}"
        where.mkdir()
        store = self.factory(where, limit=limit, output_limit=output_limit, pg=self.pg)
        self.opened.append(store)
        return store

    def close(self) -> None:
        for store in self.opened:
            store.close()
