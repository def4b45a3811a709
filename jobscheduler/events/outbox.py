"""Alerts on their way: one bounded queue and one delivery thread per mail server.

Alerts rendered by `EmailEventHandler` are put here by the scheduler's handler dispatch and
sent from a thread of their own mail server, so a server that hangs or answers slowly delays
only the alerts that go to it, never the alerts to other servers, the handlers, or the
scheduler. A *server* is what `server_key` says: host, port, security and user name.

- **Bounded.** Each server's queue holds at most `SmtpSettings.queue_size` alerts waiting
  (the one being sent not counted). When it is full, the *new* alert is dropped: the alerts
  already waiting (the first news of a failure, usually the cause) keep their order. The drop
  is an ERROR line naming the job, the status, the recipients, the subject and the reason.
- **Bounded in time.** One message is sent by `Mailer.send`; `SmtpMailer` returns within its
  `deadline` (every attempt bounded as a whole by ``smtp.timeout``, retries and waits
  included), so a queue always moves.
- **Threads.** A server's thread is started when an alert arrives for it and ends when its
  queue is empty: no thread waits for nothing, and a server no longer used costs nothing.
- **Shutdown.** `close(timeout)` stops taking alerts, lets the queues go on for at most
  `timeout` seconds, then gives up: every alert still waiting, and every one still being sent
  (it may yet arrive: its attempt is bounded, but not waited for), is logged at ERROR, one
  line each, and handed to `on_undelivered`. Nothing is dropped without a log line.
- **The seam for a persistent outbox.** `on_undelivered(alert, reason)` is called for every
  alert given up (full queue, shutdown), and `pending()` lists those not yet delivered: a state
  store can keep them and hand them back with `put` after a restart.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from email.message import EmailMessage

from ..clock import Clock, SystemClock
from ..model.emailconfig import SmtpSettings
from .mailer import Mailer, MailError

__all__ = ["Alert", "Outbox", "ServerKey", "deliver", "server_key"]

logger = logging.getLogger("jobscheduler.email")

ServerKey = tuple[str, int, str, str | None]


def server_key(settings: SmtpSettings) -> ServerKey:
    """What tells mail servers apart: (host, port, security, user name)."""
    return (settings.host.lower(), settings.port, str(settings.security), settings.username)


@dataclass(frozen=True, eq=False)
class Alert:
    """One rendered alert, ready to be sent: the message, its envelope and where it goes."""

    job: str
    status: str
    settings: SmtpSettings
    message: EmailMessage
    sender: str
    recipients: tuple[str, ...]
    mailer: Mailer = field(repr=False)

    @property
    def subject(self) -> str:
        return str(self.message.get("Subject", ""))

    @property
    def server(self) -> str:
        return f"{self.settings.host}:{self.settings.port}"

    def describe(self) -> str:
        """How log lines name it: job, status, recipients, subject."""
        return (
            f"alert for job {self.job!r} ({self.status}) to {', '.join(self.recipients)} "
            f"(subject {self.subject!r})"
        )


def deliver(alert: Alert) -> bool:
    """Send `alert` now, in this thread; True when the server took it. Never raises: the
    outcome is logged on ``jobscheduler.email`` (INFO sent, WARNING some recipients refused,
    ERROR not sent)."""
    to = ", ".join(alert.recipients)
    try:
        refused = alert.mailer.send(
            alert.settings, alert.message, sender=alert.sender, recipients=alert.recipients
        )
    except MailError as exc:
        logger.error("alert for job %r (%s) to %s not sent: %s", alert.job, alert.status, to, exc)
        return False
    except Exception:
        logger.exception(
            "alert for job %r (%s) to %s not sent: unexpected error", alert.job, alert.status, to
        )
        return False
    if refused:
        listed = "; ".join(f"{a} ({code} {text})" for a, (code, text) in refused.items())
        logger.warning(
            "alert for job %r (%s): the server refused some recipients: %s",
            alert.job,
            alert.status,
            listed,
        )
    logger.info("alert for job %r (%s) sent to %s", alert.job, alert.status, to)
    return True


class _Server:
    __slots__ = ("current", "thread", "waiting")

    def __init__(self) -> None:
        self.waiting: deque[Alert] = deque()
        self.current: Alert | None = None
        self.thread: threading.Thread | None = None

    def start(self, thread: threading.Thread) -> None:
        """`thread` sends this server's alerts from now on."""
        self.thread = thread
        thread.start()

    def next_alert(self) -> Alert | None:
        """The next alert to send, now the one being sent (None: the queue is empty)."""
        self.current = self.waiting.popleft() if self.waiting else None
        return self.current

    def stopped(self, thread: threading.Thread) -> None:
        """`thread` no longer sends (nothing if another one took over)."""
        self.current = None
        if self.thread is thread:
            self.thread = None

    def clear(self) -> None:
        """Nothing waits, is sent or sends any more."""
        self.waiting.clear()
        self.current = None
        self.thread = None


UndeliveredHook = Callable[[Alert, str], None]
ResultHook = Callable[[Alert, bool], None]


class Outbox:
    """Per-server delivery queues (see the module docstring). Thread-safe."""

    def __init__(
        self, *, clock: Clock | None = None, on_undelivered: UndeliveredHook | None = None
    ) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self.on_undelivered = on_undelivered
        # Called after each delivery attempt with (alert, delivered), from the server's thread
        # (`events.outboxstore` keeps the failed ones in the state store).
        self.on_result: ResultHook | None = None
        self._lock = threading.Condition()
        self._servers: dict[ServerKey, _Server] = {}
        self._closed = False
        self._generation = 0  # bumped by close: threads of an older generation stop sending

    def set_hooks(
        self,
        *,
        on_undelivered: UndeliveredHook | None = None,
        on_result: ResultHook | None = None,
    ) -> None:
        """Replace both hooks: `on_undelivered` (see the module notes) and `on_result`."""
        self.on_undelivered = on_undelivered
        self.on_result = on_result

    def put(self, alert: Alert) -> bool:
        """Queue `alert` for its server; False (and an ERROR line) when it is refused: the
        outbox is closed, or the server's queue is full."""
        with self._lock:
            if self._closed:
                reason = "the scheduler is shutting down"
            else:
                key = server_key(alert.settings)
                server = self._servers.get(key)
                if server is None:
                    server = self._servers[key] = _Server()
                limit = alert.settings.queue_size
                if len(server.waiting) >= limit:
                    reason = (
                        f"the queue for {alert.server} is full ({limit} alerts waiting; "
                        "the server is slow or down)"
                    )
                else:
                    server.waiting.append(alert)
                    if server.thread is None:
                        server.start(
                            threading.Thread(
                                target=self._work,
                                args=(key, server, self._generation),
                                name=f"jobscheduler-mail-{alert.server}",
                                daemon=True,
                            )
                        )
                    return True
        self._give_up(alert, reason)
        return False

    def _work(self, key: ServerKey, server: _Server, generation: int) -> None:
        """A server's thread: send its alerts one by one until its queue is empty."""
        while True:
            with self._lock:
                alert = server.next_alert() if generation == self._generation else None
                if alert is None:
                    server.stopped(threading.current_thread())
                    self._lock.notify_all()
                    return
            delivered = deliver(alert)
            hook = self.on_result
            if hook is not None:
                try:
                    hook(alert, delivered)
                except Exception:
                    logger.exception("on_result hook failed for %s", alert.describe())

    def pending(self) -> list[Alert]:
        """The alerts not delivered yet: being sent, then waiting, per server."""
        with self._lock:
            return [
                alert
                for server in self._servers.values()
                for alert in ([server.current] if server.current else []) + list(server.waiting)
            ]

    def _busy(self) -> bool:
        return any(s.waiting or s.current is not None for s in self._servers.values())

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every queue is empty and nothing is being sent (True) or `timeout`."""
        end = None if timeout is None else self._clock.now() + timedelta(seconds=timeout)
        with self._lock:
            while self._busy():
                left = None if end is None else (end - self._clock.now()).total_seconds()
                if left is not None and left <= 0:
                    return False
                self._clock.wait(self._lock, left)
            return True

    def close(self, timeout: float = 0.0) -> list[Alert]:
        """Take no more alerts; let the queues work for at most `timeout` seconds; then give
        up every alert not delivered (logged, `on_undelivered`) and return them."""
        with self._lock:
            self._closed = True
        self.join(timeout)
        with self._lock:
            self._generation += 1
            left: list[tuple[Alert, str]] = []
            for server in self._servers.values():
                if server.current is not None:
                    left.append(
                        (server.current, "still being sent at shutdown (it may yet arrive)")
                    )
                left.extend((alert, "still queued at shutdown") for alert in server.waiting)
                server.clear()
            self._servers.clear()
            self._lock.notify_all()
        for alert, reason in left:
            self._give_up(alert, reason)
        return [alert for alert, _ in left]

    def reopen(self) -> None:
        with self._lock:
            self._closed = False

    def _give_up(self, alert: Alert, reason: str) -> None:
        logger.error("%s not delivered: %s", alert.describe(), reason)
        hook = self.on_undelivered
        if hook is not None:
            try:
                hook(alert, reason)
            except Exception:
                logger.exception("on_undelivered hook failed for %s", alert.describe())
