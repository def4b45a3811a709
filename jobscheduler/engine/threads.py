"""Waking an engine thread without a lock, and joining one.

An idle thread of the engine (a worker, the notice thread) sleeps on a lock of its own, held
(`new_waiter`), listed where others find it. Another thread wakes it by popping it from that
list — one C call, so exactly one waker gets it — and releasing it (`release_one`). Waking
takes no Python lock, so runs are handed out while the processor's lock is held.
"""

from __future__ import annotations

import threading
from _thread import LockType as Waiter
from _thread import allocate_lock

__all__ = ["Waiter", "join", "new_waiter", "release_all", "release_one"]


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


def join(thread: threading.Thread | None) -> None:
    """Join `thread`, unless it is None or the calling thread."""
    if thread is not None and thread is not threading.current_thread():
        thread.join()
