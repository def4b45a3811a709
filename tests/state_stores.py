"""The stores the state-store suites run over (`STORES`), and `MakeStore`, which opens them.

The fixtures `make_store` and `store` (in ``conftest.py``) run a test once per store here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from jobscheduler.state import MemoryStateStore, StateStore

__all__ = ["STORES", "MakeStore", "StoreFactory"]

StoreFactory = Callable[..., StateStore]


def _memory(directory: Path, *, limit: int, output_limit: int) -> StateStore:
    return MemoryStateStore(limit, output_limit=output_limit)


STORES: dict[str, StoreFactory] = {
    "memory": _memory,
}


class MakeStore:
    """Opens stores of the implementation under test; closes them all at the end."""

    def __init__(self, name: str, factory: StoreFactory, directory: Path) -> None:
        self.name = name
        self.factory = factory
        self.directory = directory
        self.opened: list[StateStore] = []

    def __call__(self, *, limit: int = 1000, output_limit: int = 4096) -> StateStore:
        where = self.directory / f"store-{len(self.opened)}"
        where.mkdir()
        store = self.factory(where, limit=limit, output_limit=output_limit)
        self.opened.append(store)
        return store

    def close(self) -> None:
        for store in self.opened:
            store.close()
