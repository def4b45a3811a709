"""What `MemoryStateStore` keeps of pauses (a mixin sharing the store's lock and marks). Its
``_``-methods store what `CheckedStore`'s public methods have checked.

Every node sharing a memory store lives in this process, so a change of the pauses wakes
their watchers at once (`watch_pauses` is True): nothing polls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from .base import StoreClosedError
from .values import JobMark, JobPause

__all__ = ["MemoryPauses"]

log = logging.getLogger("jobscheduler.state")


class MemoryPauses:
    """Pauses in memory (see `PauseStore`)."""

    _lock: threading.Lock
    _marks: dict[str, JobMark]
    _closed: bool

    def _init_pauses(self) -> None:
        self._pauses: dict[str, JobPause] = {}
        self._pause_version = 1
        self._pause_watchers: list[Callable[[], None]] = []

    def _open_for_pauses(self) -> None:
        if self._closed:
            raise StoreClosedError("the state store is closed")

    def pauses(self) -> dict[str, JobPause]:
        with self._lock:
            return dict(self._pauses)

    def pause_of(self, job: str) -> JobPause | None:
        with self._lock:
            return self._pauses.get(job)

    def pause_version(self) -> int:
        with self._lock:
            return self._pause_version

    def watch_pauses(self, wake: Callable[[], None]) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._pause_watchers.append(wake)
        _call(wake)
        return True

    def _pause(
        self,
        jobs: list[str],
        node: str,
        paused_at: datetime,
        note: str | None,
        until: datetime | None,
    ) -> None:
        with self._lock:
            self._open_for_pauses()
            for job in jobs:
                self._pauses[job] = JobPause(
                    job=job, node=node, paused_at=paused_at, note=note, until=until
                )
            self._pause_version += 1
        self._tell()

    def _resume(self, jobs: list[str] | None) -> list[str]:
        with self._lock:
            self._open_for_pauses()
            names = list(self._pauses) if jobs is None else [j for j in jobs if j in self._pauses]
            for job in names:
                del self._pauses[job]
            for job, mark in list(self._marks.items()):
                if mark.failures and (jobs is None or job in jobs):
                    self._marks[job] = replace(mark, failures=0)
            if names:
                self._pause_version += 1
        if names:
            self._tell()
        return names

    def _count_outcome(
        self,
        job: str,
        failed: bool,
        limit: int,
        node: str,
        at: datetime,
        note: str,
        until: datetime | None,
        started: datetime | None,
    ) -> JobPause | None:
        with self._lock:
            self._open_for_pauses()
            held = self._pauses.get(job)
            if held is not None and not held.lets_count(at, started):
                return None
            mark = self._marks.get(job) or JobMark(job=job)
            failures = mark.failures + 1 if failed else 0
            made = None
            if failures >= limit:
                made = JobPause(job=job, node=node, paused_at=at, note=note, until=until)
                self._pauses[job] = made
                self._pause_version += 1
                failures = 0
            if failures != mark.failures or job not in self._marks:
                self._marks[job] = replace(mark, failures=failures)
        if made is not None:
            self._tell()
        return made

    def _prune_pauses(self, older_than: datetime) -> None:
        """Drop the pauses that ended before `older_than` (lock held: the store's prune)."""
        for job, pause in list(self._pauses.items()):
            if pause.until is not None and pause.until < older_than:
                del self._pauses[job]

    def _tell(self) -> None:
        for wake in list(self._pause_watchers):
            _call(wake)


def _call(wake: Callable[[], None]) -> None:
    try:
        wake()
    except Exception:
        log.exception("a watcher of the pauses failed")
