"""Who hears of each run: handlers registered on jobs and groups, called off the scheduler.

Handlers run on a small pool of their own threads, one task per handler and event, so a slow
handler delays no one else, and never the scheduler. A handler that raises is logged on
``jobscheduler.events`` and the others still run. Handlers may therefore be called
concurrently (for different runs), and must be thread-safe, as the specification asks.

E-mail alerts take another road, so that neither slow handlers nor slow mail servers can hold
them: an `EmailEventHandler` is called on the *alert* pool (its own threads, never busy for
long: it only renders the alert, which is bounded in time) and puts the alert on its mail
server's queue in `outbox` (`jobscheduler.events.outbox.Outbox`), sent from that server's own
thread. `close` bounds the wait for alerts (`mail_drain`, `mail_grace` seconds), then logs
every alert not delivered.
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
from .email import EmailEventHandler
from .outbox import Outbox

__all__ = ["HandlerRegistry"]

log = logging.getLogger("jobscheduler.events")


class HandlerRegistry:
    """Handlers by job or group name, and their dispatch."""

    mail_drain = 10.0
    """Seconds `close(wait=True)` lets the mail queues work before giving up what is left."""
    mail_grace = 1.0
    """Seconds `close(wait=False)` lets them work (alerts to a healthy server go out)."""

    def __init__(self, max_threads: int = 4, *, outbox: Outbox | None = None) -> None:
        self._lock = threading.Lock()
        self._handlers: dict[str, list[EventHandler]] = {}
        self._max_threads = max_threads
        self._pool: ThreadPoolExecutor | None = None
        self._alert_pool: ThreadPoolExecutor | None = None
        self._pending: set[Future[None]] = set()
        self._closed = False
        self.outbox = outbox if outbox is not None else Outbox()

    @property
    def listening(self) -> bool:
        """Whether `dispatch` without `extra` may do anything: a handler is registered, or
        the registry is closed (an event then is logged as late). Read without the lock."""
        return self._closed or bool(self._handlers)

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
            futures = [self._submit(h, job, event, execution) for h in targets]
            self._pending.update(futures)
        for future in futures:
            future.add_done_callback(self._done)

    def _submit(
        self, handler: EventHandler, job: Job, event: Event, execution: Execution
    ) -> Future[None]:
        # Called with the lock held.
        if isinstance(handler, EmailEventHandler):
            if self._alert_pool is None:
                self._alert_pool = ThreadPoolExecutor(2, "jobscheduler-alert")
            return self._alert_pool.submit(_queue, handler, job, event, execution, self.outbox)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._max_threads, "jobscheduler-handler")
        return self._pool.submit(_call, handler, job, event, execution)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every handler call submitted so far has returned and every alert queued
        has been sent or given up (True), or `timeout`."""
        with self._lock:
            pending = list(self._pending)
        _, not_done = concurrent.futures.wait(pending, timeout)
        return not not_done and self.outbox.join(timeout)

    def close(self, wait: bool = True) -> None:
        """Refuse new events; with `wait`, return when the handler calls submitted so far are
        done.

        Alerts are rendered and queued in either case (that is quick and bounded): the alert
        about a run that ``shutdown(wait=False)`` just killed still goes out. The mail queues
        then get `mail_drain` seconds (`wait`) or `mail_grace` seconds (not `wait`); every alert
        still queued or being sent after that is logged at ERROR and handed to the outbox's
        ``on_undelivered`` hook. A dead mail server never holds `close` longer.
        """
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            alert_pool, self._alert_pool = self._alert_pool, None
        if alert_pool is not None:
            alert_pool.shutdown(wait=True)  # rendering only: bounded by the template limits
        self.outbox.close(self.mail_drain if wait else self.mail_grace)
        if pool is not None:
            pool.shutdown(wait=wait)

    def reopen(self) -> None:
        with self._lock:
            self._closed = False
        self.outbox.reopen()


def _queue(
    handler: EmailEventHandler, job: Job, event: Event, execution: Execution, outbox: Outbox
) -> None:
    """One alert handler on one event, in the alert pool: render, put on its server's queue."""
    try:
        handler.queue_alert(job, event, execution, outbox)
    except Exception:
        log.exception("handler %r failed on an event of job %r", handler, job.name)


def _call(handler: EventHandler, job: Job, event: Event, execution: Execution) -> None:
    """One handler on one event, in the handler pool: an exception is logged, never raised."""
    try:
        handler.handle(job, event, execution)
    except Exception:
        log.exception("handler %r failed on an event of job %r", handler, job.name)
