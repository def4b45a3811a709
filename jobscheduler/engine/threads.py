"""Waking an engine thread without a lock, joining one, and an owner's background thread.

An idle thread of the engine (a worker, the notice thread) sleeps on a lock of its own, held
(`new_waiter`), listed where others find it. Another thread wakes it by popping it from that
list — one C call, so exactly one waker gets it — and releasing it (`release_one`). Waking
takes no Python lock, so runs are handed out while the processor's lock is held.

`LoopThread` is the life cycle of a component's one background thread (the queue consumer,
the pause follower, the live output, the overdue watch): started and stopped under the
owner's condition, the one its loop waits on.
"""

from __future__ import annotations

import threading
from _thread import LockType as Waiter
from _thread import allocate_lock
from collections.abc import Callable

__all__ = ["LoopThread", "Waiter", "join", "new_waiter", "release_all", "release_one"]


def new_waiter() -> Waiter:
    """A lock to sleep on, held: ``acquire()`` blocks until another thread releases it."""
    waiter = allocate_lock()
    waiter.acquire()
    return waiter


def release_one(waiters: list[Waiter]) -> None:
    """Wake the thread on top of `waiters`, if any (the pop decides who wakes it)."""
    if waiters:  # most calls find nobody waiting: no exception raised for nothing
        try:
            waiter = waiters.pop()
        except IndexError:
            return
        waiter.release()


def release_all(waiters: list[Waiter]) -> None:
    while waiters:
        release_one(waiters)


def join(thread: threading.Thread | None, timeout: float | None = None) -> None:
    """Join `thread` (for at most `timeout` seconds; None: until it ends), unless it is None
    or the calling thread."""
    if thread is not None and thread is not threading.current_thread():
        thread.join(timeout)


class LoopThread:
    """An owner's background thread: a named daemon thread running `target`, started and
    stopped under the owner's `condition` (re-entrant, as ``threading.Condition()`` is: the
    owner may hold it when calling here). `target` loops until it finds `stopping` (read
    with `condition` held) and then returns. After `stop`, `start` starts a new thread."""

    def __init__(
        self,
        condition: threading.Condition,
        target: Callable[[], None],
        name: str,
        *,
        join_timeout: float | None = None,
    ) -> None:
        self._condition = condition
        self._target = target
        self._name = name
        self._join_timeout = join_timeout  # how long `stop` waits for the thread (None: ever)
        self._thread: threading.Thread | None = None
        self._stopping = False

    @property
    def running(self) -> bool:
        """Whether a thread was started and not stopped since."""
        return self._thread is not None

    @property
    def stopping(self) -> bool:
        """Whether `stop` was called since the last `start` (False before any)."""
        return self._stopping

    def start(self) -> bool:
        """Start the thread; False (nothing done) when one runs already."""
        with self._condition:
            if self._thread is not None:
                return False
            self._stopping = False
            self._thread = threading.Thread(target=self._target, name=self._name, daemon=True)
            self._thread.start()
            return True

    def stop(self) -> None:
        """Set `stopping` and wake the thread, then wait for it to end (outside the lock, so
        it can finish its round), up to the join timeout. Called from the thread itself, it
        does not wait. Nothing to do when no thread runs (`stopping` set all the same)."""
        with self._condition:
            thread, self._thread = self._thread, None
            self._stopping = True
            self._condition.notify_all()
        join(thread, self._join_timeout)
