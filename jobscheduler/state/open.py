"""`open_store`: the state store a scheduler's ``state=`` argument names."""

from __future__ import annotations

from ..errors import Problem
from .base import StateStore, StoreError
from .urls import mask_url
from .values import DEFAULT_HISTORY_LIMIT

__all__ = ["mask_url", "open_store", "open_url"]

MEMORY = "memory"


def open_store(
    state: str | StateStore | None, *, history_limit: int = DEFAULT_HISTORY_LIMIT
) -> tuple[StateStore, bool]:
    """The store `state` names, and whether the caller opened it (and so must close it).

    - None (the default) or ``"memory"``: a new `MemoryStateStore` keeping `history_limit`
      finished runs.
    - A `StateStore` instance: used as it is; its owner closes it.
    - ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` (read as SQLAlchemy reads them):
      a `SqliteStateStore`; ``postgresql://user:pw@host:port/db`` (or
      ``postgresql+psycopg://``): a `PostgresStateStore`.
    - Anything else, or a store that cannot be opened (unreachable, a newer schema, a
      read-only file, a missing directory): a `StoreError` (a `JobActionError`), one line
      naming the URL with its password masked, for key ``state``.
    """
    if state is None or state == MEMORY:
        from .memory import MemoryStateStore  # not loaded by a program using a SQL store

        return MemoryStateStore(history_limit), True
    if isinstance(state, str):
        try:
            return open_url(state), True
        except StoreError as exc:
            raise StoreError(Problem(str(exc), key="state")) from None
    if not isinstance(state, StateStore):
        raise TypeError(
            f"state must be {MEMORY!r}, a state store URL or a StateStore, not {state!r}"
        )
    return state, False


def open_url(url: str) -> StateStore:
    """The SQL store `url` names (see `open_store`); a `StoreError` if it cannot be opened."""
    if url.startswith("sqlite:"):
        from .sqlite import SqliteStateStore

        return SqliteStateStore(url)
    if url.startswith(("postgresql://", "postgresql+psycopg://", "postgres://")):
        from .postgres import PostgresStateStore

        return PostgresStateStore(url)
    raise StoreError(
        f"state store {mask_url(url)!r} is not a store URL: use {MEMORY!r}, "
        "sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
    )
