"""The `email:` settings of a configuration file (the specification's EmailConfiguration)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from .addresses import parse_address

__all__ = ["EmailConfiguration", "SmtpSecurity", "SmtpSettings"]


class SmtpSecurity(enum.Enum):
    """How to talk to the mail server: plain, STARTTLS after connecting, or TLS from the start."""

    NONE = "none"
    STARTTLS = "starttls"
    SSL = "ssl"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class SmtpSettings:
    """Where alerts are sent. The password is never stored: `password_env` names the
    environment variable that holds it. `timeout` bounds one delivery attempt as a whole
    (connecting and the whole SMTP dialogue), in seconds."""

    host: str = "localhost"
    port: int = 25
    security: SmtpSecurity = SmtpSecurity.NONE
    username: str | None = None
    password_env: str | None = None
    timeout: float = 10.0
    retries: int = 3
    queue_size: int = 100
    """Alerts that may wait for this server (beyond the one being sent); see
    `jobscheduler.events.outbox`."""

    def __post_init__(self) -> None:
        if isinstance(self.security, str):
            object.__setattr__(self, "security", _security(self.security))
        for name, valid, what in _SMTP_CHECKS:
            value = getattr(self, name)
            if not valid(value):
                raise ValueError(f"smtp {name} must be {what}, not {value!r}")
        if self.password_env is not None and self.username is None:
            raise ValueError("smtp password_env needs a username")


def _security(text: str) -> SmtpSecurity:
    try:
        return SmtpSecurity(text.lower())
    except ValueError:
        raise ValueError(f"smtp security must be none, starttls or ssl, not {text!r}") from None


def _whole(value: object, low: int, high: int | None = None) -> bool:
    """Whether `value` is a whole number (not a bool) from `low` to `high`."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return low <= value and (high is None or value <= high)


def _positive(value: object) -> bool:
    """Whether `value` is a number (not a bool) not at or below 0."""
    return not isinstance(value, bool) and isinstance(value, int | float) and not value <= 0


_SMTP_CHECKS: tuple[tuple[str, Callable[[object], bool], str], ...] = (
    ("host", lambda v: isinstance(v, str) and bool(v), "a host name"),
    ("port", lambda v: _whole(v, 1, 65535), "1-65535"),
    ("timeout", _positive, "a positive number"),
    ("retries", lambda v: _whole(v, 0), "a whole number >= 0"),
    ("queue_size", lambda v: _whole(v, 1), "a whole number >= 1"),
)
"""The settings' fields checked in order: name, test, what the value must be."""


@dataclass(frozen=True)
class EmailConfiguration:
    """From address, subject template, default body template (text or file), SMTP settings.

    `default_template_file` is kept as written (relative paths are relative to the
    configuration file); `default_template` is the text actually used.
    """

    from_address: str
    subject: str = "Job {{ JobName }} is {{ JobStatus }}"
    default_template: str = "The job {{ JobName }} is {{ JobStatus }}."
    default_template_file: str | None = None
    smtp: SmtpSettings = field(default_factory=SmtpSettings)

    def __post_init__(self) -> None:
        if not isinstance(self.from_address, str) or "@" not in self.from_address:
            raise ValueError(f"from_address {self.from_address!r} is not an e-mail address")
        parse_address(self.from_address, "from_address")  # as the e-mail handler will
        if not isinstance(self.subject, str):
            raise ValueError("subject must be text")
