"""The `Watchdog`: one thread that calls things back at deadlines (timeouts, SIGKILL steps).

It keeps a heap of deadlines and waits on one `threading.Condition` through the `Clock` for
exactly the earliest of them: no polling, and no thread per run. A `FakeClock` drives it in
tests. Callbacks run in the watchdog's thread, one after the other, so they must be quick
(sending a signal, setting a flag); an exception in one is logged and the others still run.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from ..clock import Clock

__all__ = ["Timer", "Watchdog"]

log = logging.getLogger("jobscheduler.runners")


class Timer:
    """A pending callback of a `Watchdog`; `cancel()` it when it is no longer wanted."""

    __slots__ = ("_watchdog", "callback", "deadline", "essential", "sequence")

    def __init__(
        self,
        watchdog: Watchdog,
        deadline: datetime,
        sequence: int,
        callback: Callable[[], None],
        essential: bool,
    ) -> None:
        self._watchdog = watchdog
        self.deadline = deadline
        self.sequence = sequence
        self.callback = callback
        self.essential = essential

    def cancel(self) -> bool:
        """Drop the callback. True if it was still pending (it will not run); idempotent."""
        return self._watchdog._cancel(self)

    def __lt__(self, other: Timer) -> bool:
        return (self.deadline, self.sequence) < (other.deadline, other.sequence)


class Watchdog:
    """Calls callbacks at deadlines of `clock`, from one lazily started daemon thread.

    `schedule` and `Timer.cancel` are thread-safe and cheap (a cancelled timer is dropped from
    the heap at once when it is the earliest, and the heap is compacted when more than half of
    it is cancelled, so memory follows the live timers).

    `close` drops every pending timer except the *essential* ones (the SIGKILL steps of runs
    being stopped: a process that ignores SIGTERM must still die after a shutdown). Without
    essential timers the thread ends before `close` returns; with some, `close` returns at once
    and the thread ends after the last of them has fired or been cancelled. Scheduling again
    after `close` is allowed (a thread is started again as needed).
    """

    def __init__(self, clock: Clock, *, name: str = "jobscheduler-watchdog") -> None:
        self._clock = clock
        self._name = name
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._heap: list[Timer] = []
        self._live: dict[int, Timer] = {}
        self._sequence = itertools.count()
        self._thread: threading.Thread | None = None
        self._draining = False  # closed, but essential timers remain: end when they are gone

    def schedule(
        self, delay: timedelta | float, callback: Callable[[], None], *, essential: bool = False
    ) -> Timer:
        """Call `callback` once, `delay` (a timedelta or seconds) from now on the clock."""
        if not isinstance(delay, timedelta):
            delay = timedelta(seconds=delay)
        with self._lock:
            deadline = self._clock.now() + delay
            timer = Timer(self, deadline, next(self._sequence), callback, essential)
            heapq.heappush(self._heap, timer)
            self._live[timer.sequence] = timer
            reopened, self._draining = self._draining, False
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            elif reopened or self._heap[0] is timer:
                self._changed.notify_all()  # a new earliest deadline, or a closer to release
        return timer

    @property
    def pending(self) -> int:
        """How many timers are still waiting (cancelled ones excluded)."""
        with self._lock:
            return len(self._live)

    @property
    def running(self) -> bool:
        """Whether the watchdog's thread is alive."""
        with self._lock:
            return self._thread is not None and self._thread.is_alive()

    def close(self) -> None:
        """Drop the timers that are not essential and end the thread (see the class notes)."""
        with self._lock:
            self._live = {seq: t for seq, t in self._live.items() if t.essential}
            self._heap = list(self._live.values())
            heapq.heapify(self._heap)
            self._draining = True
            self._changed.notify_all()
            if self._live:
                return
            current = threading.current_thread()
            # Wait for the thread to end, unless a schedule() reopened the watchdog meanwhile.
            while self._draining and self._thread is not None and self._thread is not current:
                self._changed.wait()

    def _cancel(self, timer: Timer) -> bool:
        with self._lock:
            if self._live.pop(timer.sequence, None) is None:
                return False
            self._drop_cancelled()
            if len(self._heap) > 2 * len(self._live) + 16:
                self._heap = list(self._live.values())
                heapq.heapify(self._heap)
            if not self._live:
                self._changed.notify_all()  # a draining thread may end now
            return True

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0].sequence not in self._live:
            heapq.heappop(self._heap)

    def _loop(self) -> None:
        with self._lock:
            try:
                self._run()
            finally:
                self._thread = None
                self._changed.notify_all()  # a close() may be waiting for this thread to end

    def _run(self) -> None:
        # Called and returning with the lock held.
        while True:
            self._drop_cancelled()
            if not self._heap:
                if self._draining:
                    return
                self._clock.wait(self._changed, None)
                continue
            timer = self._heap[0]
            delay = (timer.deadline - self._clock.now()).total_seconds()
            if delay > 0:
                self._clock.wait(self._changed, delay)
                continue
            heapq.heappop(self._heap)
            del self._live[timer.sequence]
            self._lock.release()
            try:
                timer.callback()
            except Exception:
                log.exception("watchdog callback %r failed", timer.callback)
            finally:
                self._lock.acquire()
