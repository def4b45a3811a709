"""`JobProcessor`: when runs start — one scheduler thread, a pool of workers, limits.

The scheduler thread keeps no list to scan: it waits on one `threading.Condition`, through the
`Clock`, exactly until the earliest entry of the timeline (see `runqueue`) or until a change
makes an earlier one (a job added or rescheduled, ``run_now``, ``run_at``, ``stop``). With
nothing due it waits without a timeout: an idle processor with 100,000 future jobs never
wakes. Its loop body is `run_due`, which tests call directly on a `FakeClock`.

With the real `SystemClock` the thread wakes `early_wake` seconds before a slot, waits again to
`spin` seconds before it, and the last stretch is spun: an operating-system timed wait
oversleeps by 0.1–0.3 ms, which would otherwise be added to every start. When a worker is
idle, it is that worker that spins, then moves what is due to the ready queue itself and
starts the first run at once: waking a thread takes 0.03–0.3 ms (more on a busy machine), and
it is then taken before the slot, not after it. The scheduler thread waits meanwhile, and
dispatches the slot itself if the worker has not done so `_TAKE_OVER` seconds after it.

Runs that are due go to a ready queue ordered by priority (higher first), then due instant
(older first). At most `max_workers` worker threads take them, without taking the lock (see
`readyqueue`, `workers`); workers are started when first needed and then kept, idle, until
`stop` or `shutdown`. Idle workers are woken as the first runs of a burst are queued, while
the rest is still being moved. Limits:

- a scheduled slot that comes while the job's previous scheduled run still waits in the queue
  is coalesced into it (counted in ``stats.coalesced``, no event): a queue never holds two
  scheduled runs of one job;
- ``job.max_instances``: a run that would make more runs of the job running or queued than
  that does not start and ends NOT_STARTED / ABNORMAL, reason "already running".

Every run ends in exactly one ``on_finished(job, execution)`` call, made from a worker thread
or from the processor's notice thread (runs that never started, and finished runs handed over
while other runs wait to start): a finished run, or NOT_STARTED with a reason ("already
running", "job paused", "job removed", "scheduler stopped", "shutdown"). A run no longer counts
as running (``executing``, ``stop_job``, ``max_instances``) when its call is made.
Only `cancel_pending` drops a pending start without a call. An exception raised by
``execute``, ``on_finished`` or a job's ``next_after`` is logged on ``jobscheduler.processor``
and nothing else changes; if the scheduler thread dies anyway it is restarted and logged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from ..clock import Clock, SystemClock, utc
from ..model.execution import Execution
from ..model.job import Job
from ..model.node import default_node_name
from ..model.runid import RunIds
from .readyqueue import QueuedRun
from .timeline import RunQueue
from .workers import CLOSING, RUNNING, STOPPED, ExecuteFn, FinishedFn, WorkerPool, join

__all__ = ["ExecuteFn", "FinishedFn", "JobProcessor", "ProcessorStats", "QueuedRun"]

log = logging.getLogger("jobscheduler.processor")

_INF = float("inf")
_MAX_BACKOFF = 1.0
_TAKE_OVER = 0.002  # seconds past a slot a spinning worker was asked to dispatch: see above
_DELEGATE_BATCH = 4  # due entries that worker dispatches itself (the rest: the thread's)


@dataclass(frozen=True)
class ProcessorStats:
    """Counters since the processor was made (for status pages and benchmarks)."""

    started: int  # runs handed to `execute`
    coalesced: int  # scheduled slots merged into a run still queued
    refused: int  # runs NOT_STARTED for max_instances
    skipped: int  # slots skipped because the scheduler thread was held up
    wakeups: int  # times the scheduler thread woke from a wait
    restarts: int  # times the scheduler thread was restarted after a crash
    workers: int  # worker threads alive


class JobProcessor:
    """Starts runs on time, under limits, in worker threads (see the module notes).

    `execute(job, ctx)` runs one run to its end in the calling worker thread and returns its
    final `Execution`; `on_finished(job, execution)` is called once per run, from a worker or
    the notice thread (see the module notes): it should be quick, as it may hold up others.
    `early_wake` and `spin` (seconds) tune the precise wake-up; by default they are 1.5 ms and
    0.5 ms with a `SystemClock` and 0 (plain waits) with any other clock. A timed wait counts
    elapsed time, not the wall clock: if the wall clock may jump (a suspended machine, a
    stepped clock), `max_wait` (seconds; default: none) makes the thread read the clock again
    at least that often. Without it, an idle processor never wakes. `node` is the name every
    run's `RunContext` carries (default: `default_node_name`).

    Every method is thread-safe. `run_now` and `run_at` are accepted at any time: while the
    processor is not started they wait for `start`; after `shutdown` they end NOT_STARTED
    "shutdown" at once, in the caller's thread.
    """

    def __init__(
        self,
        execute: ExecuteFn,
        on_finished: FinishedFn,
        *,
        clock: Clock,
        max_workers: int = 10,
        early_wake: float | None = None,
        spin: float | None = None,
        max_wait: float | None = None,
        node: str | None = None,
    ) -> None:
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"max_workers must be a whole number >= 1, not {max_workers!r}")
        precise = isinstance(clock, SystemClock)
        self._early = (0.0015 if precise else 0.0) if early_wake is None else early_wake
        self._spin = (0.0005 if precise else 0.0) if spin is None else spin
        if self._early < 0 or self._spin < 0:
            raise ValueError("early_wake and spin must not be negative")
        if max_wait is not None and max_wait <= 0:
            raise ValueError(f"max_wait must be above 0, not {max_wait!r}")
        # A longer timed wait raises OverflowError (a slot centuries away).
        self._max_wait = min(max_wait or threading.TIMEOUT_MAX, threading.TIMEOUT_MAX)
        self._clock = clock
        self._ids = RunIds(clock.now)  # run ids carry the clock's time
        self._queue = RunQueue(self._ids)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # the scheduler thread waits here
        node = default_node_name() if node is None else node
        self._pool = WorkerPool(
            self._lock, self._queue, execute, on_finished, clock, max_workers, node
        )
        # Idle workers start on the first runs of a burst while the rest is still being moved.
        self._queue.on_ready = self._pool.wake_idle
        self._epoch = 0  # bumped on stop/shutdown: an old scheduler thread then exits
        self._started_once = False
        self._thread: threading.Thread | None = None
        self._deadline = _INF  # the instant (timestamp) the scheduler thread waits for
        self._delegated: float | None = None  # the slot an idle worker spins to and dispatches
        self._wakeups = 0
        self._restarts = 0
        self._crash_streak = 0

    # -- the job set -------------------------------------------------------------------------------

    def set_jobs(self, jobs: Iterable[Job], now: datetime | None = None) -> None:
        """Replace the whole job set: as `add_jobs` for each job, `remove_job` for the
        registered jobs not among them. Unchanged jobs keep their next slot unless it is
        before `now`: then, as for every job, it is the first slot after `now` (slots missed
        while stopped are not made up)."""
        jobs = list(jobs)
        names = {job.name for job in jobs}
        now = self._now(now)
        with self._lock:
            for old in self._queue.registered():
                if old.name not in names:
                    self._queue.remove(old.name, now)
            earliest = self._queue.put(jobs, now)
            self._queue.skip_overdue(now)
            self._changes(earliest)

    def add_jobs(self, jobs: Iterable[Job], now: datetime | None = None) -> None:
        """Add (or update) many jobs at once: next slot = ``job.next_after(now)``.

        A job already known is updated as by `update_job`. The timeline is re-heapified once
        when the batch is large against it.
        """
        now = self._now(now)
        with self._lock:
            self._changes(self._queue.put(jobs, now))

    def add_job(self, job: Job, now: datetime | None = None) -> None:
        """Add `job` (or update it, if known): its next slot is ``job.next_after(now)``."""
        self.add_jobs((job,), now)

    def update_job(self, job: Job, now: datetime | None = None) -> None:
        """Replace the definition of job ``job.name``.

        With the same schedule (and still enabled) it keeps its next slot; otherwise its next
        slot is ``job.next_after(now)``. ``enabled=False`` pauses it: off the timeline, and
        its queued scheduled runs end NOT_STARTED "job paused" (``run_now`` and dependence
        runs stay). Queued runs keep the definition they were queued with; running ones go on.
        """
        self.add_jobs((job,), now)

    def remove_job(self, name: str, now: datetime | None = None) -> bool:
        """Forget job `name`: its queued runs and pending one-off starts end NOT_STARTED
        "job removed"; running runs go on. False if it was not known."""
        now = self._now(now)
        with self._lock:
            removed = self._queue.remove(name, now)
            self._changes(_INF)
        self._pool.deliver_closed()
        return removed

    # -- extra runs --------------------------------------------------------------------------------

    def run_now(self, job: Job) -> None:
        """One extra run of `job` now (trigger "run_now"), outside its schedule; `job` need
        not be registered (a paused job runs too)."""
        self.run_at(job, self._clock.now(), trigger="run_now")

    def run_at(self, job: Job, when: datetime, trigger: str = "dependence") -> None:
        """One run of `job` at `when` (a naive `when` is UTC), kept on the timeline until due;
        a `when` in the past starts at once. Limits apply when it is due."""
        when = utc(when) if when.tzinfo is None else when
        with self._lock:
            if self._pool.phase < CLOSING:
                self._changes(self._queue.add_one_off(job, when, trigger))
                return
            self._queue.ready.refuse(job, None, trigger, self._clock.now(), "shutdown")
            self._changes(_INF)
        self._pool.deliver_closed()

    def cancel_pending(self, name: str) -> int:
        """Drop the pending one-off starts (`run_at`, `run_now` not yet due) of job `name`,
        without an event. Returns how many."""
        with self._lock:
            return self._queue.cancel_pending(name)

    def stop_job(self, name: str, reason: str = "stopped") -> int:
        """``ctx.stop(reason)`` on each running execution of job `name`; returns how many.

        Queued runs of the job are not touched. A run being started at that very moment is
        stopped too (before it executes), though it may not be counted.
        """
        return self._pool.stop_runs(name, reason)

    def new_run_id(self) -> str:
        """A fresh run id, made as runs' are (for runs reported by others)."""
        return next(self._ids)

    # -- the loop body -----------------------------------------------------------------------------

    def run_due(self, now: datetime) -> float | None:
        """Dispatch everything due at `now` to the ready queue (waking or starting workers).

        Returns the seconds until the next timeline entry, or None when nothing is scheduled.
        A naive `now` is UTC.
        """
        now = self._now(now)
        with self._lock:
            delay = self._run_due(now)
            if delay is not None:
                self._queue.prepare_next()  # the caller waits for it next
        self._pool.spawn()
        return delay

    def _run_due(self, now: datetime, keep: int = 0, limit: int | None = None) -> float | None:
        """`run_due` with the lock held; `keep` runs are left for the calling worker, and at
        most `limit` entries are dispatched (see `RunQueue.due`)."""
        pushed, delay = self._queue.due(now) if limit is None else self._queue.due(now, limit)
        if pushed > keep:
            self._pool.wake(pushed - keep)
        if self._queue.notices:
            self._pool.notify_news()
        return delay

    def drain(self) -> int:
        """Run every queued run and deliver every notice in the calling thread, in order.

        For tests and for embedding without threads; returns how many calls to
        ``on_finished`` were made.
        """
        return self._pool.drain()

    # -- life cycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the scheduler thread (idempotent). Scheduled slots already past are moved to
        their next slot after now (not made up); pending one-off starts fire at once."""
        with self._lock:
            pool = self._pool
            if pool.phase == RUNNING:
                return
            if pool.phase >= CLOSING:
                raise RuntimeError("the processor was shut down")
            pool.phase = RUNNING
            self._started_once = True
            self._epoch += 1
            moved = self._queue.skip_overdue(self._clock.now())
            if moved:
                log.info("%d job(s) had slots in the past: they run from their next slot", moved)
            self._start_thread()
            pool.prestart()
            if self._queue.ready.waiting:
                pool.wake(len(self._queue.ready.waiting))
        pool.spawn()

    def stop(self) -> None:
        """Stop scheduling: the scheduler thread ends; running runs go on to their end (then
        their idle workers end). Queued runs and pending one-off starts end NOT_STARTED
        "scheduler stopped". `start` resumes from the next slots after now."""
        with self._lock:
            if self._pool.phase != RUNNING:
                return
            self._pool.phase = STOPPED
            thread = self._halt("scheduler stopped")
        join(thread)

    def shutdown(self, wait: bool = True) -> None:
        """End: start nothing new, then return when every run has ended and been reported.

        Queued runs and pending one-off starts end NOT_STARTED "shutdown". ``wait=True`` lets
        running runs finish; ``wait=False`` first calls ``ctx.stop("shutdown")`` on each. A
        second call returns at once. Called from inside a run (a worker thread), it does not
        wait for that run.
        """
        pool = self._pool
        with self._lock:
            if pool.phase >= CLOSING:
                return
            pool.phase = CLOSING
            thread = self._halt("shutdown")
        if not wait:
            pool.stop_runs(None, "shutdown")
        join(thread)
        with self._lock:
            workers = pool.started_workers()
        for worker in workers:
            join(worker)
        pool.close()

    def _halt(self, reason: str) -> threading.Thread | None:
        """Leave the running phase (lock held): drop what waits, wake every thread."""
        self._epoch += 1
        dropped = self._queue.drop_all(self._clock.now(), reason)
        if dropped:
            log.info("%d queued or pending run(s) dropped: %s", dropped, reason)
        thread, self._thread = self._thread, None
        self._deadline = _INF
        self._delegated = None  # a worker spinning to a slot finds the epoch changed
        self._changed.notify_all()
        self._pool.halt()
        return thread

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no run is due, queued, running or being reported (real seconds).

        Returns False if `timeout` passed first. Runs due in the future do not count.
        """

        pool = self._pool

        def quiet() -> bool:
            return not (pool.busy() or self._queue.next_due(self._clock.now()))

        with self._lock:
            pool.quiet_waiters += 1  # before reading the state: see WorkerPool.run
            try:
                return pool.quiet.wait_for(quiet, timeout)
            finally:
                pool.quiet_waiters -= 1

    # -- views -------------------------------------------------------------------------------------

    @property
    def executing(self) -> list[Execution]:
        """Snapshots of the running executions, oldest run first."""
        return self._pool.executing()

    @property
    def queued(self) -> list[QueuedRun]:
        """The runs due and waiting for a worker, in the order they will start."""
        with self._lock:
            return self._queue.ready.runs()

    @property
    def queued_count(self) -> int:
        """How many runs are due and wait for a worker (no lock: one dict's length)."""
        return len(self._queue.ready)

    @property
    def pending(self) -> list[QueuedRun]:
        """The one-off starts (`run_at`, `run_now`) not yet due, earliest first."""
        with self._lock:
            return self._queue.pending_runs()

    def next_run(self, name: str) -> datetime | None:
        """When job `name` starts next: its next slot, or an earlier pending one-off start.
        None when it has neither (paused, ended, dependent, unknown)."""
        with self._lock:
            return self._queue.next_run(name)

    @property
    def started_once(self) -> bool:
        """Whether `start` was ever called."""
        with self._lock:
            return self._started_once

    @property
    def running(self) -> bool:
        with self._lock:
            return self._pool.phase == RUNNING

    @property
    def max_workers(self) -> int:
        return self._pool.max_workers

    @property
    def stats(self) -> ProcessorStats:
        with self._lock:
            queue = self._queue
            return ProcessorStats(
                started=self._pool.started,
                coalesced=queue.coalesced,
                refused=queue.refused,
                skipped=queue.skipped,
                wakeups=self._wakeups,
                restarts=self._restarts,
                workers=len(self._pool.workers),
            )

    # -- the scheduler thread ----------------------------------------------------------------------

    def _now(self, now: datetime | None) -> datetime:
        """`now` as given (a naive one is UTC, as for `run_at`), else the clock's."""
        if now is None:
            return self._clock.now()
        return utc(now) if now.tzinfo is None else now

    def _changes(self, earliest: float) -> None:
        """After a change (lock held): wake the scheduler thread if it waits for later than
        `earliest`, and make sure it is alive; hand out new notices."""
        if self._pool.phase == RUNNING:
            if earliest < self._deadline:
                self._changed.notify()
            thread = self._thread
            if thread is None or not thread.is_alive():
                log.error("the scheduler thread was found dead; starting a new one")
                self._restarts += 1
                self._start_thread()
        if self._queue.notices:
            self._pool.notify_news()

    def _start_thread(self) -> None:
        epoch = self._epoch
        thread = threading.Thread(
            target=self._supervise, args=(epoch,), name="jobscheduler-processor", daemon=True
        )
        self._thread = thread
        self._deadline = -_INF  # the new thread computes its own deadline first
        thread.start()

    def _supervise(self, epoch: int) -> None:
        """The thread's target: the loop, restarted after a crash (backing off if it keeps
        crashing without a good pass in between)."""
        while True:
            try:
                self._loop(epoch)
                return
            except BaseException:
                with self._lock:
                    if self._epoch != epoch or self._pool.phase != RUNNING:
                        return
                    self._restarts += 1
                    self._crash_streak += 1
                    streak = self._crash_streak
                try:
                    log.exception("the scheduler thread crashed; restarting its loop")
                    if streak > 1:
                        backoff = min(0.001 * 2 ** (streak - 2), _MAX_BACKOFF)
                        with self._changed:
                            self._clock.wait(self._changed, backoff)
                except BaseException:
                    pass  # logging or waiting failed too: retry the loop regardless

    def _loop(self, epoch: int) -> None:
        clock = self._clock
        changed = self._changed
        lock = self._lock
        early = self._early
        spin = self._spin
        max_wait = self._max_wait
        pool = self._pool
        with changed:
            while pool.phase == RUNNING and self._epoch == epoch:
                now = clock.now()
                delay = self._run_due(now)
                self._crash_streak = 0
                if pool.to_spawn:
                    lock.release()
                    try:
                        pool.spawn()
                    finally:
                        lock.acquire()
                    continue  # the lock was let go: look again before waiting
                if pool.quiet_waiters and not pool.busy():
                    pool.quiet.notify_all()
                if delay is None:
                    self._deadline = _INF
                    clock.wait(changed, None if max_wait == threading.TIMEOUT_MAX else max_wait)
                elif delay > max_wait:
                    self._deadline = now.timestamp() + max_wait
                    clock.wait(changed, max_wait)
                else:
                    deadline = now.timestamp() + delay
                    # Measured again: dispatching took time, and a FakeClock may have moved.
                    remaining = deadline - clock.now().timestamp()
                    if remaining <= 0.0:
                        continue
                    self._queue.prepare_next()  # here, not on the path of the run
                    self._deadline = deadline
                    if early <= 0.0:
                        clock.wait(changed, remaining)
                    elif remaining > spin:
                        # Coarse, then fine: a timed wait oversleeps, so stop short of the slot.
                        clock.wait(changed, remaining - (early if remaining > early else spin))
                    else:
                        if self._delegated != deadline and pool.delegate(
                            partial(self._dispatch_at, deadline, epoch)
                        ):
                            self._delegated = deadline
                        if self._delegated == deadline:
                            # A worker spins to the slot and dispatches it (see the module notes).
                            self._deadline = deadline + _TAKE_OVER
                            clock.wait(changed, remaining + _TAKE_OVER)
                        else:
                            self._spin_to(deadline)
                            self._deadline = -_INF
                            continue
                self._wakeups += 1
                self._deadline = -_INF

    def _spin_to(self, deadline: float) -> None:
        """Spin until `deadline` (a timestamp), the lock let go meanwhile (lock held)."""
        clock = self._clock
        self._lock.release()
        try:
            while clock.now().timestamp() < deadline:
                pass
        finally:
            self._lock.acquire()

    def _dispatch_at(self, deadline: float, epoch: int) -> None:
        """In an idle worker asked to by the scheduler thread: spin to `deadline`, dispatch the
        first entries due and keep one run for this worker (it claims it next). The scheduler
        thread waits until `_TAKE_OVER` after the slot; it is woken now only if there is more
        to do before that (the rest of a burst, workers to start): waking it as the run
        starts would take the CPU from the run. Nothing happens if the processor was stopped
        meanwhile."""
        with self._lock:
            if self._epoch != epoch:
                return
            self._spin_to(deadline)
            if self._epoch != epoch or self._pool.phase != RUNNING:
                return
            self._delegated = None
            now = self._clock.now()
            # The first few only: a burst's rest is the scheduler thread's (woken below), so
            # this worker starts its run at once.
            delay = self._run_due(now, keep=1, limit=_DELEGATE_BATCH)
            if self._pool.to_spawn or (
                delay is not None and now.timestamp() + delay < self._deadline
            ):
                self._changed.notify()  # it starts the workers asked for: this one runs
