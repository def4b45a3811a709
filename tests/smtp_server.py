"""A real SMTP server on 127.0.0.1 for tests and demos (aiosmtpd in a background thread).

    with SmtpServer() as server:                      # plain SMTP on a free port
        ... send to server.host:server.port ...
        mail = server.wait_for(1)[0]                   # ReceivedMail
        assert mail.rcpt_tos == ("ops@example.com",)

Options: ``tls="starttls"`` (STARTTLS offered and required) or ``tls="ssl"`` (TLS from the
first byte), with a certificate for 127.0.0.1 and localhost issued by a throw-away CA made
with trustme (`client_ssl_context()` trusts it); ``users={"alice": "secret"}`` requires AUTH
(over TLS unless ``auth_require_tls=False``; with ``tls="ssl"`` AUTH is offered but not
required, an aiosmtpd limitation: check `ReceivedMail.login`);
``reject="mail" | "rcpt" | "data"`` answers that command with ``reject_code`` (550 by
default; 451 for a temporary refusal), for every message or only the first ``reject_times``
attempts; ``reject_recipients`` refuses just those addresses. `attempts` counts MAIL FROM
commands, so tests can see retries.

`closed_port()` and `silent_server()` give an address nobody answers on (connection refused)
and one that accepts connections but never speaks (a client times out).
"""

from __future__ import annotations

import contextlib
import email
import email.policy
import socket
import ssl
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any, Literal

import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

__all__ = ["ReceivedMail", "SmtpServer", "closed_port", "silent_server"]

HOST = "127.0.0.1"


@dataclass(frozen=True)
class ReceivedMail:
    """One message the server accepted."""

    mail_from: str
    rcpt_tos: tuple[str, ...]
    data: bytes
    message: EmailMessage
    tls: bool
    login: str | None

    @property
    def subject(self) -> str:
        return str(self.message["Subject"])

    @property
    def body(self) -> str:
        part = self.message.get_body(("plain",))
        assert part is not None
        content = part.get_content()
        assert isinstance(content, str)
        return content.replace("\r\n", "\n")


class _Handler:
    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    def _refuse(self, stage: str) -> str | None:
        server = self.server
        if server.reject != stage:
            return None
        with server._lock:
            if server.reject_times is not None and server._rejections >= server.reject_times:
                return None
            server._rejections += 1
        return f"{server.reject_code} refused by test server at {stage.upper()}"

    async def handle_MAIL(
        self,
        smtp: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        mail_options: list[str],
    ) -> str:
        with self.server._lock:
            self.server._attempts += 1
        refusal = self._refuse("mail")
        if refusal is not None:
            return refusal
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(
        self,
        smtp: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        if address.lower() in self.server.reject_recipients:
            return "550 5.1.1 no such user here"
        refusal = self._refuse("rcpt")
        if refusal is not None:
            return refusal
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, smtp: SMTP, session: Session, envelope: Envelope) -> str:
        refusal = self._refuse("data")
        if refusal is not None:
            return refusal
        content = envelope.original_content or b""
        parsed = email.message_from_bytes(content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        transport = smtp.transport
        tls = transport is not None and transport.get_extra_info("ssl_object") is not None
        login = session.auth_data if isinstance(session.auth_data, str) else None
        mail = ReceivedMail(
            mail_from=envelope.mail_from or "",
            rcpt_tos=tuple(envelope.rcpt_tos),
            data=content,
            message=parsed,
            tls=tls,
            login=login,
        )
        with self.server._lock:
            self.server._messages.append(mail)
            self.server._lock.notify_all()
        return "250 Message accepted"


class _Controller(Controller):
    """aiosmtpd's Controller on a socket we bind ourselves: port 0 without a race."""

    def __init__(self, handler: _Handler, sock: socket.socket, **kwargs: Any) -> None:
        self._sock = sock
        super().__init__(handler, hostname=HOST, port=sock.getsockname()[1], **kwargs)

    def _create_server(self) -> Any:
        return self.loop.create_server(self._factory_invoker, sock=self._sock, ssl=self.ssl_context)


class SmtpServer:
    """See the module docstring. Start with `start()` or a ``with`` block."""

    def __init__(
        self,
        *,
        tls: Literal["none", "starttls", "ssl"] = "none",
        users: Mapping[str, str] | None = None,
        auth_require_tls: bool = True,
        reject: Literal["mail", "rcpt", "data"] | None = None,
        reject_code: int = 550,
        reject_times: int | None = None,
        reject_recipients: tuple[str, ...] = (),
        ca: trustme.CA | None = None,
    ) -> None:
        self.host = HOST
        self.port = 0
        self.tls = tls
        self.users = dict(users or {})
        self.reject = reject
        self.reject_code = reject_code
        self.reject_times = reject_times
        self.reject_recipients = {a.lower() for a in reject_recipients}
        self._lock = threading.Condition()
        self._messages: list[ReceivedMail] = []
        self._attempts = 0
        self._rejections = 0
        self._controller: _Controller | None = None
        self.ca = ca if ca is not None else (trustme.CA() if tls != "none" else None)
        self._auth_require_tls = auth_require_tls

    # ---- TLS material -------------------------------------------------------------------

    def _server_context(self) -> ssl.SSLContext:
        assert self.ca is not None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(HOST, "localhost").configure_cert(context)
        return context

    def client_ssl_context(self) -> ssl.SSLContext:
        """A client context that trusts this server's certificate (and verifies it)."""
        if self.ca is None:
            raise RuntimeError("this server does not use TLS")
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context

    # ---- life cycle ---------------------------------------------------------------------

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        if not isinstance(data, LoginPassword):
            return AuthResult(success=False, handled=False)
        login = data.login.decode("utf-8", "replace")
        password = data.password.decode("utf-8", "replace")
        if self.users.get(login) == password:
            return AuthResult(success=True, auth_data=login)
        return AuthResult(success=False, handled=False)

    def start(self) -> SmtpServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, 0))
        self.port = sock.getsockname()[1]
        kwargs: dict[str, Any] = {"ready_timeout": 10.0}
        if self.tls == "starttls":
            kwargs["tls_context"] = self._server_context()
            kwargs["require_starttls"] = True
        elif self.tls == "ssl":
            kwargs["ssl_context"] = self._server_context()
        if self.users:
            kwargs["authenticator"] = self._authenticate
            if self.tls == "ssl":
                # aiosmtpd counts only STARTTLS as TLS and would refuse AUTH on an implicit-TLS
                # connection; it cannot require AUTH without requiring its idea of TLS either.
                kwargs["auth_required"] = False
                kwargs["auth_require_tls"] = False
            else:
                kwargs["auth_required"] = True
                kwargs["auth_require_tls"] = self._auth_require_tls
        controller = _Controller(_Handler(self), sock, **kwargs)
        controller.start()
        self._controller = controller
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def __enter__(self) -> SmtpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- what arrived -------------------------------------------------------------------

    @property
    def messages(self) -> list[ReceivedMail]:
        with self._lock:
            return list(self._messages)

    @property
    def attempts(self) -> int:
        """MAIL FROM commands received (one per delivery attempt)."""
        with self._lock:
            return self._attempts

    def wait_for(self, count: int, timeout: float = 30.0) -> list[ReceivedMail]:
        """The messages, once at least `count` arrived; AssertionError after `timeout` s."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._messages) >= count, timeout):
                raise AssertionError(
                    f"expected {count} message(s), got {len(self._messages)} in {timeout} s"
                )
            return list(self._messages)


def closed_port() -> int:
    """A port on 127.0.0.1 nobody listens on (bound, then released: connecting is refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
    return port


@contextlib.contextmanager
def silent_server(accepted: threading.Event | None = None) -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections and never answers (clients time out).

    With `accepted`, a thread accepts the connections (and keeps them open, silent) and sets
    the event at the first one: a test can wait until a client is really talking to it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        sock.listen(16)
        if accepted is None:
            yield sock.getsockname()[1]
            return
        sock.settimeout(0.1)
        stop = threading.Event()
        held: list[socket.socket] = []

        def accept() -> None:
            while not stop.is_set():
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                held.append(conn)
                accepted.set()

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            yield sock.getsockname()[1]
        finally:
            stop.set()
            thread.join(30)
            for conn in held:
                conn.close()
