"""Who hears of each run: handlers registered on jobs and groups, called off the scheduler.

Handlers run on a small pool of their own threads, one task per handler and event, so a slow
mail server delays no one else, and never the scheduler. A handler that raises is logged on
``jobscheduler.events`` and the others still run. Handlers may therefore be called
concurrently (for different runs), and must be thread-safe, as the specification asks.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from ..model.event import Event
from ..model.execution import Execution
from ..model.job import Job
from .base import EventHandler

__all__ = ["HandlerRegistry"]

log = logging.getLogger("jobscheduler.events")


class HandlerRegistry:
    """Handlers by job or group name, and their dispatch."""

    def __init__(self, max_threads: int = 4) -> None:
        self._lock = threading.Lock()
        self._handlers: dict[str, list[EventHandler]] = {}
        self._max_threads = max_threads
        self._pool: ThreadPoolExecutor | None = None
        self._pending: set[Future[None]] = set()
        self._closed = False

    def add(self, name: str, handler: EventHandler) -> None:
        if not callable(getattr(handler, "handle", None)):
            raise TypeError(f"a handler needs a handle(job, event, execution) method: {handler!r}")
        with self._lock:
            self._handlers.setdefault(name, []).append(handler)

    def remove(self, name: str, handler: EventHandler) -> bool:
        """Remove `handler` from `name`; False when it was not there."""
        with self._lock:
            handlers = self._handlers.get(name, [])
            for index, existing in enumerate(handlers):
                if existing is handler or existing == handler:
                    del handlers[index]
                    return True
            return False

    def handlers(self, name: str) -> list[EventHandler]:
        with self._lock:
            return list(self._handlers.get(name, ()))

    def all_handlers(self) -> list[EventHandler]:
        with self._lock:
            return [h for handlers in self._handlers.values() for h in handlers]

    def drop(self, name: str) -> None:
        """Forget every handler of `name` (its job or group is gone)."""
        with self._lock:
            self._handlers.pop(name, None)

    def dispatch(
        self,
        job: Job,
        event: Event,
        execution: Execution,
        names: Iterable[str],
        extra: Iterable[EventHandler] = (),
    ) -> None:
        """Hand the event to the handlers of each of `names` and to `extra`, off this thread."""
        if not self._closed and not self._handlers and not extra:
            return  # nobody listens (read without the lock: a handler added meanwhile is late)
        with self._lock:
            if self._closed:
                log.warning(
                    "event %s of job %r after shutdown: handlers not called", event, job.name
                )
                return
            targets = [h for name in names for h in self._handlers.get(name, ())]
            targets.extend(extra)
            if not targets:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._max_threads, "jobscheduler-handler")
            futures = [self._pool.submit(_call, h, job, event, execution) for h in targets]
            self._pending.update(futures)
        for future in futures:
            future.add_done_callback(self._done)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every handler call submitted so far has returned (True) or `timeout`."""
        with self._lock:
            pending = list(self._pending)
        _, not_done = concurrent.futures.wait(pending, timeout)
        return not not_done

    def close(self, wait: bool = True) -> None:
        """Refuse new events; with `wait`, return when the calls submitted so far are done.

        Calls already submitted are never cancelled: the alert about a run that
        ``shutdown(wait=False)`` just killed is still sent.
        """
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait)

    def reopen(self) -> None:
        with self._lock:
            self._closed = False


def _call(handler: EventHandler, job: Job, event: Event, execution: Execution) -> None:
    """One handler on one event, in the handler pool: an exception is logged, never raised."""
    try:
        handler.handle(job, event, execution)
    except Exception:
        log.exception("handler %r failed on an event of job %r", handler, job.name)
