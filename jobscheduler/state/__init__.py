"""The state store: what ran, what runs, and the history of runs (see docs/state.md)."""

from __future__ import annotations

from .base import (
    ALERT_HOLD,
    KillStore,
    MarkStore,
    NodeNameTakenError,
    NodeStore,
    OutboxStore,
    PauseStore,
    QueueStore,
    RunStore,
    StateStore,
    StoreClosedError,
    StoreError,
    StoreUnavailableError,
)
from .memory import MemoryStateStore
from .open import open_store
from .records import RunRecord, RunState
from .values import KEEP, Beat, JobMark, JobPause, Look, NodeInfo, PendingAlert, QueuedRun

__all__ = [
    "ALERT_HOLD",
    "KEEP",
    "Beat",
    "JobMark",
    "JobPause",
    "KillStore",
    "Look",
    "MarkStore",
    "MemoryStateStore",
    "NodeInfo",
    "NodeNameTakenError",
    "NodeStore",
    "OutboxStore",
    "PauseStore",
    "PendingAlert",
    "QueueStore",
    "QueuedRun",
    "RunRecord",
    "RunState",
    "RunStore",
    "StateStore",
    "StoreClosedError",
    "StoreError",
    "StoreUnavailableError",
    "open_store",
]
