"""`LiveOutput`: the output so far of this node's running runs, written into the state store
while they run, so that every node (its page, ``jobscheduler logs --follow``) shows it live.

It wraps the runner's ``execute`` and ``start`` (`engine.detached`: an async job's run ends
later, on the runner's event loop): a run of an external job is in view from its start to
its end. Other runs keep no output, so they pass through without a lock or a look: the
wrapper is on every run's way. Its thread
sleeps while nothing runs (no wake-up on an idle node); while runs go on it looks at them
once a `period` (1 s), and writes a run's output (`StateStore.set_output`) only when it
changed since it last wrote it: a run that prints nothing costs no write, and a run printing
a line every 10 ms costs one write a second. The run's end writes the whole output as before
(`finish`); a write that comes after it changes nothing (`set_output` touches running runs
only).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta

from ..clock import Clock
from ..engine.detached import StartFn
from ..engine.threads import LoopThread
from ..model.execution import Execution
from ..model.job import Job, JobType
from ..runners.context import RunContext
from ..state.base import StateStore

__all__ = ["PERIOD", "LiveOutput"]

log = logging.getLogger("jobscheduler.engine")

PERIOD = 1.0  # seconds: a running run's output reaches the store at most this often

Execute = Callable[[Job, RunContext], Execution]

# A global: on Python 3.11 an Enum member's look-up in a function costs ~0.2 µs, a global's
# ~0.03, and every run asks it.
_EXTERNAL = JobType.EXTERNAL


class LiveOutput:
    """Writes the output so far of the runs `execute` (wrapped by `execute` here) runs."""

    def __init__(
        self,
        execute: Execute,
        store: Callable[[], StateStore],
        clock: Clock,
        *,
        period: float = PERIOD,
        start: StartFn | None = None,
    ) -> None:
        self._execute = execute
        self._start = start
        self._store = store  # the scheduler's store, opened after this is made
        self._clock = clock
        self._period = period
        self._changed = threading.Condition()
        self._running: dict[str, RunContext] = {}  # by run id (lock: `_changed`)
        self._written: dict[str, str] = {}  # run id: the output last written
        # Started by the first run watched; `stopping` once closed (never started again).
        self._thread = LoopThread(
            self._changed, self._main, "jobscheduler-live-output", join_timeout=5
        )
        self.writes = 0  # `set_output` calls made (the live-output benchmark counts them)

    def execute(self, job: Job, context: RunContext) -> Execution:
        """Run `job` through the wrapped ``execute``, its output written while it runs."""
        if job.type is not _EXTERNAL:  # only a process's output is kept: nothing to watch
            return self._execute(job, context)
        self._watch(context)
        try:
            return self._execute(job, context)
        finally:
            self._unwatch(context.run_id)

    def start(
        self, job: Job, context: RunContext, done: Callable[[Execution], None]
    ) -> Execution | None:
        """The wrapped ``start`` (a `StartFn`), its run's output written while it runs,
        whether it ends here or, detached, later (`done`)."""
        if self._start is None:
            return self.execute(job, context)
        if job.type is not _EXTERNAL:
            return self._start(job, context, done)
        run_id = context.run_id

        def ended(execution: Execution) -> None:
            self._unwatch(run_id)
            done(execution)

        self._watch(context)
        try:
            execution = self._start(job, context, ended)
        except BaseException:
            self._unwatch(run_id)
            raise
        if execution is not None:
            self._unwatch(run_id)
        return execution

    def _watch(self, context: RunContext) -> None:
        with self._changed:
            self._running[context.run_id] = context
            started = not self._thread.stopping and self._thread.start()  # not once closed
            if not started and len(self._running) == 1:  # the thread sleeps until a run comes
                self._changed.notify_all()

    def _unwatch(self, run_id: str) -> None:
        with self._changed:
            self._running.pop(run_id, None)
            self._written.pop(run_id, None)

    def flush(self) -> int:
        """Write the output of every running run whose output changed since it was last
        written; how many were written. What the thread does once a period."""
        with self._changed:
            running = list(self._running.values())
        written = 0
        for context in running:
            output = context.snapshot().output_tail
            run_id = context.run_id
            if output == self._written.get(run_id, ""):
                continue
            try:
                self._store().set_output(run_id, output)
            except Exception:  # the store is out of reach: the run's end writes it all
                log.debug("writing the output of run %s failed", run_id, exc_info=True)
                continue
            with self._changed:
                if run_id in self._running:
                    self._written[run_id] = output
            written += 1
        self.writes += written
        return written

    def close(self) -> None:
        """Stop the thread (the runs still going are not touched)."""
        self._thread.stop()

    def _main(self) -> None:
        clock, thread = self._clock, self._thread
        while True:
            with self._changed:
                while not self._running and not thread.stopping:
                    clock.wait(self._changed, None)
                # A period from the wake-up (a start wakes it only when nothing ran before).
                due = clock.now() + timedelta(seconds=self._period)
                while not thread.stopping and (left := (due - clock.now()).total_seconds()) > 0:
                    clock.wait(self._changed, left)
                if thread.stopping:
                    return
            self.flush()
