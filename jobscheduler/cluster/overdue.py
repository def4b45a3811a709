"""`OverdueWatch`: a run still going after its job's ``warn_after`` is told `Event.OVERDUE`,
once: a warning, not the run's end (the run still ends in exactly one of SUCCESSFUL, FAILED,
NOT_STARTED).

It wraps the runner's ``execute``. A job without ``warn_after`` costs nothing more. A run of
a job with one is put in view with its deadline (its start plus the limit), and the watch's
thread sleeps until the earliest deadline (on the scheduler's clock, so tests drive it with a
`FakeClock`); a run that ended before its deadline is simply forgotten.

``warn_after: auto`` is `auto_limit` of the durations of the job's last `AUTO_RUNS` succeeded
runs in the state store, read when the run starts: twice their 95th percentile, and no
warning while fewer than `AUTO_MIN_RUNS` exist.
"""

from __future__ import annotations

import heapq
import logging
import math
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from ..clock import Clock
from ..engine.detached import StartFn
from ..engine.threads import LoopThread
from ..model.execution import Execution
from ..model.job import Job
from ..runners.context import RunContext
from ..state.base import StateStore
from ..state.records import RunState

__all__ = ["AUTO_MIN_RUNS", "AUTO_RUNS", "OverdueWatch", "auto_limit", "percentile"]

log = logging.getLogger("jobscheduler.engine")

AUTO_RUNS = 20
AUTO_MIN_RUNS = 5

Execute = Callable[[Job, RunContext], Execution]
Report = Callable[[Job, Execution], None]


def percentile(values: Sequence[float], p: float) -> float | None:
    """The `p`-th percentile (0-100) of `values` by nearest rank (None when empty)."""
    if not values:
        return None
    data = sorted(values)
    return data[max(math.ceil(p / 100 * len(data)), 1) - 1]


def auto_limit(durations: Sequence[float]) -> timedelta | None:
    """``warn_after: auto`` for a job whose last succeeded runs took `durations` seconds:
    twice their 95th percentile; None (no warning) with fewer than `AUTO_MIN_RUNS`."""
    if len(durations) < AUTO_MIN_RUNS:
        return None
    p95 = percentile(durations, 95)
    assert p95 is not None
    return timedelta(seconds=2 * p95)


class OverdueWatch:
    """Tells `report` of each run of the wrapped ``execute`` still going after its job's
    ``warn_after`` (see the module notes)."""

    def __init__(
        self,
        execute: Execute,
        store: Callable[[], StateStore],
        clock: Clock,
        report: Report,
        *,
        start: StartFn | None = None,
    ) -> None:
        self._execute = execute
        self._start = start
        self._store = store  # the scheduler's store, opened after this is made
        self._clock = clock
        self._report = report
        self._changed = threading.Condition()
        # (deadline, run id): the runs in view, earliest first; `_runs` holds those still
        # going (a run that ended is dropped from it, and its heap entry skipped when due).
        self._deadlines: list[tuple[datetime, str]] = []
        self._runs: dict[str, tuple[Job, RunContext]] = {}
        # Started by the first run watched; `stopping` once closed (never started again).
        self._thread = LoopThread(self._changed, self._main, "jobscheduler-overdue", join_timeout=5)

    def limit(self, job: Job) -> timedelta | None:
        """How long a run of `job` goes before it is overdue (None: never)."""
        warn = job.warn_after
        if warn is None or isinstance(warn, timedelta):
            return warn
        try:
            runs = self._store().history(job.name, limit=AUTO_RUNS, state=RunState.SUCCEEDED)
        except Exception:  # the store out of reach: no warning for this run
            log.debug("reading the runs of %r for warn_after: auto failed", job.name)
            return None
        return auto_limit([d for r in runs if (d := r.duration) is not None])

    def execute(self, job: Job, context: RunContext) -> Execution:
        """Run `job` through the wrapped ``execute``, watched for its ``warn_after``."""
        if job.warn_after is None or not self._watch(job, context):  # the usual job: no call
            return self._execute(job, context)
        try:
            return self._execute(job, context)
        finally:
            self._unwatch(context.run_id)

    def start(
        self, job: Job, context: RunContext, done: Callable[[Execution], None]
    ) -> Execution | None:
        """The wrapped ``start`` (a `StartFn`), watched for its ``warn_after`` whether it
        ends here or, detached, later (`done`)."""
        if self._start is None:
            return self.execute(job, context)
        if job.warn_after is None or not self._watch(job, context):  # the usual job: no call
            return self._start(job, context, done)
        run_id = context.run_id

        def ended(execution: Execution) -> None:
            self._unwatch(run_id)
            done(execution)

        try:
            execution = self._start(job, context, ended)
        except BaseException:
            self._unwatch(run_id)
            raise
        if execution is not None:
            self._unwatch(run_id)
        return execution

    def _watch(self, job: Job, context: RunContext) -> bool:
        """Put the run in view until its deadline; False when its job has none."""
        limit = self.limit(job)
        if limit is None:
            return False
        deadline = self._clock.now() + limit
        run_id = context.run_id
        with self._changed:
            self._runs[run_id] = (job, context)
            heapq.heappush(self._deadlines, (deadline, run_id))
            if not self._thread.stopping:  # once closed, no thread again
                self._thread.start()
            self._changed.notify_all()
        return True

    def _unwatch(self, run_id: str) -> None:
        with self._changed:
            self._runs.pop(run_id, None)

    def due(self, now: datetime) -> list[tuple[Job, RunContext]]:
        """The runs whose deadline is at or before `now` and that still go, each once (they
        leave the watch)."""
        found = []
        with self._changed:
            while self._deadlines and self._deadlines[0][0] <= now:
                _, run_id = heapq.heappop(self._deadlines)
                run = self._runs.pop(run_id, None)
                if run is not None:
                    found.append(run)
        return found

    def close(self) -> None:
        self._thread.stop()

    def _main(self) -> None:
        clock = self._clock
        while True:
            with self._changed:
                while not self._thread.stopping:
                    if self._deadlines:
                        left = (self._deadlines[0][0] - clock.now()).total_seconds()
                        if left <= 0:
                            break
                        clock.wait(self._changed, left)
                    else:
                        clock.wait(self._changed, None)
                if self._thread.stopping:
                    return
            for job, context in self.due(clock.now()):
                try:
                    self._report(job, context.snapshot())
                except Exception:
                    log.exception(
                        "telling that run %s of %r is overdue failed", context.run_id, job.name
                    )
