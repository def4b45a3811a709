"""Time, in one place.

Only this module reads the wall clock or sleeps. Everything else is given a `Clock` (or a
``now``), so tests drive the scheduler with a `FakeClock` that moves only when told.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["SKEW_LIMIT", "SKEW_WARN_AFTER", "Clock", "FakeClock", "SystemClock", "utc"]

SKEW_WARN_AFTER = 1.0
"""Seconds a node's clock may be off the database's before the node warns (`cluster.skew`)."""
SKEW_LIMIT = 5.0
"""Seconds of skew past which a node stops claiming scheduled slots (`cluster.skew`)."""


def utc(dt: datetime) -> datetime:
    """`dt` as an aware UTC datetime (naive datetimes are taken to be UTC already)."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


@runtime_checkable
class Clock(Protocol):
    """What the scheduler needs from time."""

    def now(self) -> datetime:
        """The current instant, aware, in UTC."""
        ...

    def wait(self, condition: threading.Condition, timeout: float | None) -> bool:
        """Wait on `condition` (held by the caller) for at most `timeout` seconds of this clock.

        Returns False when the time ran out, True when woken earlier (by ``notify``). Like
        `threading.Condition.wait`, a wake-up may be spurious: callers re-check their state.
        """
        ...

    def sleep(self, seconds: float) -> None:
        """Block for `seconds` of this clock's time."""
        ...


class SystemClock:
    """The real clock: `datetime.now(UTC)` and real waiting."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def wait(self, condition: threading.Condition, timeout: float | None) -> bool:
        if timeout is not None and timeout <= 0:
            return False
        return condition.wait(timeout)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def __repr__(self) -> str:
        return "SystemClock()"


class FakeClock:
    """A clock that moves only when told, and refuses to go backwards.

    Threads waiting through `wait` or `sleep` wake when `advance` or `set` moves the clock past
    their deadline. Aware datetimes only; naive ones are taken to be UTC.
    """

    def __init__(self, start: datetime) -> None:
        self._now = utc(start)
        self._lock = threading.Lock()
        self._moved = threading.Condition(self._lock)
        self._waiting: dict[int, threading.Condition] = {}

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta | float) -> datetime:
        """Move forward by `delta` (a timedelta or seconds) and wake the waiters now due."""
        if not isinstance(delta, timedelta):
            delta = timedelta(seconds=delta)
        if delta < timedelta(0):
            raise ValueError(f"FakeClock cannot go backwards (advance by {delta})")
        with self._lock:
            return self._move_to(self._now + delta)

    def set(self, when: datetime) -> datetime:
        """Move to `when` (not before the present) and wake the waiters now due."""
        when = utc(when)
        with self._lock:
            if when < self._now:
                raise ValueError(f"FakeClock cannot go backwards (from {self._now} to {when})")
            return self._move_to(when)

    def _move_to(self, when: datetime) -> datetime:
        self._now = when
        self._moved.notify_all()
        conditions = list(self._waiting.values())
        # Wake the waiters outside our lock: they take it again to read the time.
        self._lock.release()
        try:
            for condition in conditions:
                with condition:
                    condition.notify_all()
        finally:
            self._lock.acquire()
        return when

    def wait(self, condition: threading.Condition, timeout: float | None) -> bool:
        with self._lock:
            deadline = None if timeout is None else self._now + timedelta(seconds=timeout)
            if deadline is not None and self._now >= deadline:
                return False
            token = object()  # one entry per waiter: several threads may share a condition
            key = id(token)
            self._waiting[key] = condition
        try:
            # The caller holds `condition`; `advance` notifies it, as does the caller's own code.
            condition.wait()
        finally:
            with self._lock:
                self._waiting.pop(key, None)
        with self._lock:
            return deadline is None or self._now < deadline

    def sleep(self, seconds: float) -> None:
        with self._lock:
            deadline = self._now + timedelta(seconds=max(seconds, 0))
            while self._now < deadline:
                self._moved.wait()

    def __repr__(self) -> str:
        return f"FakeClock({self._now.isoformat()})"
