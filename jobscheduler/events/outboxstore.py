"""`StoredAlerts`: alerts not delivered are kept in the state store's outbox and retried.

The in-memory `Outbox` sends each alert from its mail server's thread. When a delivery fails
(the server is down, refuses, times out: after the mailer's own retries), or an alert is
given up (its server's queue is full, or the scheduler shuts down before it went), the
alert's message is written to the state store (`StateStore.hold_alert`) with the error.
Every heartbeat of the node (`retry_due`) hands the alerts now due back to the `Outbox`,
whose server thread sends them again; each failure pushes the next attempt out
(`backoff`: 1 min, 2, 4, … up to 1 h). So shutdown never waits on a dead mail server (what
is not sent is kept), and nothing pending is lost across restarts: any node sharing the
store may send it. A store that fails itself costs the alert (logged at ERROR).

An alert held by a previous process is sent with the SMTP settings of the server it was
for when this process has sent an alert there; else through the mail server the ``email:``
section names now (the same server, or the one that replaced it); with no ``email:``
section it waits (looked at again hourly). Due times are on the store's clock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import getaddresses

from ..clock import Clock
from ..model.emailconfig import EmailConfiguration, SmtpSettings
from ..state.base import StateStore
from .mailer import Mailer, SmtpMailer
from .outbox import Alert, Outbox, server_key

__all__ = ["StoredAlerts", "backoff", "server_name"]

log = logging.getLogger("jobscheduler.email")

BATCH = 20  # alerts handed back per heartbeat


def backoff(attempts: int) -> timedelta:
    """When to try again after `attempts` failed tries: 1 min, doubling, at most 1 h."""
    return timedelta(seconds=min(3600, 60 * 2 ** max(0, min(attempts, 12) - 1)))


def server_name(settings: SmtpSettings) -> str:
    """The outbox's key of a mail server: ``host:port:security:user``."""
    host, port, security, user = server_key(settings)
    return f"{host}:{port}:{security}:{user or ''}"


class StoredAlerts:
    """Keeps `outbox`'s undelivered alerts in `store` and hands them back when due."""

    def __init__(
        self,
        store: StateStore,
        outbox: Outbox,
        clock: Clock,
        email: Callable[[], EmailConfiguration | None],
    ) -> None:
        self._store = store
        self._outbox = outbox
        self._clock = clock
        self._email = email
        self._lock = threading.Lock()
        self._held: dict[Alert, tuple[int, int]] = {}  # alert -> (store id, attempts)
        self._known: dict[str, tuple[SmtpSettings, Mailer]] = {}
        outbox.set_hooks(on_undelivered=self.undelivered, on_result=self.result)

    def _learn(self, alert: Alert) -> None:
        with self._lock:
            self._known[server_name(alert.settings)] = (alert.settings, alert.mailer)

    def undelivered(self, alert: Alert, reason: str) -> None:
        """The outbox gave `alert` up (queue full, shutdown): keep it (once)."""
        with self._lock:
            if alert in self._held:  # in the store already: due again after its hold
                del self._held[alert]
                return
        try:
            now = self._store.now()
        except Exception as exc:
            log.error("%s lost: the state store's outbox failed: %s", alert.describe(), exc)
            return
        self._hold(alert, reason, now)

    def result(self, alert: Alert, delivered: bool) -> None:
        """After a delivery attempt: a held alert is done or put off; a new one that failed
        is kept."""
        self._learn(alert)
        with self._lock:
            held = self._held.pop(alert, None)
        try:
            now = self._store.now()  # due times are compared on the store's clock
            if held is None:
                if not delivered:
                    self._hold(alert, "the mail server did not take it", now + backoff(1))
            elif delivered:
                self._store.alert_sent(held[0])
            else:
                self._store.alert_failed(
                    held[0], next_attempt=now + backoff(held[1] + 1), error="delivery failed"
                )
        except Exception as exc:
            log.error("%s: the state store's outbox failed: %s", alert.describe(), exc)

    def _hold(self, alert: Alert, reason: str, due: datetime) -> None:
        try:
            self._store.hold_alert(
                server_name(alert.settings),
                alert.message.as_bytes(),
                alert.recipients,
                next_attempt=due,
                error=reason,
            )
        except Exception as exc:
            log.error("%s lost: the state store's outbox failed: %s", alert.describe(), exc)
            return
        log.warning("%s kept in the outbox, retried from %s", alert.describe(), due.isoformat())

    def retry_due(self) -> int:
        """Hand the alerts due now back to the outbox; how many. Never raises."""
        try:
            due = self._store.due_alerts(limit=BATCH)
        except Exception as exc:
            log.error("reading the outbox of the state store failed: %s", exc)
            return 0
        handed = 0
        for pending in due:
            found = self._settings_for(pending.server)
            message = message_from_bytes(pending.message, policy=policy.default)
            if found is None or not isinstance(message, EmailMessage):
                self._put_off(pending.id, pending.attempts, "no SMTP settings for this server")
                continue
            settings, mailer = found
            senders = getaddresses([str(message.get("From", ""))])
            alert = Alert(
                job=str(message.get("Subject", "(held alert)")),
                status="held",
                settings=settings,
                message=message,
                sender=senders[0][1] if senders else "",
                recipients=pending.recipients,
                mailer=mailer,
            )
            with self._lock:
                self._held[alert] = (pending.id, pending.attempts)
            if self._outbox.put(alert):
                handed += 1
        return handed

    def _settings_for(self, server: str) -> tuple[SmtpSettings, Mailer] | None:
        with self._lock:
            found = self._known.get(server)
        if found is not None:
            return found
        email = self._email()
        if email is None:
            return None
        # Held by a process before this one: through the mail server the ``email:`` section
        # names now (the same one, or the one that replaced it).
        return email.smtp, SmtpMailer(clock=self._clock)

    def _put_off(self, alert_id: int, attempts: int, error: str) -> None:
        try:
            self._store.alert_failed(
                alert_id, next_attempt=self._store.now() + timedelta(hours=1), error=error
            )
        except Exception as exc:
            log.error("the state store's outbox failed: %s", exc)
