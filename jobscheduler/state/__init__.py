"""The state store: what ran, what runs, and the history of runs (see docs/state.md)."""

from __future__ import annotations

from .base import StateStore, StoreClosedError
from .memory import MemoryStateStore
from .open import open_store
from .records import RunRecord, RunState

__all__ = [
    "MemoryStateStore",
    "RunRecord",
    "RunState",
    "StateStore",
    "StoreClosedError",
    "open_store",
]
