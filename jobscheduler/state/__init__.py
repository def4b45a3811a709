"""The state store: what ran, what runs, and the history of runs (see docs/state.md).

The public names are imported when first used (PEP 562): a program that opens a SQL store
(``jobscheduler status``) does not load the memory store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_module

if TYPE_CHECKING:
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

# Where each public name lives.
_WHERE = {
    "ALERT_HOLD": ".base",
    "KEEP": ".values",
    "Beat": ".values",
    "JobMark": ".values",
    "JobPause": ".values",
    "KillStore": ".base",
    "Look": ".values",
    "MarkStore": ".base",
    "MemoryStateStore": ".memory",
    "NodeInfo": ".values",
    "NodeNameTakenError": ".base",
    "NodeStore": ".base",
    "OutboxStore": ".base",
    "PauseStore": ".base",
    "PendingAlert": ".values",
    "QueueStore": ".base",
    "QueuedRun": ".values",
    "RunRecord": ".records",
    "RunState": ".records",
    "RunStore": ".base",
    "StateStore": ".base",
    "StoreClosedError": ".base",
    "StoreError": ".base",
    "StoreUnavailableError": ".base",
    "open_store": ".open",
}


__getattr__, __dir__ = lazy_module(__name__, globals(), _WHERE)
