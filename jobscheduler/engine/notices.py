"""`NoticeThread`: reports the runs that never started, and the runs workers hand over.

A run that does not start (refused for ``max_instances``, dropped at ``stop``, its job paused
or removed) ends in a *notice*: ``(job, execution)`` with event NOT_STARTED, queued in the
ready runs's ``notices``. One thread, started with the processor, calls ``on_finished`` for
them, so a refused run is reported at once even while every worker is busy. While runs wait
to start, a worker also hands it its finished run to report (`wake`, without the lock) and
goes on to start the next: under load, starting runs comes before reporting them.

The thread sleeps on a lock of its own (`threads.new_waiter`): a worker appends its notice,
then releases whoever is listed, and the thread lists itself before it reads the queue
again, so no notice is left unseen. It takes notices in batches (one lock round per batch)
and reports each batch with one `report_many` call (the pool's: a burst's finishes written,
marked and told per batch, see `WorkerPool.report_many`), never held back for more to come.

Starts first: while runs are being started (due runs wait and a worker is free to take them,
`WorkerPool.starting`), the thread leaves the notices queued and looks again every
`_LOOK_AGAIN` seconds, unless `_HELD_MOST` wait (memory stays bounded under a load that never
lets up). On a shared core the reports would take turns with the starts, and every start of
a burst would come later by its share; the reports follow as soon as the starts are done.
Runs that wait for a busy worker rather than for the CPU hold nothing back: a refused run is
still reported at once while every worker is busy.

An exception from ``on_finished`` is logged by the pool; one that ends this thread anyway
puts its undelivered notices back (a batch being reported counts as undelivered), and the
next notice starts a new thread.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence

from ..model.execution import Execution
from ..model.job import Job
from .lifecycle import CLOSED, CLOSING, NEW, RUNNING, Lifecycle
from .threads import Waiter, new_waiter, release_all, release_one

__all__ = ["Notice", "NoticeThread"]

log = logging.getLogger("jobscheduler.processor")

Notice = tuple[Job, Execution]

_BATCH = 64  # notices the notice thread takes per lock round
# While runs are being started, finished runs' reports wait, up to this many of them
# (memory stays bounded under a load that never lets up), looked at again this often (s).
_HELD_MOST = 1024
_LOOK_AGAIN = 0.005


class NoticeThread:
    """The notice thread of one worker pool, `pool` (its phases, and the processor's lock,
    ``pool.lock``); `report(job, execution)` calls ``on_finished`` and logs what it raises
    (lock not held), `report_many(notices)` does it for a batch of notices, in order. See the
    module notes. Methods marked "lock held" are called with the lock held."""

    def __init__(
        self,
        pool: Lifecycle,
        report: Callable[[Job, Execution], None],
        report_many: Callable[[Sequence[Notice]], None],
        notices: deque[Notice],
        starting: Callable[[], bool],
    ) -> None:
        self._pool = pool
        self._starting_now = starting
        self._report = report
        self._report_many = report_many
        self._lock = pool.lock
        self._notices = notices
        self.out = 0  # notices taken and not yet delivered (lock held)
        self._news: list[Waiter] = []  # the thread, while it waits for notices
        self._thread: threading.Thread | None = None  # None: not started, or it ended

    def notify(self) -> None:
        """Notices wait (lock held): wake the notice thread, starting it if needed."""
        if self._pool.phase in (NEW, CLOSED):
            return
        if self._thread is not None:
            release_one(self._news)
            return
        thread = threading.Thread(target=self._main, name="jobscheduler-notices", daemon=True)
        self._thread = thread
        thread.start()

    def wake(self) -> None:
        """A notice was just appended (lock NOT held): wake the thread, without the lock when
        it is alive (read after the append: see the module notes)."""
        if self._thread is None:
            with self._lock:
                self.notify()
        elif self._news:  # (in a burst the thread is busy, not listed: no call)
            release_one(self._news)

    def halt(self) -> None:
        """The phase left RUNNING (lock held): the thread finishes what is queued."""
        release_all(self._news)
        if self._notices:
            self.notify()

    def close(self) -> threading.Thread | None:
        """The phase is CLOSED (lock held): the thread ends; returns it, for joining."""
        release_all(self._news)
        return self._thread

    def take(self) -> Notice | None:
        """The oldest notice, now the caller's to `deliver` (lock held); None if none."""
        if not self._notices:
            return None
        self.out += 1
        return self._notices.popleft()

    def deliver(self, notice: Notice) -> None:
        """Report a notice taken with `take` (lock not held)."""
        self._report(*notice)
        with self._lock:
            self.out -= 1
            self._pool.wake_if_quiet()

    def deliver_closed(self) -> None:
        """Once CLOSED, deliver waiting notices in the calling thread (lock not held)."""
        while True:
            with self._lock:
                if self._pool.phase != CLOSED:
                    return
                notice = self.take()
            if notice is None:
                return
            self.deliver(notice)

    def _starting(self) -> bool:
        """Whether the reports wait for runs being started (lock held; see the module notes):
        runs wait to start and a worker is free to take them, while the pool runs."""
        return self._pool.phase == RUNNING and self._starting_now()

    def _main(self) -> None:
        lock = self._lock
        notices = self._notices
        news = self._news
        pool = self._pool
        report_many = self._report_many
        waiter = new_waiter()
        batch: list[Notice] = []
        done = 0  # how many of `batch` were delivered
        crashed = False
        try:
            while True:
                with lock:
                    if batch:
                        self.out -= len(batch)
                        batch = []
                        done = 0
                        pool.wake_if_quiet()
                    while not notices:
                        if pool.phase not in (RUNNING, CLOSING):
                            return
                        # Listed before `notices` is read again: a worker appends its notice,
                        # then releases whoever is listed, so no notice is left unseen.
                        news.append(waiter)
                        if notices:
                            release_one(news)
                        lock.release()
                        try:
                            waiter.acquire()
                        finally:
                            lock.acquire()
                    if len(notices) < _HELD_MOST and self._starting():
                        # Runs are being started: they go first (see the module notes).
                        lock.release()
                        try:
                            waiter.acquire(timeout=_LOOK_AGAIN)  # not listed: sleeps it out
                        finally:
                            lock.acquire()
                        continue
                    # Take a few at once: one lock round per batch, not per report.
                    batch = [notices.popleft() for _ in range(min(len(notices), _BATCH))]
                    self.out += len(batch)
                if batch:
                    report_many(batch)
                    done = len(batch)
        except BaseException:
            crashed = True
            log.exception("the notice thread crashed")
        finally:
            with lock:
                if waiter in news:
                    news.remove(waiter)
                if batch:  # those not delivered go back to the front, for the next thread
                    self.out -= len(batch)
                    notices.extendleft(reversed(batch[done:]))
                if self._thread is threading.current_thread():
                    self._thread = None  # the next notice starts a new notice thread
                if notices and not crashed:
                    self.notify()  # one came as this thread was leaving
