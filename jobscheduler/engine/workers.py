"""`WorkerPool`: the threads that run what the `ReadyQueue` holds, and report the rest.

Part of `JobProcessor`, which shares its lock with the pool and sets its `phase`:

- up to `max_workers` worker threads, started when runs are ready and none is idle (one is
  started with the processor, so the first run finds one waiting), then kept, each waiting
  on a lock of its own. A worker claims the next run, makes its `RunContext`, calls
  ``execute(job, ctx)`` and then ``on_finished`` — all without the lock while runs are ready
  (see `readyqueue`); it takes the lock only to go idle when there is nothing to do. Waking
  an idle worker takes no lock either (`wake_idle`), so the processor hands out the first
  runs of a burst while it is still moving the rest, lock held. Threads are started outside
  the lock (`spawn`): starting one takes a while;
- one notice thread, started with the processor, calls ``on_finished`` for NOT_STARTED
  notices, so a refused run is reported at once even while every worker is busy. While runs
  wait to start, a worker also hands it its finished run to report (waking it without the
  lock), and goes on to start the next: under load, starting runs comes before reporting
  them.

An exception from ``execute`` makes the run FAILED / ABNORMAL ("scheduler error"); one from
``on_finished`` is logged. Neither ends a thread.

Stopping a run that a worker is just claiming: `stop_runs` writes its reason (on the job's
state, on each run it finds, or for all) *before* it reads which runs are running and their
contexts; a worker registers its run and makes its context *before* it reads those reasons.
Under the GIL one of the two sees the other's write, so no run escapes a stop.
"""

from __future__ import annotations

import logging
import threading
from _thread import LockType as _Waiter
from _thread import allocate_lock
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from ..clock import Clock
from ..model.event import Event
from ..model.execution import Execution, SchedulerResult
from ..model.job import Job
from ..runners.context import RunContext
from .readyqueue import Run
from .timeline import RunQueue

__all__ = ["CLOSED", "CLOSING", "NEW", "RUNNING", "STOPPED", "WorkerPool", "join"]

log = logging.getLogger("jobscheduler.processor")

# The processor's phases. Workers run only while RUNNING; the notice thread also while
# STOPPED (until the notices are out) and CLOSING. NEW: notices wait for `start` or `drain`;
# CLOSED: they are delivered in the thread that makes them.
NEW, RUNNING, STOPPED, CLOSING, CLOSED = range(5)

_BATCH = 64  # notices the notice thread takes per lock round
_HAND_OFF_BELOW = timedelta(microseconds=200)  # see `_short`

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
        execute: ExecuteFn,
        on_finished: FinishedFn,
        clock: Clock,
        max_workers: int,
        node: str,
    ) -> None:
        self.lock = lock
        self.queue = queue
        self.ready = queue.ready
        self.phase = NEW
        self.max_workers = max_workers
        self.node = node  # every run's RunContext carries it
        self.workers: set[threading.Thread] = set()
        # Changed without the lock (one C call each); copy before iterating.
        self.running: dict[str, Run] = {}  # claimed runs by run id, until they end
        self.claiming: set[int] = set()  # threads between claiming a run and registering it
        self.reporting: set[str] = set()  # run ids whose on_finished has not returned
        self.notices_out = 0  # notices taken and not yet delivered (lock held)
        self.stop_all: str | None = None  # a stop for every run, at shutdown(wait=False)
        self.quiet = threading.Condition(lock)  # wait_idle waits here
        self.quiet_waiters = 0
        self._execute = execute
        self._on_finished = on_finished
        self._clock = clock
        # Idle threads each wait on a lock of their own, held: another thread wakes one by
        # popping it from these lists (one C call: exactly one waker gets it) and releasing it.
        # Waking takes no lock, so runs are handed out while the processor's lock is held.
        self._sleepers: list[_Waiter] = []  # idle workers, the last to go idle on top
        self._news: list[_Waiter] = []  # the notice thread, while it waits for notices
        self._tasks: dict[_Waiter, Callable[[], None]] = {}  # see `delegate`
        self.to_spawn = 0  # workers asked for by `wake`, started by `spawn`
        self._starting = 0  # threads `spawn` is starting right now
        self._all_started = threading.Condition(lock)
        self._notifier: threading.Thread | None = None  # None: not started, or it ended
        self._started: dict[int, int] = {}  # runs started, by thread (each writes its own)

    @property
    def started(self) -> int:
        return sum(list(self._started.values()))

    def busy(self) -> bool:
        """Whether a run is queued, being claimed, running or being reported (lock held)."""
        return bool(
            self.ready.waiting
            or self.claiming
            or self.running
            or self.reporting
            or self.queue.notices
            or self.notices_out
        )

    # -- workers -------------------------------------------------------------------------------

    def wake(self, count: int) -> None:
        """`count` runs became ready (lock held): wake idle workers, start more if allowed."""
        if self.phase != RUNNING:
            return
        count = self.wake_idle(count)
        more = min(count, self.max_workers - len(self.workers) - self.to_spawn)
        if more > 0:
            self.to_spawn += more

    def wake_idle(self, count: int) -> int:
        """Wake up to `count` idle workers (lock held or not); returns how many runs are
        left without one."""
        sleepers = self._sleepers
        while count > 0 and sleepers and self.phase == RUNNING:
            try:
                waiter = sleepers.pop()
            except IndexError:
                break
            waiter.release()
            count -= 1
        return count

    def delegate(self, task: Callable[[], None]) -> bool:
        """Have an idle worker call `task` before it looks for runs (lock held). False (and
        nothing done) when no worker is idle."""
        if self.phase != RUNNING or not self._sleepers:
            return False
        waiter = self._sleepers.pop()
        self._tasks[waiter] = task
        waiter.release()
        return True

    def prestart(self) -> None:
        """Ask for one worker and the notice thread ahead of need (lock held); the caller
        then calls `spawn`."""
        if self.phase == RUNNING:
            if not self.workers and not self.to_spawn:
                self.to_spawn = 1
            self.notify_news()

    def spawn(self) -> None:
        """Start the workers `wake` asked for (lock NOT held: a thread start waits for the
        new thread, which must not find the lock taken)."""
        while True:
            with self.lock:
                if not self.to_spawn or self.phase != RUNNING:
                    self.to_spawn = 0
                    return
                self.to_spawn -= 1
                worker = threading.Thread(
                    target=self._worker,
                    name=f"jobscheduler-worker-{len(self.workers) + 1}",
                    daemon=True,
                )
                self.workers.add(worker)
                self._starting += 1
            try:
                worker.start()
            except BaseException:
                with self.lock:
                    self.workers.discard(worker)  # never started: nothing to join
                raise
            finally:
                with self.lock:
                    self._starting -= 1
                    if not self._starting:
                        self._all_started.notify_all()

    def started_workers(self) -> list[threading.Thread]:
        """The worker threads, once none is being started (lock held; for joining them:
        `spawn` runs in any thread, a worker's included, and may be starting one)."""
        while self._starting:
            self._all_started.wait()
        return list(self.workers)

    def halt(self) -> None:
        """The phase left RUNNING (lock held): idle workers end, the notice thread finishes."""
        _release_all(self._sleepers)
        _release_all(self._news)
        if self.queue.notices:
            self.notify_news()

    def _worker(self) -> None:
        me = threading.current_thread()
        ident = threading.get_ident()
        lock = self.lock
        ready = self.ready
        running = self.running
        claiming = self.claiming
        sleepers = self._sleepers
        waiter = _new_waiter()
        started = 0
        try:
            while True:
                claiming.add(ident)
                run = ready.claim()
                if run is None:
                    claiming.discard(ident)
                    with lock:  # nothing ready: wait, unless a run came meanwhile
                        if ready.waiting:
                            continue  # claim it without the lock (another may be quicker)
                        if self.phase != RUNNING:
                            return
                        sleepers.append(waiter)
                    waiter.acquire()  # until `wake_idle`, `delegate` or `halt` releases it
                    task = self._tasks.pop(waiter, None)
                    if task is not None:
                        try:
                            task()
                        except Exception:
                            log.exception("a task handed to a worker raised")
                    continue
                running[run.run_id] = run
                claiming.discard(ident)
                started += 1
                self._started[ident] = started
                self.run(run)
        except BaseException:
            log.exception("a worker thread crashed")
        finally:
            claiming.discard(ident)
            with lock:
                if waiter in sleepers:
                    sleepers.remove(waiter)
                self.workers.discard(me)
                if self.ready.waiting:
                    self.wake(len(self.ready.waiting))
                self.quiet.notify_all()
            self.spawn()

    def run(self, run: Run, hand_off: bool = True) -> None:
        """Execute a claimed, registered run and report it (lock not held).

        The run stops counting as running (for `executing`, `stop_runs`, max_instances)
        before ``on_finished`` is called. With `hand_off`, while other runs wait to start the
        report of a short run goes to the notice thread, and this thread goes on to start
        them (after a longer run, reporting here costs less than waking that thread).
        """
        job = run.job
        run_id = run.run_id
        state = run.state
        act = state.act
        assert act is not None  # made when the run was queued
        try:
            ctx = RunContext(job, run_id, run.slot, run.trigger, created=run.due, node=self.node)
            run.ctx = ctx
            reason = run.stop_reason  # read after writing ctx: see the module notes
            if reason is None and act.stops != run.stops_seen:
                reason = act.stop_reason
            if reason is None:
                reason = self.stop_all
            if reason is not None:
                ctx.stop(reason)
            execution = self._execute(job, ctx)
        except BaseException as exc:
            log.exception("run %s of job %r: execute raised", run_id, job.name)
            execution = self._failed(run, exc)
        if hand_off and self.ready.waiting and self.phase == RUNNING and _short(execution):
            # Runs wait to start: they go first, the notice thread reports this one.
            self.queue.notices.append((job, execution))  # busy() sees it before it leaves running
            self.running.pop(run_id, None)
            _discard(act.runs, run_id)
            if self._notifier is None:
                with self.lock:
                    self.notify_news()
            else:
                _release_one(self._news)  # read after the append: see `_notices_main`
            if not state.registered:
                with self.lock:
                    self.queue.forget_if_idle(state)
            return
        reporting = self.reporting
        reporting.add(run_id)
        self.running.pop(run_id, None)
        _discard(act.runs, run_id)
        self.report(job, execution)
        reporting.discard(run_id)
        if not state.registered or self.quiet_waiters:
            with self.lock:
                self.queue.forget_if_idle(state)
                if not self.busy():
                    self.quiet.notify_all()

    def _failed(self, run: Run, exc: BaseException) -> Execution:
        now = self._clock.now()
        ctx = run.ctx
        if ctx is not None:
            base = ctx.snapshot()
        else:
            base = Execution(run.job.name, run.run_id, run.slot, now, trigger=run.trigger)
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
            log.exception("on_finished for run %s of job %r raised", execution.run_id, job.name)

    def stop_runs(self, name: str | None, reason: str) -> int:
        """Stop the running runs of job `name` (None: every run) with `reason`; returns how
        many. Queued runs are not touched. Lock not held."""
        with self.lock:
            if name is None:
                self.stop_all = reason
            else:
                state = self.queue.states.get(name)
                if state is not None:
                    act = state.activity()
                    act.stop_reason = reason
                    act.stops += 1
            runs = [r for r in list(self.running.values()) if name is None or r.job.name == name]
            for run in runs:
                if run.stop_reason is None:
                    run.stop_reason = reason
            contexts = [run.ctx for run in runs]  # read after the writes: see the module notes
        for ctx in contexts:
            if ctx is not None:
                ctx.stop(reason)
        return len(runs)

    def executing(self) -> list[Execution]:
        """Snapshots of the running runs, by run id (lock not held)."""
        snapshots = []
        for run_id, run in sorted(list(self.running.items())):
            ctx = run.ctx
            if ctx is not None:
                snapshots.append(ctx.snapshot())
            else:  # claimed a moment ago: not started yet
                snapshots.append(
                    Execution(run.job.name, run_id, run.slot, run.due, trigger=run.trigger)
                )
        return snapshots

    def drain(self) -> int:
        """Deliver every notice and run every ready run in the calling thread, in order."""
        count = 0
        ident = threading.get_ident()
        while True:
            run: Run | None = None
            with self.lock:
                notice = self.queue.notices.popleft() if self.queue.notices else None
                if notice is not None:
                    self.notices_out += 1
                else:
                    self.claiming.add(ident)
                    run = self.ready.claim()
                    if run is not None:
                        self.running[run.run_id] = run
                    self.claiming.discard(ident)
            if notice is not None:
                self._deliver(notice)
            elif run is not None:
                self._started[ident] = self._started.get(ident, 0) + 1
                self.run(run, hand_off=False)
            else:
                return count
            count += 1

    # -- notices (runs that never started) --------------------------------------------------------

    def notify_news(self) -> None:
        """Notices wait (lock held): wake the notice thread, starting it if needed."""
        if self.phase in (NEW, CLOSED):
            return
        if self._notifier is not None:
            _release_one(self._news)
            return
        notifier = threading.Thread(
            target=self._notices_main, name="jobscheduler-notices", daemon=True
        )
        self._notifier = notifier
        notifier.start()

    def _notices_main(self) -> None:
        lock = self.lock
        notices = self.queue.notices
        news = self._news
        waiter = _new_waiter()
        batch: list[tuple[Job, Execution]] = []
        done = 0  # how many of `batch` were delivered
        crashed = False
        try:
            while True:
                with lock:
                    if batch:
                        self.notices_out -= len(batch)
                        batch = []
                        done = 0
                        if self.quiet_waiters and not self.busy():
                            self.quiet.notify_all()
                    while not notices:
                        if self.phase not in (RUNNING, CLOSING):
                            return
                        # Listed before `notices` is read again: a worker appends its notice,
                        # then releases whoever is listed, so no notice is left unseen.
                        news.append(waiter)
                        if notices:
                            _release_one(news)
                        lock.release()
                        try:
                            waiter.acquire()
                        finally:
                            lock.acquire()
                    # Take a few at once: one lock round per batch, not per report.
                    batch = [notices.popleft() for _ in range(min(len(notices), _BATCH))]
                    self.notices_out += len(batch)
                while done < len(batch):
                    self.report(*batch[done])
                    done += 1
        except BaseException:
            crashed = True
            log.exception("the notice thread crashed")
        finally:
            with lock:
                if waiter in news:
                    news.remove(waiter)
                if batch:  # those not delivered go back to the front, for the next thread
                    self.notices_out -= len(batch)
                    notices.extendleft(reversed(batch[done:]))
                if self._notifier is threading.current_thread():
                    self._notifier = None  # the next notice starts a new notice thread
                if notices and not crashed:
                    self.notify_news()  # one came as this thread was leaving

    def _deliver(self, notice: tuple[Job, Execution]) -> None:
        """Report a notice taken from the queue (lock not held)."""
        self.report(*notice)
        with self.lock:
            self.notices_out -= 1
            if not self.busy():
                self.quiet.notify_all()

    def close(self) -> None:
        """After the workers ended: phase CLOSED, the notice thread finishes and is joined,
        and any notice left is delivered here (lock not held)."""
        with self.lock:
            self.phase = CLOSED
            _release_all(self._news)
            notifier = self._notifier
        join(notifier)
        self.deliver_closed()

    def deliver_closed(self) -> None:
        """Once CLOSED, deliver waiting notices in the calling thread (lock not held)."""
        while True:
            with self.lock:
                if self.phase != CLOSED or not self.queue.notices:
                    return
                notice = self.queue.notices.popleft()
                self.notices_out += 1
            self._deliver(notice)


def _new_waiter() -> _Waiter:
    """A lock to sleep on, held: ``acquire()`` blocks until another thread releases it."""
    waiter = allocate_lock()
    waiter.acquire()
    return waiter


def _release_one(waiters: list[_Waiter]) -> None:
    """Wake the thread on top of `waiters`, if any (the pop decides who wakes it)."""
    if waiters:  # most calls find nobody waiting: no exception raised for nothing
        try:
            waiter = waiters.pop()
        except IndexError:
            return
        waiter.release()


def _release_all(waiters: list[_Waiter]) -> None:
    while waiters:
        _release_one(waiters)


def _short(execution: Execution) -> bool:
    """Whether a run was short enough for its report to be handed off (see `WorkerPool.run`).

    A report costs about 10 µs here; handing it over costs two context switches and a
    contended GIL, worth it only when runs are that short (a burst of trivial runs: the
    starts go first). After a run of 0.2 ms or more, reporting it in place costs under 5%.
    """
    ended = execution.ended
    return ended is None or ended - execution.started < _HAND_OFF_BELOW


def _discard(ids: list[int | str], run_id: str) -> None:
    """Remove `run_id` from a job's list of runs (one C call: atomic under the GIL)."""
    ids.remove(run_id)


def join(thread: threading.Thread | None) -> None:
    """Join `thread`, unless it is None or the calling thread."""
    if thread is not None and thread is not threading.current_thread():
        thread.join()
