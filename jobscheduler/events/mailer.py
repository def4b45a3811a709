"""Sending one e-mail through SMTP: a bounded attempt, a few retries with backoff, clear reasons.

`SmtpMailer.send` connects afresh for every message (alerts are rare; a kept-open connection
would only go stale), speaks plain SMTP, STARTTLS or implicit TLS as `SmtpSettings.security`
says, logs in when a username is set, and hands the message over.

One attempt is bounded as a whole by `SmtpSettings.timeout`: connecting, TLS, the greeting, AUTH
and the whole dialogue. A socket timeout alone bounds each read, not the attempt (a server that
drips one byte a second would hold it for ever), so a watchdog shuts the connection down when
the attempt's time is up (on a duplicate of the socket's descriptor: it reaches the connection
under TLS too, even during the handshake). The whole message, retries and waits included, is
bounded too: ``(retries + 1) × timeout`` plus the backoff waits; an attempt never gets more than
what is left of that, and no wait starts that would end past it. (Resolving the host name is
the system resolver's business and is not interrupted; use an address or a local resolver.)

Retries: a failure that another attempt could cure (the server cannot be reached, the
connection drops or times out, a 4xx "try again later" reply) is retried up to
`SmtpSettings.retries` more times, waiting ``backoff``, ``2 × backoff``, ``4 × backoff`` … (at
most ``max_backoff``) seconds of the given `Clock` in between. A failure that another attempt
cannot cure (a 5xx reply such as "550 no such user" or "535 bad credentials", an untrusted TLS
certificate, a server without STARTTLS or AUTH, a missing password) is not retried. Either way
`MailError` is raised in the end, saying why; each failed attempt that is retried is logged as a
warning on the logger ``jobscheduler.email``.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import smtplib
import socket
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import Any, Protocol, runtime_checkable

from ..clock import Clock, SystemClock
from ..model.emailconfig import SmtpSecurity, SmtpSettings
from ..runners.watchdog import Watchdog

__all__ = ["MailError", "Mailer", "Refused", "SmtpMailer"]

logger = logging.getLogger("jobscheduler.email")

Refused = Mapping[str, tuple[int, str]]
"""Recipients the server refused while accepting the message for the others:
address -> (SMTP code, the server's text)."""


class MailError(Exception):
    """A message could not be sent. `attempts` were made; `permanent` is True when the failure
    was one that retrying cannot cure (so fewer attempts than allowed may have been made)."""

    def __init__(self, reason: str, *, attempts: int = 0, permanent: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts
        self.permanent = permanent


@runtime_checkable
class Mailer(Protocol):
    """What `EmailEventHandler` needs to send a message; inject another one in tests."""

    def send(
        self,
        settings: SmtpSettings,
        message: EmailMessage,
        *,
        sender: str,
        recipients: Sequence[str],
    ) -> Refused:
        """Send `message` from `sender` (the envelope address) to `recipients`; return the
        recipients that were refused while others accepted it; raise `MailError` when the
        message was not sent at all."""
        ...


def _text(value: bytes | str) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _classify(exc: BaseException, settings: SmtpSettings) -> tuple[bool, str]:
    """(permanent, reason) for a failed attempt."""
    where = f"{settings.host}:{settings.port}"
    for kind, explain in _FAILURES:
        if isinstance(exc, kind):
            return explain(exc, settings, where)
    return True, f"{type(exc).__name__}: {exc}"


def _refused_recipients(
    exc: smtplib.SMTPRecipientsRefused, settings: SmtpSettings, where: str
) -> tuple[bool, str]:
    codes = [code for code, _ in exc.recipients.values()]
    listed = "; ".join(
        f"{address} ({code} {_text(text)})" for address, (code, text) in exc.recipients.items()
    )
    return all(500 <= code < 600 for code in codes), f"all recipients refused: {listed}"


_REFUSALS: dict[type[BaseException], str] = {
    smtplib.SMTPSenderRefused: "sender refused",
    smtplib.SMTPDataError: "message refused",
    smtplib.SMTPAuthenticationError: "login refused",
    smtplib.SMTPConnectError: "connection refused by the server",
    smtplib.SMTPHeloError: "greeting refused",
}


def _server_answer(
    exc: smtplib.SMTPResponseException, settings: SmtpSettings, where: str
) -> tuple[bool, str]:
    code = exc.smtp_code
    what = _REFUSALS.get(type(exc), "server error")
    return 500 <= code < 600, f"{what}: {code} {_text(exc.smtp_error)}".rstrip()


def _disconnected(
    exc: smtplib.SMTPServerDisconnected, settings: SmtpSettings, where: str
) -> tuple[bool, str]:
    if isinstance(exc.__context__, TimeoutError):  # smtplib rewords a read timeout
        return _timed_out(exc, settings, where)
    return False, f"{where} closed the connection ({exc})"


def _smtp_error(exc: smtplib.SMTPException, settings: SmtpSettings, where: str) -> tuple[bool, str]:
    return True, f"{where}: {exc}"


def _untrusted(
    exc: ssl.SSLCertVerificationError, settings: SmtpSettings, where: str
) -> tuple[bool, str]:
    return True, f"TLS certificate of {where} not trusted: {exc.verify_message or exc}"


def _tls_failed(exc: ssl.SSLError, settings: SmtpSettings, where: str) -> tuple[bool, str]:
    return True, f"TLS with {where} failed: {exc.reason or exc}"


def _timed_out(exc: BaseException, settings: SmtpSettings, where: str) -> tuple[bool, str]:
    return False, f"{where} did not answer within {settings.timeout:g} s"


def _unreachable(exc: OSError, settings: SmtpSettings, where: str) -> tuple[bool, str]:
    return False, f"cannot reach {where}: {exc.strerror or exc}"


_Explain = Callable[[Any, SmtpSettings, str], tuple[bool, str]]
"""(the failure, the settings, "host:port") -> (permanent, reason)"""

_FAILURES: tuple[tuple[type[BaseException], _Explain], ...] = (
    # SMTP exceptions are OSErrors, and SSL errors too: the first kind that matches wins.
    (smtplib.SMTPRecipientsRefused, _refused_recipients),
    (smtplib.SMTPResponseException, _server_answer),
    (smtplib.SMTPServerDisconnected, _disconnected),
    (smtplib.SMTPException, _smtp_error),  # SMTPNotSupportedError too
    (ssl.SSLCertVerificationError, _untrusted),
    (ssl.SSLError, _tls_failed),
    (TimeoutError, _timed_out),
    (OSError, _unreachable),
)
"""How each kind of failure is told: (permanent, reason)."""


def _failure(
    exc: BaseException, settings: SmtpSettings, state: _Attempt, budget: float
) -> tuple[bool, str]:
    """(permanent, reason) for a failed attempt; one cut short by its time is transient."""
    if state.expired or budget <= 0:
        where = f"{settings.host}:{settings.port}"
        return False, f"{where} did not finish within {max(budget, 0):.3g} s"
    return _classify(exc, settings)


def _gave_up(reason: str, attempts: int, permanent: bool) -> MailError:
    tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
    return MailError(f"{reason} (after {tries})", attempts=attempts, permanent=permanent)


def _login(client: smtplib.SMTP, username: str, password: str) -> None:
    """`client.login`, except that a non-ASCII user name or password (which smtplib cannot
    encode) is sent with AUTH PLAIN in UTF-8, as RFC 4616 says."""
    if (username + password).isascii():
        client.login(username, password)
        return
    client.ehlo_or_helo_if_needed()
    if not client.has_extn("auth"):
        raise smtplib.SMTPNotSupportedError("SMTP AUTH extension not supported by server.")
    if "PLAIN" not in client.esmtp_features["auth"].upper().split():
        raise smtplib.SMTPException("a non-ASCII login needs AUTH PLAIN; the server lacks it")
    token = base64.b64encode(b"\0" + username.encode() + b"\0" + password.encode())
    code, response = client.docmd("AUTH", "PLAIN " + token.decode("ascii"))
    if code != 235:
        raise smtplib.SMTPAuthenticationError(code, response)


class _Attempt:
    """One attempt's connection, as the watchdog sees it: a duplicate of the socket's
    descriptor (shutting it down ends the connection, whatever wraps the original), and
    whether the attempt's time ran out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.expired = False
        self.finished = False

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            if self.finished:
                return
            self._sock = sock.dup()
            if self.expired:  # the time ran out while connecting
                self._shut()

    def expire(self) -> None:
        """Called by the watchdog at the deadline: end the connection now."""
        with self._lock:
            if self.finished:
                return
            self.expired = True
            self._shut()

    def _shut(self) -> None:
        if self._sock is not None:
            # Wakes a blocked read or write at once; OSError: the peer closed it already.
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        with self._lock:
            self.finished = True
            sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


class _Client(smtplib.SMTP):
    """`smtplib.SMTP` that shows its raw socket to the attempt's watchdog as soon as it
    connects (before any TLS handshake or greeting)."""

    attempt: _Attempt | None = None

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        sock: socket.socket = super()._get_socket(host, port, timeout)  # type: ignore[misc]
        if self.attempt is not None:
            self.attempt.watch(sock)
        return sock


class _SslClient(smtplib.SMTP_SSL, _Client):
    """Implicit TLS: SMTP_SSL wraps the socket `_Client._get_socket` made and showed."""


_shared_watchdog: Watchdog | None = None
_shared_lock = threading.Lock()


def _watchdog_for(clock: Clock) -> Watchdog:
    """One watchdog thread for every mailer on the real clock; one per mailer otherwise."""
    global _shared_watchdog
    if type(clock) is not SystemClock:
        return Watchdog(clock, name="jobscheduler-mail-watchdog")
    with _shared_lock:
        if _shared_watchdog is None:
            _shared_watchdog = Watchdog(clock, name="jobscheduler-mail-watchdog")
        return _shared_watchdog


class SmtpMailer:
    """Sends through `smtplib`, as `SmtpSettings` say, with retries (see the module docstring).

    `ssl_context` is used for STARTTLS and implicit TLS (default: a fresh
    `ssl.create_default_context()` per message, which verifies the certificate and host name
    against the system's trust store; tests pass one that trusts their own CA). The password
    is read from `environ` (default: `os.environ`, read at each send, so a rotated password
    applies at once) under the name `SmtpSettings.password_env`. `local_hostname` is what the
    client says in EHLO (None: `smtplib`'s default, the machine's fully qualified name).
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        ssl_context: ssl.SSLContext | None = None,
        environ: Mapping[str, str] | None = None,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        local_hostname: str | None = None,
    ) -> None:
        if backoff < 0 or max_backoff < 0:
            raise ValueError("backoff and max_backoff must not be negative")
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._ssl_context = ssl_context
        self._environ = environ
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.local_hostname = local_hostname
        self._watchdog: Watchdog | None = None

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (1, 2, …)."""
        return float(min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))

    def deadline(self, settings: SmtpSettings) -> float:
        """Seconds one message may take at most, every attempt and wait included."""
        waits = sum(self.delay(n) for n in range(1, settings.retries + 1))
        return settings.timeout * (settings.retries + 1) + waits

    def send(
        self,
        settings: SmtpSettings,
        message: EmailMessage,
        *,
        sender: str,
        recipients: Sequence[str],
    ) -> Refused:
        """Send, retrying transient failures; raise `MailError` when nothing was sent.

        Returns within `deadline(settings)` seconds however the server behaves (see the module
        docstring)."""
        if not recipients:
            raise MailError("no recipients")
        password = self._password(settings)
        attempts = settings.retries + 1
        give_up = self._clock.now() + timedelta(seconds=self.deadline(settings))
        for attempt in range(1, attempts + 1):
            budget = settings.timeout
            if attempt > 1:
                budget = min(budget, self._left(give_up))
            state = _Attempt()
            try:
                if budget <= 0:
                    raise TimeoutError("no time left")
                return self._send_once(
                    settings, password, message, sender, list(recipients), budget, state
                )
            except Exception as exc:
                permanent, reason = _failure(exc, settings, state, budget)
                wait = self.delay(attempt)
                # Last: a permanent failure, the last attempt, or a wait that would end past
                # the message's deadline.
                if permanent or attempt == attempts or self._left(give_up) < wait:
                    raise _gave_up(reason, attempt, permanent) from exc
                logger.warning(
                    "sending mail via %s:%s, attempt %d of %d failed: %s; retrying in %g s",
                    settings.host,
                    settings.port,
                    attempt,
                    attempts,
                    reason,
                    wait,
                )
                self._clock.sleep(wait)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _left(self, deadline: datetime) -> float:
        return (deadline - self._clock.now()).total_seconds()

    def _password(self, settings: SmtpSettings) -> str | None:
        if settings.username is None:
            return None
        if settings.password_env is None:
            raise MailError(
                f"smtp username {settings.username!r} is set but password_env is not: "
                "name the environment variable that holds the password"
            )
        environ = self._environ if self._environ is not None else os.environ
        password = environ.get(settings.password_env)
        if password is None:
            raise MailError(
                f"environment variable {settings.password_env} (the smtp password) is not set"
            )
        return password

    def _context(self) -> ssl.SSLContext:
        return self._ssl_context if self._ssl_context is not None else ssl.create_default_context()

    def _send_once(
        self,
        settings: SmtpSettings,
        password: str | None,
        message: EmailMessage,
        sender: str,
        recipients: list[str],
        budget: float,
        attempt: _Attempt,
    ) -> Refused:
        client: _Client
        if settings.security is SmtpSecurity.SSL:
            client = _SslClient(
                local_hostname=self.local_hostname, timeout=budget, context=self._context()
            )
        else:
            client = _Client(local_hostname=self.local_hostname, timeout=budget)
        client.attempt = attempt
        # TLS checks the certificate against _host, which only __init__(host) would set.
        client._host = settings.host  # type: ignore[attr-defined]
        if self._watchdog is None:
            self._watchdog = _watchdog_for(self._clock)
        timer = self._watchdog.schedule(budget, attempt.expire)
        try:
            return self._dialogue(client, settings, password, message, sender, recipients)
        finally:
            timer.cancel()
            attempt.finish()

    def _dialogue(
        self,
        client: _Client,
        settings: SmtpSettings,
        password: str | None,
        message: EmailMessage,
        sender: str,
        recipients: list[str],
    ) -> Refused:
        sent = False
        refused: dict[str, Any] = {}
        try:
            code, greeting = client.connect(settings.host, settings.port)
            if code != 220:  # what smtplib.SMTP(host, port) does when it connects itself
                raise smtplib.SMTPConnectError(code, greeting)
            if settings.security is SmtpSecurity.STARTTLS:
                client.ehlo()
                client.starttls(context=self._context())
                client.ehlo()
            if settings.username is not None and password is not None:
                _login(client, settings.username, password)
            refused = client.send_message(message, from_addr=sender, to_addrs=recipients)
            sent = True
        finally:
            # After a successful hand-over a failed QUIT must not look like a failed send
            # (a retry would deliver twice); after a failure, do not wait for a polite QUIT.
            if sent:
                try:
                    client.quit()
                except Exception:  # the message is delivered: nothing to retry
                    client.close()
            else:
                client.close()
        return {address: (code, _text(text)) for address, (code, text) in refused.items()}
