"""`Lifecycle`: the phases a worker pool goes through, and waiting for it to be quiet.

`JobProcessor` moves its `WorkerPool` (a `Lifecycle`) through the phases with these methods
only; it never writes the pool's fields:

    NEW --start--> RUNNING --stop--> STOPPED --start--> RUNNING …
    any of these --begin_close--> CLOSING --close (the pool's, once its workers ended)--> CLOSED

Workers run only while RUNNING; the notice thread also while STOPPED (until the notices are
out) and CLOSING. NEW: notices wait for `start` or `drain`; CLOSED: they are delivered in the
thread that makes them.

Every method is called with the processor's lock held (the lock given here).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["CLOSED", "CLOSING", "NEW", "RUNNING", "STOPPED", "Lifecycle"]

NEW, RUNNING, STOPPED, CLOSING, CLOSED = range(5)


class Lifecycle:
    """A pool's phase and its `wait_quiet` callers; a subclass says when it is `busy`."""

    def __init__(self, lock: threading.Lock) -> None:
        self.lock = lock
        self._phase = NEW
        self._quiet = threading.Condition(lock)  # `wait_quiet` waits here
        self._quiet_waiters = 0

    def busy(self) -> bool:
        """Whether anything is under way (lock held): the subclass's to say."""
        raise NotImplementedError

    @property
    def phase(self) -> int:
        """NEW, RUNNING, STOPPED, CLOSING or CLOSED; moved by the methods below only."""
        return self._phase

    @property
    def active(self) -> bool:
        """Whether runs start (the phase is RUNNING)."""
        return self._phase == RUNNING

    @property
    def closing(self) -> bool:
        """Whether the pool is being (or was) shut down: nothing will start again."""
        return self._phase >= CLOSING

    def start(self) -> bool:
        """NEW or STOPPED → RUNNING; False if it was RUNNING already. Raises RuntimeError
        once closing."""
        if self._phase == RUNNING:
            return False
        if self._phase >= CLOSING:
            raise RuntimeError("the processor was shut down")
        self._phase = RUNNING
        return True

    def stop(self) -> bool:
        """RUNNING → STOPPED; False (nothing done) from any other phase."""
        if self._phase != RUNNING:
            return False
        self._phase = STOPPED
        return True

    def begin_close(self) -> bool:
        """→ CLOSING from any earlier phase; False if closing already."""
        if self._phase >= CLOSING:
            return False
        self._phase = CLOSING
        return True

    def _closed(self) -> None:
        """CLOSING → CLOSED: the subclass's `close`, once its threads ended."""
        self._phase = CLOSED

    def wait_quiet(self, quiet: Callable[[], bool], timeout: float | None) -> bool:
        """Wait until `quiet()` is true (the lock is let go meanwhile), checked again each
        time the pool may have become quiet; False if `timeout` (real seconds) passed first.

        The caller is counted before `quiet` is first read: whoever ends the last piece of
        work and finds a caller counted wakes it (`wake_if_quiet`), so no wake-up is missed."""
        self._quiet_waiters += 1
        try:
            return self._quiet.wait_for(quiet, timeout)
        finally:
            self._quiet_waiters -= 1

    def wake_if_quiet(self) -> None:
        """Wake the `wait_quiet` callers if nothing is busy any more."""
        if self._quiet_waiters and not self.busy():
            self._quiet.notify_all()

    def wake_quiet(self) -> None:
        """Wake the `wait_quiet` callers to look again (a thread left, say)."""
        self._quiet.notify_all()
