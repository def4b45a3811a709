"""The `overlap` policy: what a scheduled slot does when it comes while its job is busy.

A job is *busy* when its runs queued or running reach its instance limit (`max_instances`,
or 1 without one). A job whose `overlap` is ``allow`` (the default) never gets here: the
timeline's `_admit` asks `OverlapGate.busy_slot` only for a busy job with another policy,
so the policy costs a job without one nothing.

- ``skip``: the slot is not run. It is reported as NOT_STARTED with the reason `SKIPPED`
  (the one marker the scheduler looks for): the scheduler records it in state ``skipped``,
  with no event and no alert.
- ``queue``: the first such slot waits (one run, *held* here, off the ready queue) until a
  run of the job ends; slots coming while one waits are skipped.
- ``replace``: the running runs of the job are stopped with the reason "replaced" (TERM,
  then KILL after the job's `kill_grace`, as `stop_job` does: each ends FAILED, reason
  "replaced"), and the slot's run is held until they have ended; slots coming meanwhile are
  skipped.

A held run is released (queued to start) by `release` when a run of its job has been
reported (`WorkerPool.report`), or when the job's next slot is dispatched and finds it idle
(a run dropped by another node's claim is never reported). A held run of a job removed or
paused meanwhile ends NOT_STARTED ("job removed", "job paused").

Every method of `OverlapGate` is called with the processor's lock held.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Final, Protocol

from ..engine.jobstate import JobState
from ..model.execution import Execution
from ..model.job import Job

if TYPE_CHECKING:
    from ..engine.notices import NoticeThread
    from ..engine.ready import ReadyQueue

__all__ = ["REPLACED", "SKIPPED", "OverlapGate", "is_busy", "release_held"]

SKIPPED: Final = "skipped: the job was still running (overlap)"
"""The reason of a slot skipped by `overlap` (compared by identity: the marker itself)."""

REPLACED: Final = "replaced"


def is_busy(job: Job, state: JobState) -> bool:
    """Whether `job` has as many runs queued or running as its limit (lock held)."""
    act = state.act
    if act is None:
        return False
    limit = job.max_instances
    return len(act.runs) >= (limit if limit is not None else 1)


class _Queue(Protocol):
    """What the gate needs of its `timeline.RunQueue` (not imported: it imports this)."""

    @property
    def ready(self) -> ReadyQueue: ...
    @property
    def overlap(self) -> OverlapGate: ...
    @property
    def notices(self) -> deque[tuple[Job, Execution]]: ...
    def admit(
        self,
        state: JobState,
        job: Job,
        slot: datetime | None,
        due: datetime,
        due_us: int,
        trigger: str,
        now: datetime,
    ) -> int: ...


class OverlapGate:
    """The held runs of `queue` and `replace`, and the stops `replace` asks for."""

    def __init__(self, queue: _Queue) -> None:
        self._queue = queue
        # job name -> (its state, the definition, the slot, the slot in µs): one per job.
        self.held: dict[str, tuple[JobState, Job, datetime, int]] = {}
        # Stops the running runs of a job (`WorkerPool.stop_runs`, which takes the lock).
        self.stopper: Callable[[str, str], object] | None = None
        self.skipped = 0  # slots skipped by `skip`, or while a run was held

    def busy_slot(
        self, state: JobState, job: Job, slot: datetime, due_us: int, now: datetime
    ) -> int:
        """A scheduled `slot` of the busy `job` (its policy is not ``allow``); returns the runs
        queued (always 0: a run is held, or the slot skipped)."""
        name = job.name
        if job.overlap == "skip" or name in self.held:
            self.skip(job, slot, now)
            return 0
        self.held[name] = (state, job, slot, due_us)
        if job.overlap == "replace" and self.stopper is not None:
            # Stopping takes the lock held here: a short thread does it once it is free
            # (`replace` is rare; a thread start does not wait for the lock).
            threading.Thread(
                target=self.stopper, args=(name, REPLACED), name="jobscheduler-replace", daemon=True
            ).start()
        return 0

    def skip(self, job: Job, slot: datetime | None, now: datetime) -> None:
        """Report `slot` skipped (NOT_STARTED, reason `SKIPPED`: see the module notes)."""
        self.skipped += 1
        self._queue.ready.refuse(job, slot, "schedule", now, SKIPPED)

    def drop_all(self, now: datetime, reason: str) -> int:
        """Every held run ends NOT_STARTED with `reason` (the processor stops or shuts
        down); returns how many."""
        held, self.held = self.held, {}
        for _state, job, slot, _due in held.values():
            self._queue.ready.refuse(job, slot, "schedule", now, reason)
        return len(held)

    def release(self, name: str, now: datetime) -> int:
        """Queue job `name`'s held run if the job is no longer busy; returns the runs queued."""
        held = self.held.get(name)
        if held is None:
            return 0
        state, job, slot, due_us = held
        if is_busy(job, state):
            return 0
        del self.held[name]
        current = state.job
        if not state.registered or not current.enabled:
            reason = "job removed" if not state.registered else "job paused"
            self._queue.ready.refuse(job, slot, "schedule", now, reason)
            return 0
        return self._queue.admit(state, current, slot, slot, due_us, "schedule", now)


class _Pool(Protocol):
    """What `release_held` needs of the worker pool."""

    @property
    def lock(self) -> threading.Lock: ...
    @property
    def queue(self) -> _Queue: ...
    @property
    def notices(self) -> NoticeThread: ...
    def wake(self, count: int) -> None: ...
    def spawn(self) -> None: ...


def release_held(pool: _Pool, name: str, now: datetime) -> None:
    """A run of job `name` was reported: queue its held run, if any, and wake a worker for
    it (lock not held; called only while some run is held)."""
    with pool.lock:
        queue = pool.queue
        if queue.overlap.release(name, now):
            pool.wake(1)
        if queue.notices:
            pool.notices.notify()
    pool.spawn()
