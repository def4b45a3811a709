"""`PauseFollower`: this node follows the pauses every node shares through the state store.

A pause or resume made anywhere (another node, the CLI, the HTTP API of another daemon) is
taken up here within `POLL` seconds or at once:

- a store that tells of changes (`StateStore.watch_pauses`: PostgreSQL's ``LISTEN`` on the
  connection the queue listens on already, payload ``pause``; the memory store in process)
  wakes the thread, which reads the pauses then: an idle node makes no query for them;
- a store that cannot (SQLite) is polled every `POLL` seconds for `pause_version`, one
  integer read on the read connection (no write transaction, no write lock), and the pauses
  are read only when it moved.

A pause with an `until` ends by itself: the thread wakes when the first one in force ends and
hands the job back to the engine, reading nothing. The thread never dies of a store that
fails: the error is logged and the next round tries again.
"""

from __future__ import annotations

import logging
import threading

from ..clock import Clock
from ..engine.threads import LoopThread
from ..policies.runpolicies import RunPolicies
from ..state.base import StateStore

__all__ = ["POLL", "PauseFollower"]

log = logging.getLogger("jobscheduler")

POLL = 1.0
"""Seconds between two reads of `pause_version` on a store that does not tell of changes."""


class PauseFollower:
    """Follows `store`'s pauses for `policies` (see the module notes). `start`, `stop`."""

    def __init__(
        self, store: StateStore, policies: RunPolicies, clock: Clock, *, poll: float = POLL
    ) -> None:
        self._store = store
        self._policies = policies
        self._clock = clock
        self.poll = poll
        self._cond = threading.Condition()
        self._thread = LoopThread(self._cond, self._loop, "jobscheduler-pauses")
        self._woken = False
        self._watched: bool | None = None  # whether the store wakes it (None: not asked yet)
        self._version: int | None = None  # the pause_version last read (polling only)
        self.rounds = 0  # reads of the pauses made (tests, the benchmark)

    def start(self) -> None:
        with self._cond:
            if self._thread.running:
                return
            if self._watched is None:  # once: the store keeps calling until it closes
                self._watched = self._store.watch_pauses(self.wake)
            self._thread.start()

    def stop(self) -> None:
        self._thread.stop()

    def wake(self) -> None:
        """The pauses may have changed: read them now."""
        with self._cond:
            self._woken = True
            self._cond.notify()

    def _timeout(self) -> float | None:
        """How long the thread may wait before its next round (None: until woken)."""
        waits: list[float] = []
        if not self._watched:
            waits.append(self.poll)
        end = self._policies.next_end()
        if end is not None:
            waits.append(max(0.0, (end - self._clock.now()).total_seconds()))
        return min(waits) if waits else None

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._woken and not self._thread.stopping:
                    self._clock.wait(self._cond, self._timeout())
                if self._thread.stopping:
                    return
                woken, self._woken = self._woken, False
            try:
                self._round(woken)
            except Exception:
                log.exception("following the pauses in the state store failed")

    def _round(self, woken: bool) -> None:
        version = None
        if not self._watched and not woken:
            version = self._store.pause_version()
            woken = version != self._version
        if woken:
            self.rounds += 1
            if self._policies.refresh() and version is not None:
                self._version = version  # else read again at the next round
        else:
            self._policies.settle()  # a pause's `until` may have come
