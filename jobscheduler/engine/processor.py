"""`JobProcessor`: when runs start — one scheduler thread, a pool of workers, limits.

The processor puts the pieces of the engine together behind one lock: the timeline of next
slots and one-off starts (`timeline`, with `jobstate` and `keys`), the ready runs of due
runs (`ready`), the scheduler thread that waits for the next entry (`loop`: it never
scans, and an idle processor never wakes), and the worker pool with its notice thread
(`workers`, `notices`, `lifecycle`). Its loop body is `run_due`, which tests call directly on
a `FakeClock`.

Runs that are due go to a ready runs ordered by priority (higher first), then due instant
(older first). At most `max_workers` worker threads take them, without taking the lock (see
`ready`, `workers`); workers are started when first needed and then kept, idle, until
`stop` or `shutdown`. Idle workers are woken as the first runs of a burst are queued, while
the rest is still being moved. Limits:

- a scheduled slot that comes while the job's previous scheduled run is still ready (waits
  for a worker) is coalesced into it (counted in ``stats.coalesced``, no event): the ready
  runs never hold two scheduled runs of one job;
- ``job.max_instances``: a run that would make more runs of the job running or queued than
  that does not start and ends NOT_STARTED / ABNORMAL, reason "already running".
- ``job.overlap`` (other than ``allow``): a scheduled slot that finds the job busy is
  skipped, held or replaces the running run instead (see `policies.overlap`); a skipped slot
  ends NOT_STARTED with the reason `overlap.SKIPPED`, which the scheduler records as ``skipped``.
  After `skip_in_claims`, a slot of any `overlap` policy is left to its claim instead.

Every run ends in exactly one ``on_finished(job, execution)`` call, made from a worker thread
or from the processor's notice thread (runs that never started, and finished runs handed over
while other runs wait to start): a finished run, or NOT_STARTED with a reason ("already
running", "job paused", "job removed", "scheduler stopped", "shutdown"). A run no longer counts
as running (``executing``, ``stop_job``, ``max_instances``) when its call is made.
Only `cancel_pending` drops a pending start without a call. An exception raised by
``execute``, ``on_finished`` or a job's ``next_after`` is logged on ``jobscheduler.processor``
and nothing else changes; if the scheduler thread dies anyway it is restarted and logged.

With a `claim` (the state store's seam, given here or by `claim_with`), each run is
claimed right before it starts, from the worker that will run it, outside the lock — for
every trigger (schedule, run_now, dependence). True: it runs. False: another node took it;
it is dropped without an event or an ``on_finished`` call, stops counting as running, is
counted in ``stats.claims_refused`` and logged at DEBUG. An exception: it does not start, is
logged at ERROR and ends NOT_STARTED, reason "claim failed: …". Without a claim nothing of
this costs anything. After `batch_claims`, the runs a worker takes while others wait are
claimed together, one transaction for up to `BATCH` of them (see `workers`). After
`claim_ahead`, scheduled slots are claimed before they are due, by a thread of their own, and
start without a claim when they come (see `ahead`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..clock import Clock, SystemClock, utc
from ..model.execution import Execution
from ..model.job import Job
from ..model.node import default_node_name
from ..model.runid import RunIds
from ..runners.context import RunContext
from .ahead import LEAD, AheadFn, ClaimsAhead, ReleaseFn
from .detached import StartFn
from .loop import SchedulerLoop
from .ready import Run
from .threads import join
from .timeline import Timeline
from .workers import (
    BATCH,
    ClaimFn,
    ClaimManyFn,
    ExecuteFn,
    FinishedFn,
    FinishedManyFn,
    WorkerPool,
)

__all__ = [
    "BATCH",
    "ClaimFn",
    "ClaimManyFn",
    "ExecuteFn",
    "FinishedFn",
    "FinishedManyFn",
    "JobProcessor",
    "ProcessorStats",
    "Run",
]

log = logging.getLogger("jobscheduler.processor")

_INF = float("inf")


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
    claims_refused: int = 0  # runs dropped because another node claimed them


class JobProcessor:
    """Starts runs on time, under limits, in worker threads (see the module notes).

    `execute(job, ctx)` runs one run to its end in the calling worker thread and returns its
    final `Execution`; `on_finished(job, execution)` is called once per run, from a worker or
    the notice thread (see the module notes): it should be quick, as it may hold up others.
    `early_wake` and `spin` (seconds) tune the precise wake-up; by default they are 1.5 ms and
    0.5 ms with a `SystemClock` and 0 (plain waits) with any other clock. A timed wait counts
    elapsed time, not the wall clock: if the wall clock may jump (a suspended machine, a
    stepped clock), `max_wait` (seconds; default: none) makes the thread read the clock again
    at least that often. Without it, an idle processor never wakes. `claim(job, ctx)`, if
    given, is asked once per run right before it starts (see the module notes). `node` is the
    name every run's `RunContext` carries (default: `default_node_name`). `start`: see `detached`.
    `on_finished_many(notices)`, if given, stands for ``on_finished`` over a batch of
    ``(job, execution)`` in order (the notice thread's: see `workers`); it must make each
    run's report as ``on_finished`` would, and keep going past one that fails.

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
        claim: ClaimFn | None = None,
        node: str | None = None,
        start: StartFn | None = None,
        on_finished_many: FinishedManyFn | None = None,
    ) -> None:
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"max_workers must be a whole number >= 1, not {max_workers!r}")
        early, spin, max_wait = _waits(clock, early_wake, spin, max_wait)
        self._clock = clock
        self._ids = RunIds(clock.now)  # run ids carry the clock's time
        self._timeline = Timeline(self._ids)
        self._lock = threading.Lock()
        node = default_node_name() if node is None else node
        self._pool = WorkerPool(
            self._lock,
            self._timeline,
            execute,
            on_finished,
            clock,
            max_workers,
            node,
            claim,
            start,
            on_finished_many,
        )
        self.detached = self._pool.detached  # runs that hold no worker (async jobs)
        # Idle workers start on the first runs of a burst while the rest is still being moved.
        self._timeline.connect(self._pool.wake_idle, self._pool.stop_runs)
        self._loop = SchedulerLoop(
            self._lock, self._timeline, self._pool, clock, early=early, spin=spin, max_wait=max_wait
        )
        self._started_once = False
        self._ahead: ClaimsAhead | None = None
        self._max_wait = max_wait

    def claim_with(self, claim: ClaimFn | None) -> None:
        """From now on, `claim(job, ctx)` is asked once per run right before it starts (as
        the `claim` argument; see the module notes). Before `start`."""
        with self._lock:
            self._pool.claim_with(claim)

    def batch_claims(self, claim_many: ClaimManyFn) -> None:
        """From now on, a worker that takes a run while others wait to start claims up to
        `BATCH` of them with one ``claim_many`` (see `workers`) instead of a `claim` each:
        for a store where every claim is a commit."""
        with self._lock:
            self._pool.claim_together_with(claim_many)

    def skip_in_claims(self) -> None:
        """From now on, a scheduled slot of a job whose `overlap` is not ``allow`` that finds
        the job busy here is not skipped, held or made to replace by the processor: it is
        claimed as any, and its claim (which counts the job's runs on every node sharing the
        store) skips, queues or replaces. For a store shared with other processes, whose
        claims decide the limits (`cluster.limits`)."""
        with self._lock:
            self._timeline.skip_in_claims()

    def claim_ahead(
        self,
        claim: AheadFn,
        confirm: ClaimFn,
        release: ReleaseFn,
        nodes: Callable[[], Sequence[str]] | None = None,
        lead: float = LEAD,
    ) -> ClaimsAhead:
        """From now on, scheduled slots are claimed `lead` seconds before they are due with
        `claim`, and released with `release` when their run never comes; a run claimed so
        starts once `confirm(job, ctx)` says True. `nodes()`: the names of the live nodes
        sharing the slots, this one's among them (see `ahead`). Before `start`."""
        with self._lock:
            self._ahead = ClaimsAhead(
                self._lock, self._timeline, self._ids, self._clock, claim, release,
                lead=lead, max_wait=self._max_wait, nodes=nodes, name=self._pool.node,
            )  # fmt: skip
            self._pool.confirm_with(confirm)
            return self._ahead

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
            for old in self._timeline.registered():
                if old.name not in names:
                    self._timeline.remove(old.name, now)
            earliest = self._timeline.put(jobs, now)
            self._timeline.skip_overdue(now)
            self._changes(earliest)

    def add_jobs(self, jobs: Iterable[Job], now: datetime | None = None) -> None:
        """Add (or update) many jobs at once: next slot = ``job.next_after(now)``.

        A job already known is updated as by `update_job`. The timeline is re-heapified once
        when the batch is large against it.
        """
        now = self._now(now)
        with self._lock:
            self._changes(self._timeline.put(jobs, now))

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
            removed = self._timeline.remove(name, now)
            self._changes(_INF)
        self._pool.notices.deliver_closed()
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
            if not self._pool.closing:
                self._changes(self._timeline.add_one_off(job, when, trigger))
                return
            self._timeline.ready.refuse(job, None, trigger, self._clock.now(), "shutdown")
            self._changes(_INF)
        self._pool.notices.deliver_closed()

    def cancel_pending(self, name: str, reason: str = "cancelled") -> int:
        """Drop the pending one-off starts (`run_at`, `run_now` not yet due) of job `name`,
        without an event. Returns how many. A submitted run claimed with its queue row and not
        yet started is reported NOT_STARTED with `reason` instead (its record and row end)."""
        with self._lock:
            count = self._timeline.cancel_pending(name, self._clock.now(), reason)
            self._changes(_INF)
            return count

    def stop_job(self, name: str, reason: str = "stopped") -> int:
        """``ctx.stop(reason)`` on each running execution of job `name`; returns how many.

        Queued runs of the job are not touched. A run being started at that very moment is
        stopped too (before it executes), though it may not be counted.
        """
        return self._pool.stop_runs(name, reason)

    def stop_run(self, run_id: str, reason: str = "stopped") -> bool:
        """``ctx.stop(reason)`` on the running run `run_id` (a kill request); False when no
        run of that id runs here (it ended, or another node runs it)."""
        return self._pool.stop_run(run_id, reason)

    def given_up(self, job: Job, ctx: RunContext, execution: Execution) -> None:
        """A run ignored its stop and was given up (`Runner.when_given_up`): report it with
        `execution` now, and replace the worker stuck in it."""
        self._pool.give_up(job, ctx.run_id, execution)

    def new_run_id(self) -> str:
        """A fresh run id, made as runs' are (for runs reported by others)."""
        return next(self._ids)

    # -- the loop body -----------------------------------------------------------------------------

    def run_due(self, now: datetime) -> float | None:
        """Dispatch everything due at `now` to the ready runs (waking or starting workers).

        Returns the seconds until the next timeline entry, or None when nothing is scheduled.
        A naive `now` is UTC.
        """
        now = self._now(now)
        with self._lock:
            delay = self._loop.dispatch(now)
            if delay is not None:
                self._timeline.prepare_next()  # the caller waits for it next
        self._pool.spawn()
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
            if not pool.start():
                return  # running already
            self._started_once = True
            moved = self._timeline.skip_overdue(self._clock.now())
            if moved:
                log.info("%d job(s) had slots in the past: they run from their next slot", moved)
            self._loop.begin()
            if self._ahead is not None:
                self._ahead.start()
            pool.prestart()
            if self._timeline.ready.waiting:
                pool.wake(len(self._timeline.ready.waiting))
        pool.spawn()

    def stop(self) -> None:
        """Stop scheduling: the scheduler thread ends; running runs go on to their end (then
        their idle workers end). Queued runs and pending one-off starts end NOT_STARTED
        "scheduler stopped". `start` resumes from the next slots after now. Slots claimed
        ahead (see `ahead`) are let come first (at most `ahead.LEAD` seconds)."""
        if self._ahead is not None:
            self._ahead.let_come(self.run_due)
        with self._lock:
            if not self._pool.stop():
                return
            thread = self._halt("scheduler stopped")
        join(thread)
        if self._ahead is not None:
            self._ahead.release_all()

    def shutdown(self, wait: bool = True) -> None:
        """End: start nothing new, then return when every run has ended and been reported.

        Queued runs and pending one-off starts end NOT_STARTED "shutdown". ``wait=True`` lets
        running runs finish; ``wait=False`` first calls ``ctx.stop("shutdown")`` on each. A
        second call returns at once. Called from inside a run (a worker thread), it does not
        wait for that run.
        """
        pool = self._pool
        if wait and self._ahead is not None:
            self._ahead.let_come(self.run_due)
        with self._lock:
            if not pool.begin_close():
                return
            thread = self._halt("shutdown")
        if not wait:
            pool.stop_runs(None, "shutdown")
        join(thread)
        with self._lock:
            workers = pool.started_workers()
        for worker in workers:
            pool.join_worker(worker)  # one stuck in a given-up run is not waited for
        pool.detached.wait()
        if self._ahead is not None:
            self._ahead.release_all()
        pool.close()

    def _halt(self, reason: str) -> threading.Thread | None:
        """Left the running phase (lock held): drop what waits, wake every thread; returns the
        scheduler thread, for joining."""
        now = self._clock.now()
        dropped = self._timeline.drop_all(now, reason)
        if self._ahead is not None:
            self._ahead.close()
            dropped += self._ahead.drop_future(now, reason)
        if dropped:
            log.info("%d queued or pending run(s) dropped: %s", dropped, reason)
        thread = self._loop.end()
        self._pool.halt(reason)
        return thread

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no run is due, queued, running or being reported (real seconds).

        Returns False if `timeout` passed first. Runs due in the future do not count.
        """

        pool = self._pool

        def quiet() -> bool:
            return not (pool.busy() or self._timeline.next_due(self._clock.now()))

        with self._lock:
            return pool.wait_quiet(quiet, timeout)

    def busy_within(self, seconds: float) -> bool:
        """Whether a run is queued, being claimed, running or being reported, or a timeline
        entry is due within `seconds`: work that can wait (a node's digest) waits for them."""
        soon = self._clock.now() + timedelta(seconds=seconds)
        with self._lock:
            return self._pool.busy() or self._timeline.next_due(soon)

    # -- views -------------------------------------------------------------------------------------

    @property
    def executing(self) -> list[Execution]:
        """Snapshots of the running executions, oldest run first."""
        return self._pool.executing()

    @property
    def queued(self) -> list[Run]:
        """The runs due and waiting for a worker, in the order they will start (fresh `Run`
        objects: `job_name`, `trigger`, `slot`, `due`, `priority`)."""
        with self._lock:
            return self._timeline.ready.runs()

    @property
    def queued_count(self) -> int:
        """How many runs are due and wait for a worker (no lock: one dict's length)."""
        return len(self._timeline.ready)

    @property
    def running_count(self) -> int:
        """How many runs are taken by a worker and not finished (no lock: one dict's length)."""
        return len(self._pool.running)

    @property
    def free_workers(self) -> int:
        """How many more runs could start on a worker now (`WorkerPool.free_workers`): what
        the queue consumer takes rows for. No lock."""
        return self._pool.free_workers()

    def active(self, name: str) -> int:
        """Runs of job `name` queued, running or pending as one-off starts: what its
        ``max_instances`` is measured against (a submitted run waits while it is reached)."""
        with self._lock:
            state = self._timeline.states.get(name)
            act = state.act if state is not None else None
            return 0 if act is None else len(act.runs) + len(act.pending or ())

    @property
    def pending(self) -> list[Run]:
        """The one-off starts (`run_at`, `run_now`) not yet due, earliest first."""
        with self._lock:
            return self._timeline.pending_runs()

    def soonest(self, count: int) -> list[tuple[datetime, str]]:
        """The `count` jobs that start soonest: (when, name), earliest first."""
        with self._lock:
            return self._timeline.soonest(count)

    def next_run(self, name: str) -> datetime | None:
        """When job `name` starts next: its next slot, or an earlier pending one-off start.
        None when it has neither (paused, ended, dependent, unknown)."""
        with self._lock:
            return self._timeline.next_run(name)

    @property
    def started_once(self) -> bool:
        """Whether `start` was ever called."""
        with self._lock:
            return self._started_once

    @property
    def running(self) -> bool:
        with self._lock:
            return self._pool.active

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def timeline(self) -> Timeline:
        """The timeline the processor keeps (read it with the processor idle: tests and
        benchmarks look at its size and its jobs' states; changes go through the methods
        above)."""
        return self._timeline

    @property
    def max_workers(self) -> int:
        return self._pool.max_workers

    @property
    def stats(self) -> ProcessorStats:
        with self._lock:
            timeline = self._timeline
            return ProcessorStats(
                started=self._pool.started,
                coalesced=timeline.coalesced,
                refused=timeline.refused,
                skipped=timeline.skipped,
                wakeups=self._loop.wakeups,
                restarts=self._loop.restarts,
                workers=len(self._pool.workers),
                claims_refused=self._pool.claims_refused,
            )

    # -- helpers ---------------------------------------------------------------------------------

    def _now(self, now: datetime | None) -> datetime:
        """`now` as given (a naive one is UTC, as for `run_at`), else the clock's."""
        if now is None:
            return self._clock.now()
        return utc(now) if now.tzinfo is None else now

    def _changes(self, earliest: float) -> None:
        """After a change (lock held): wake the scheduler thread if it waits for later than
        `earliest`, and make sure it is alive; hand out new notices."""
        if self._pool.active:
            self._loop.changed_at(earliest)
            if self._ahead is not None:
                self._ahead.changed_at(earliest)
        if self._timeline.notices:
            self._pool.notices.notify()


def _waits(
    clock: Clock, early_wake: float | None, spin: float | None, max_wait: float | None
) -> tuple[float, float, float]:
    """`early_wake`, `spin` and `max_wait` checked, with their defaults (see `JobProcessor`)."""
    precise = isinstance(clock, SystemClock)
    early = (0.0015 if precise else 0.0) if early_wake is None else early_wake
    spin = (0.0005 if precise else 0.0) if spin is None else spin
    if early < 0 or spin < 0:
        raise ValueError("early_wake and spin must not be negative")
    if max_wait is not None and max_wait <= 0:
        raise ValueError(f"max_wait must be above 0, not {max_wait!r}")
    # A longer timed wait raises OverflowError (a slot centuries away).
    return early, spin, min(max_wait or threading.TIMEOUT_MAX, threading.TIMEOUT_MAX)
