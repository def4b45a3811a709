"""`WorkerPool`: the threads that run what the `RunQueue` made ready, and report the rest.

Part of `JobProcessor` (which shares its lock with the pool and sets its `phase`):

- up to `max_workers` worker threads, started when runs are ready and none is idle, then kept
  waiting on a Condition; a ready run goes to a waiting worker at once. Each takes the next
  ready run, calls ``execute(job, ctx)`` outside the lock, then ``on_finished``;
- one notice thread, started when needed, hands NOT_STARTED notices to ``on_finished``, so a
  refused run is reported at once even while every worker is busy.

An exception from ``execute`` makes the run FAILED / ABNORMAL ("scheduler error"); one from
``on_finished`` is logged. Neither ends a thread.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import replace

from .clock import Clock
from .events import Event
from .execution import Execution, SchedulerResult
from .job import Job
from .runcontext import RunContext
from .runqueue import Run, RunQueue

__all__ = ["CLOSED", "CLOSING", "NEW", "RUNNING", "STOPPED", "WorkerPool"]

log = logging.getLogger("jobscheduler.processor")

# The processor's phases. Workers run only while RUNNING; the notice thread also while
# STOPPED (until the notices are out) and CLOSING. NEW: notices wait for `start` or `drain`;
# CLOSED: they are delivered in the thread that makes them.
NEW, RUNNING, STOPPED, CLOSING, CLOSED = range(5)

ExecuteFn = Callable[[Job, RunContext], Execution]
FinishedFn = Callable[[Job, Execution], None]


class WorkerPool:
    """Worker threads and the notice thread of one processor (see the module notes).

    Methods marked "lock held" are called with the processor's lock, `lock`, held.
    """

    def __init__(
        self,
        lock: threading.Lock,
        queue: RunQueue,
        ids: itertools.count[int],
        execute: ExecuteFn,
        on_finished: FinishedFn,
        clock: Clock,
        max_workers: int,
    ) -> None:
        self.lock = lock
        self.queue = queue
        self.phase = NEW
        self.max_workers = max_workers
        self.running: dict[int, tuple[RunContext, Run]] = {}  # by run id
        self.finishing = 0  # runs and notices taken whose on_finished has not returned
        self.started = 0
        self.workers: set[threading.Thread] = set()
        self.quiet = threading.Condition(lock)  # notified when `finishing` drops to 0
        self._ids = ids
        self._execute = execute
        self._on_finished = on_finished
        self._clock = clock
        self._work = threading.Condition(lock)  # idle workers wait here
        self._news = threading.Condition(lock)  # the notice thread waits here
        self._idle = 0  # workers waiting on _work and not yet notified
        self._notifier: threading.Thread | None = None

    # -- workers -------------------------------------------------------------------------------

    def wake(self, count: int) -> None:
        """`count` runs became ready (lock held): wake idle workers, start more if allowed."""
        if self.phase != RUNNING:
            return
        idle = self._idle
        if idle:
            woken = count if count < idle else idle
            self._idle = idle - woken
            self._work.notify(woken)
            count -= woken
        spare = self.max_workers - len(self.workers)
        for _ in range(min(count, spare)):
            worker = threading.Thread(
                target=self._worker,
                name=f"jobscheduler-worker-{len(self.workers) + 1}",
                daemon=True,
            )
            self.workers.add(worker)
            worker.start()

    def halt(self) -> None:
        """The phase left RUNNING (lock held): idle workers end, the notice thread finishes."""
        self._idle = 0
        self._work.notify_all()
        self._news.notify_all()
        if self.queue.notices:
            self.notify_news()

    def take(self) -> tuple[Run, RunContext, int] | None:
        """The next ready run with its context, registered as running (lock held)."""
        run = self.queue.take()
        if run is None:
            return None
        run_id = next(self._ids)
        ctx = RunContext(run.job, run_id, run.slot, run.trigger, created=run.due)
        self.running[run_id] = (ctx, run)
        self.started += 1
        return run, ctx, run_id

    def _worker(self) -> None:
        me = threading.current_thread()
        lock = self.lock
        finished = False
        try:
            while True:
                with lock:
                    if finished:
                        self.done()
                    taken = self.take()
                    while taken is None:
                        if self.phase != RUNNING:
                            return
                        self._idle += 1
                        self._work.wait()
                        taken = self.take()
                    self.finishing += 1
                    finished = True
                self.run(*taken)
        except BaseException:
            log.exception("a worker thread crashed")
        finally:
            with lock:
                self.workers.discard(me)
                if self.queue.queued:
                    self.wake(self.queue.queued)
                self.quiet.notify_all()

    def run(self, run: Run, ctx: RunContext, run_id: int) -> None:
        """Execute a taken run and report it (lock not held); the caller then calls `done`."""
        job = run.job
        try:
            execution = self._execute(job, ctx)
        except BaseException as exc:
            log.exception("run %d of job %r: execute raised", run_id, job.name)
            execution = self._failed(ctx, exc)
        with self.lock:
            del self.running[run_id]
            self.queue.finish(run)
        self.report(job, execution)

    def done(self) -> None:
        """A run or notice has been reported (lock held)."""
        self.finishing -= 1
        if not self.finishing:
            self.quiet.notify_all()

    def _failed(self, ctx: RunContext, exc: BaseException) -> Execution:
        now = self._clock.now()
        base = ctx.snapshot()
        return replace(
            base,
            ended=base.ended or now,
            event=Event.FAILED,
            result=SchedulerResult.ABNORMAL,
            error=f"{type(exc).__name__}: {exc}",
            reason="scheduler error",
        )

    def report(self, job: Job, execution: Execution) -> None:
        """``on_finished(job, execution)``; an exception is logged (lock not held)."""
        try:
            self._on_finished(job, execution)
        except BaseException:
            log.exception("on_finished for run %d of job %r raised", execution.run_id, job.name)

    def drain(self) -> int:
        """Deliver every notice and run every ready run in the calling thread, in order."""
        count = 0
        while True:
            with self.lock:
                notices = self.queue.notices
                notice = notices.popleft() if notices else None
                taken = None if notice is not None else self.take()
                if notice is None and taken is None:
                    return count
                self.finishing += 1
            if notice is not None:
                self.report(*notice)
            elif taken is not None:
                self.run(*taken)
            count += 1
            with self.lock:
                self.done()

    # -- notices (runs that never started) --------------------------------------------------------

    def notify_news(self) -> None:
        """Notices wait (lock held): wake the notice thread, starting it if needed."""
        if self.phase in (NEW, CLOSED):
            return
        notifier = self._notifier
        if notifier is not None and notifier.is_alive():
            self._news.notify()
            return
        notifier = threading.Thread(
            target=self._notices_main, name="jobscheduler-notices", daemon=True
        )
        self._notifier = notifier
        notifier.start()

    def _notices_main(self) -> None:
        lock = self.lock
        notices = self.queue.notices
        while True:
            with lock:
                while not notices:
                    if self.phase not in (RUNNING, CLOSING):
                        return
                    self._news.wait()
                job, execution = notices.popleft()
                self.finishing += 1
            self.report(job, execution)
            with lock:
                self.done()

    def close(self) -> None:
        """After the workers ended: phase CLOSED, the notice thread finishes and is joined,
        and any notice left is delivered here (lock not held)."""
        with self.lock:
            self.phase = CLOSED
            self._news.notify_all()
            notifier = self._notifier
        join(notifier)
        self.deliver_closed()

    def deliver_closed(self) -> None:
        """Once CLOSED, deliver waiting notices in the calling thread (lock not held)."""
        while True:
            with self.lock:
                if self.phase != CLOSED or not self.queue.notices:
                    return
                job, execution = self.queue.notices.popleft()
                self.finishing += 1
            self.report(job, execution)
            with self.lock:
                self.done()


def join(thread: threading.Thread | None) -> None:
    """Join `thread`, unless it is None or the calling thread."""
    if thread is not None and thread is not threading.current_thread():
        thread.join()
