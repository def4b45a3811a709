"""Who may read and act over HTTP (see docs/operations.md, "The token model").

- The server listens on loopback unless told otherwise; binding beyond loopback needs a token
  (``--token-env NAME``: the environment variable holding it), which then guards reads too.
- Actions (run now, pause, resume, kill, submit) always need the token: without one the
  server is read-only.
- The API takes ``Authorization: Bearer TOKEN``. The page takes the token once through a small
  form and keeps, in an HttpOnly, SameSite=Strict cookie, a value derived from it (HMAC), not
  the token itself; each of its forms also carries a per-form check (another HMAC of the
  token and the form's action), so a page of another site cannot post one.
- Comparisons are constant-time (`hmac.compare_digest`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import socket

from ...errors import JobActionError

__all__ = ["COOKIE", "MIN_TOKEN", "Guard", "http_settings", "is_loopback"]

COOKIE = "jobscheduler_session"
MIN_TOKEN = 16  # characters: a shorter token is refused at start


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is a loopback address only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def http_settings(http: str | None, token_env: str | None) -> tuple[str, int, str | None] | None:
    """``--http HOST:PORT`` and ``--token-env NAME`` checked: (host, port, token), or None
    without ``--http``. A `JobActionError` (exit 2) for a bad address, a variable that is not
    set or holds a token shorter than `MIN_TOKEN`, and for binding beyond loopback without
    a token."""
    if http is None:
        if token_env is not None:
            raise JobActionError("--token-env needs --http HOST:PORT")
        return None
    host, sep, port_text = http.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise JobActionError(f"--http: expected HOST:PORT (e.g. 127.0.0.1:8080), not {http!r}")
    host = host.strip("[]")
    token = None
    if token_env is not None:
        token = os.environ.get(token_env)
        if not token:
            raise JobActionError(f"--token-env: the variable {token_env} is not set")
        if len(token) < MIN_TOKEN:
            raise JobActionError(
                f"--token-env: the token in {token_env} is too short (at least {MIN_TOKEN})"
            )
    if token is None and not is_loopback(host):
        raise JobActionError(
            f"--http {http}: serving beyond loopback needs a token (--token-env NAME)"
        )
    try:
        socket.getaddrinfo(host, int(port_text))
    except OSError as exc:
        raise JobActionError(f"--http: cannot resolve {host!r}: {exc}") from None
    return host, int(port_text), token


class Guard:
    """The checks of one server: `token` (None: read-only), `loopback` (reads free)."""

    def __init__(self, token: str | None, *, loopback: bool) -> None:
        if token is None and not loopback:
            raise ValueError("serving beyond loopback needs a token")
        self.token = token
        self.loopback = loopback
        key = token.encode() if token is not None else b""
        self._session = hmac.new(key, b"session", hashlib.sha256).hexdigest()
        self._key = key

    @property
    def actions(self) -> bool:
        """Whether actions are possible at all (a token is set)."""
        return self.token is not None

    def session_value(self) -> str:
        """The cookie's value once the token was given through the form."""
        return self._session

    def form_check(self, action: str) -> str:
        """The per-form check of the page's forms for `action`."""
        return hmac.new(self._key, f"form:{action}".encode(), hashlib.sha256).hexdigest()

    def token_ok(self, given: str | None) -> bool:
        if self.token is None or not given:
            return False
        return hmac.compare_digest(given.encode(), self.token.encode())

    def bearer_ok(self, header: str | None) -> bool:
        if not header or not header.startswith("Bearer "):
            return False
        return self.token_ok(header[len("Bearer ") :].strip())

    def cookie_ok(self, value: str | None) -> bool:
        if self.token is None or not value:
            return False
        return hmac.compare_digest(value.encode(), self._session.encode())

    def form_ok(self, action: str, given: str | None) -> bool:
        if self.token is None or not given:
            return False
        return hmac.compare_digest(given.encode(), self.form_check(action).encode())

    def may_read(self, header: str | None, cookie: str | None) -> bool:
        return self.loopback or self.bearer_ok(header) or self.cookie_ok(cookie)
