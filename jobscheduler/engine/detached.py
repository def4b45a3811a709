"""`DetachedRuns`: the runs a worker handed on instead of running them to their end.

A `StartFn` (``Runner.start``) may detach a run: an async job goes to the runner's event loop,
and the worker goes on to the next run at once, so a detached run holds no worker while it
goes on. It still counts as running (`executing`, `stop_runs`, max_instances) until it ends,
and is then reported by the notice thread, as a run a worker hands over is. A shutdown waits
for the detached runs after its workers (`wait`), except one given up because it ignored its
stop (`forget`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

from ..model.execution import Execution
from ..model.job import Job
from ..runners.context import RunContext
from .ready import Run

__all__ = ["DetachedRuns", "StartFn"]

# start(job, ctx, done): the final Execution of a run done in this thread, or None for a run
# detached, whose final Execution `done` gets later, from another thread.
StartFn = Callable[[Job, RunContext, Callable[[Execution], None]], Execution | None]


class DetachedRuns:
    """The detached runs of one worker pool, by run id (see the module notes)."""

    def __init__(
        self,
        lock: threading.Lock,
        execute: Callable[[Job, RunContext], Execution],
        start: StartFn | None,
        hand_over: Callable[[Run, Execution], None],
    ) -> None:
        self._lock = lock  # the processor's
        self._execute = execute
        self._start = start
        # Has the notice thread report a run that ended (unless given up: reported already).
        self._hand_over = hand_over
        self._ids: set[str] = set()  # from the call of `start` until the run ends
        self._away: set[str] = set()  # those `start` detached (they hold no worker) until then
        self._ended = threading.Condition(lock)

    def execute(self, run: Run, ctx: RunContext) -> Execution | None:
        """Carry out `run` (lock not held): its final Execution, or None when `start`
        detached it (it is reported when it ends)."""
        start = self._start
        if start is None:
            return self._execute(run.job, ctx)
        run_id = run.run_id
        self._ids.add(run_id)  # first: it may end before `start` returns
        try:
            execution = start(run.job, ctx, partial(self._ended_with, run))
        except BaseException:
            self._ids.discard(run_id)  # not detached: the caller reports it
            raise
        if execution is not None:
            self._ids.discard(run_id)
        else:
            with self._lock:
                if run_id in self._ids:  # not ended yet
                    self._away.add(run_id)
        return execution

    def _ended_with(self, run: Run, execution: Execution) -> None:
        self._hand_over(run, execution)
        with self._lock:
            self._ids.discard(run.run_id)
            self._away.discard(run.run_id)
            self._ended.notify_all()

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def away(self) -> int:
        """How many runs are detached now: they go on and hold no worker (a run `start`
        carries out in the worker's thread is counted in `len` only)."""
        return len(self._away)

    def forget(self, run_id: str) -> None:
        """Run `run_id` was given up: a shutdown no longer waits for it (lock held)."""
        self._ids.discard(run_id)
        self._away.discard(run_id)
        self._ended.notify_all()

    def wait(self) -> None:
        """Wait until every detached run has ended (lock not held)."""
        with self._lock:
            while self._ids:
                self._ended.wait()
