"""Recent executions, bounded in memory."""

from __future__ import annotations

import threading
from collections import deque

from ..model.execution import Execution

__all__ = ["History"]


class History:
    """The last `limit` executions overall and the last `limit` of each job.

    Oldest first. Memory is bounded: `limit` records overall plus `limit` per job name.
    """

    def __init__(self, limit: int = 1000) -> None:
        if limit < 1:
            raise ValueError(f"history limit must be at least 1, not {limit}")
        self._limit = limit
        self._all: deque[Execution] = deque(maxlen=limit)
        # Lists, not deques: most jobs have a few records, and an empty deque costs 600 bytes.
        self._by_job: dict[str, list[Execution]] = {}
        self._lock = threading.Lock()

    def record(self, execution: Execution) -> None:
        name = execution.job_name
        with self._lock:
            self._all.append(execution)
            per_job = self._by_job.get(name)
            if per_job is None:
                self._by_job[name] = [execution]
            else:
                per_job.append(execution)
                if len(per_job) > self._limit:
                    del per_job[0]

    def recent(self, name: str | None = None, limit: int = 100) -> list[Execution]:
        """The most recent executions (of job `name`, or of all), oldest first."""
        if limit <= 0:
            return []
        with self._lock:
            if name is None:
                items = list(self._all)
            elif name in self._by_job:
                items = list(self._by_job[name])
            else:  # a removed job: what the overall record still holds
                items = [e for e in self._all if e.job_name == name]
        return items[-limit:]
