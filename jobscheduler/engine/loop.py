"""`SchedulerLoop`: the processor's scheduler thread — waiting, precisely, for the next run.

The thread keeps no list to scan: it waits on one `threading.Condition` (`changed`), through
the `Clock`, exactly until the earliest entry of the timeline (see `timeline`) or until a
change makes an earlier one (a job added or rescheduled, ``run_now``, ``run_at``, ``stop``:
`JobProcessor` calls `changed_at`). With nothing due it waits without a timeout: an idle
processor with 100,000 future jobs never wakes. Its loop body is `dispatch` (what
`JobProcessor.run_due` calls, and tests call directly on a `FakeClock`).

With the real `SystemClock` the thread wakes `early_wake` seconds before a slot, waits again to
`spin` seconds before it, and the last stretch is spun: an operating-system timed wait
oversleeps by 0.1–0.3 ms, which would otherwise be added to every start. When a worker is
idle, it is that worker that spins, then moves what is due to the ready runs itself and
starts the first run at once: waking a thread takes 0.03–0.3 ms (more on a busy machine), and
it is then taken before the slot, not after it. The scheduler thread waits meanwhile, and
dispatches the slot itself if the worker has not done so `_TAKE_OVER` seconds after it.

A crash of the loop is logged and the loop restarted (backing off if it keeps crashing); a
thread found dead by `changed_at` is replaced. Every method is called with the processor's
lock held, but the thread's own.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from functools import partial

from ..clock import Clock
from .timeline import Timeline
from .workers import WorkerPool

__all__ = ["SchedulerLoop"]

log = logging.getLogger("jobscheduler.processor")

_INF = float("inf")
_MAX_BACKOFF = 1.0
_TAKE_OVER = 0.002  # seconds past a slot a spinning worker was asked to dispatch: see above
_DELEGATE_BATCH = 4  # due entries that worker dispatches itself (the rest: the thread's)


class SchedulerLoop:
    """The scheduler thread of one processor (see the module notes). `early`, `spin` and
    `max_wait` are in seconds, checked by the processor."""

    def __init__(
        self,
        lock: threading.Lock,
        timeline: Timeline,
        pool: WorkerPool,
        clock: Clock,
        *,
        early: float,
        spin: float,
        max_wait: float,
    ) -> None:
        self._lock = lock
        self._timeline = timeline
        self._pool = pool
        self._clock = clock
        self._early = early
        self._spin = spin
        self._max_wait = max_wait
        self.changed = threading.Condition(lock)  # the scheduler thread waits here
        self._epoch = 0  # bumped on start and stop: an old scheduler thread then exits
        self._thread: threading.Thread | None = None
        self._deadline = _INF  # the instant (timestamp) the scheduler thread waits for
        self._delegated: float | None = None  # the slot an idle worker spins to and dispatches
        self.wakeups = 0
        self.restarts = 0
        self._crash_streak = 0

    def dispatch(self, now: datetime, keep: int = 0, limit: int | None = None) -> float | None:
        """Move what is due at `now` to the ready runs, waking or asking for workers; returns
        the seconds until the next timeline entry (None: none). `keep` runs are left for the
        calling worker, and at most `limit` entries are dispatched (see `Timeline.due`)."""
        pushed, delay = self._timeline.due(now) if limit is None else self._timeline.due(now, limit)
        if pushed > keep:
            self._pool.wake(pushed - keep)
        if self._timeline.notices:
            self._pool.notices.notify()
        return delay

    def begin(self) -> None:
        """The processor started: a new scheduler thread."""
        self._epoch += 1
        self._start_thread()

    def end(self) -> threading.Thread | None:
        """The processor left its running phase: the thread (returned, for joining) ends, and
        a worker spinning to a slot finds the epoch changed."""
        self._epoch += 1
        thread, self._thread = self._thread, None
        self._deadline = _INF
        self._delegated = None
        self.changed.notify_all()
        return thread

    def changed_at(self, earliest: float) -> None:
        """A change put an entry at `earliest` (a timestamp; inf: none): wake the thread if it
        waits for later, and make sure it is alive."""
        if earliest < self._deadline:
            self.changed.notify()
        thread = self._thread
        if thread is None or not thread.is_alive():
            log.error("the scheduler thread was found dead; starting a new one")
            self.restarts += 1
            self._start_thread()

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
                    if self._epoch != epoch or not self._pool.active:
                        return
                    self.restarts += 1
                    self._crash_streak += 1
                    streak = self._crash_streak
                try:
                    log.exception("the scheduler thread crashed; restarting its loop")
                    if streak > 1:
                        backoff = min(0.001 * 2 ** (streak - 2), _MAX_BACKOFF)
                        with self.changed:
                            self._clock.wait(self.changed, backoff)
                except BaseException:
                    pass  # logging or waiting failed too: retry the loop regardless

    def _loop(self, epoch: int) -> None:
        clock = self._clock
        changed = self.changed
        lock = self._lock
        early = self._early
        spin = self._spin
        max_wait = self._max_wait
        pool = self._pool
        with changed:
            while pool.active and self._epoch == epoch:
                now = clock.now()
                delay = self.dispatch(now)
                self._crash_streak = 0
                if pool.to_spawn:
                    lock.release()
                    try:
                        pool.spawn()
                    finally:
                        lock.acquire()
                    continue  # the lock was let go: look again before waiting
                pool.wake_if_quiet()
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
                    self._timeline.prepare_next()  # here, not on the path of the run
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
                self.wakeups += 1
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
        first entries due and keep one run for this worker (it takes it next). The scheduler
        thread waits until `_TAKE_OVER` after the slot; it is woken now only if there is more
        to do before that (the rest of a burst, workers to start): waking it as the run
        starts would take the CPU from the run. Nothing happens if the processor was stopped
        meanwhile."""
        with self._lock:
            if self._epoch != epoch:
                return
            self._spin_to(deadline)
            if self._epoch != epoch or not self._pool.active:
                return
            self._delegated = None
            now = self._clock.now()
            # The first few only: a burst's rest is the scheduler thread's (woken below), so
            # this worker starts its run at once.
            delay = self.dispatch(now, keep=1, limit=_DELEGATE_BATCH)
            if self._pool.to_spawn or (
                delay is not None and now.timestamp() + delay < self._deadline
            ):
                self.changed.notify()  # it starts the workers asked for: this one runs
