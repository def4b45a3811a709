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

from .clock import Clock

__all__ = ["Timer", "Watchdog"]

log = logging.getLogger("jobscheduler.runners")


class Timer:
    """A pending callback of a `Watchdog`; `cancel()` it when it is no longer wanted."""

    __slots__ = ("_watchdog", "callback", "deadline", "sequence")

    def __init__(
        self, watchdog: Watchdog, deadline: datetime, sequence: int, callback: Callable[[], None]
    ) -> None:
        self._watchdog = watchdog
        self.deadline = deadline
        self.sequence = sequence
        self.callback = callback

    def cancel(self) -> bool:
        """Drop the callback. True if it was still pending (it will not run); idempotent."""
        return self._watchdog._cancel(self)

    def __lt__(self, other: Timer) -> bool:
        return (self.deadline, self.sequence) < (other.deadline, other.sequence)


class Watchdog:
    """Calls callbacks at deadlines of `clock`, from one lazily started daemon thread.

    `schedule` and `Timer.cancel` are thread-safe and cheap (a cancelled timer is dropped from
    the heap at once when it is the earliest, and the heap is compacted when more than half of
    it is cancelled, so memory follows the live timers). `close` stops the thread and drops
    every pending timer; scheduling again afterwards starts a new thread.
    """

    def __init__(self, clock: Clock, *, name: str = "jobscheduler-watchdog") -> None:
        self._clock = clock
        self._name = name
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._heap: list[Timer] = []
        self._live: set[int] = set()
        self._sequence = itertools.count()
        self._thread: threading.Thread | None = None
        self._generation = 0  # bumped by close(): a thread of an older generation exits

    def schedule(self, delay: timedelta | float, callback: Callable[[], None]) -> Timer:
        """Call `callback` once, `delay` (a timedelta or seconds) from now on the clock."""
        if not isinstance(delay, timedelta):
            delay = timedelta(seconds=delay)
        with self._lock:
            timer = Timer(self, self._clock.now() + delay, next(self._sequence), callback)
            heapq.heappush(self._heap, timer)
            self._live.add(timer.sequence)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, args=(self._generation,), name=self._name, daemon=True
                )
                self._thread.start()
            elif self._heap[0] is timer:
                self._changed.notify_all()  # a new earliest deadline: wait less
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
        """Stop the thread (waiting for a running callback to return) and drop all timers."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._generation += 1
            self._heap.clear()
            self._live.clear()
            self._changed.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _cancel(self, timer: Timer) -> bool:
        with self._lock:
            if timer.sequence not in self._live:
                return False
            self._live.discard(timer.sequence)
            self._drop_cancelled()
            if len(self._heap) > 2 * len(self._live) + 16:
                self._heap = [t for t in self._heap if t.sequence in self._live]
                heapq.heapify(self._heap)
            return True

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0].sequence not in self._live:
            heapq.heappop(self._heap)

    def _loop(self, generation: int) -> None:
        with self._lock:
            while self._generation == generation:
                self._drop_cancelled()
                if not self._heap:
                    self._clock.wait(self._changed, None)
                    continue
                timer = self._heap[0]
                delay = (timer.deadline - self._clock.now()).total_seconds()
                if delay > 0:
                    self._clock.wait(self._changed, delay)
                    continue
                heapq.heappop(self._heap)
                self._live.discard(timer.sequence)
                self._lock.release()
                try:
                    timer.callback()
                except Exception:
                    log.exception("watchdog callback %r failed", timer.callback)
                finally:
                    self._lock.acquire()
