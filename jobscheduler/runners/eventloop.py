"""`EventLoopThread`: the asyncio event loop that async internal jobs run on, in a thread of
its own (one per `Runner`, so one per scheduler).

The thread starts at the first async run (a scheduler that never runs one starts none) and
ends at `close`: tasks still going then are cancelled and awaited for up to `CLOSE_GRACE`
seconds, async generators closed, the loop closed. A scheduler's shutdown closes it once its
runs have ended, so what still goes on then is a run given up because it ignored its stop:
it is left behind, as a given-up sync run's thread is. A closed one starts a new loop at the
next need, as the runner's watchdog does. Only async jobs run on this loop: nothing else the
scheduler does ever blocks it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

__all__ = ["EventLoopThread"]

log = logging.getLogger("jobscheduler.runners")

CLOSE_GRACE = 1.0  # seconds (the loop's own time) for tasks left at `close` to end


class EventLoopThread:
    """One event loop in one daemon thread, started when first needed (see the module notes)."""

    def __init__(self, name: str = "jobscheduler-asyncio") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # Callbacks wait here, and the loop is woken once per batch, not once per callback:
        # a wake-up is a write to the loop's pipe, and a burst of runs starts 1,000 at once.
        self._pending: deque[Callable[[], object]] = deque()
        self._woken = False  # a `_drain` is scheduled and has not started taking (lock held)

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Have the loop's thread call `callback` soon, in order of the calls (any thread)."""
        with self._lock:  # never onto a loop `close` is ending
            loop = self._loop
            if loop is None:
                import asyncio  # here: a scheduler without async jobs never loads asyncio

                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=self._main, args=(loop,), name=self._name, daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            self._pending.append(callback)
            if not self._woken:
                self._woken = True
                # Callbacks made before run_forever begins are run once it does.
                loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        """Call the waiting callbacks, oldest first (in the loop's thread)."""
        with self._lock:
            self._woken = False  # first: a callback added from now on wakes the loop again
        pending = self._pending
        while pending:
            callback = pending.popleft()
            try:
                callback()
            except Exception:
                log.exception("a callback on the event loop of async jobs raised")

    @property
    def running(self) -> bool:
        """Whether the loop's thread is started (for tests and status pages)."""
        with self._lock:
            return self._thread is not None

    @property
    def thread(self) -> threading.Thread | None:
        with self._lock:
            return self._thread

    def close(self) -> None:
        """End the loop (see the module notes) and wait for its thread; idempotent."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join()

    @staticmethod
    def _main(loop: asyncio.AbstractEventLoop) -> None:
        import asyncio

        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.wait(tasks, timeout=CLOSE_GRACE))
            loop.run_until_complete(loop.shutdown_asyncgens())
        except Exception:
            log.exception("the event loop of async jobs crashed")
        finally:
            loop.close()
