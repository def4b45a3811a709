"""The `email:` settings of a configuration file (the specification's EmailConfiguration)."""

from __future__ import annotations

import enum
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
            try:
                object.__setattr__(self, "security", SmtpSecurity(self.security.lower()))
            except ValueError:
                raise ValueError(
                    f"smtp security must be none, starttls or ssl, not {self.security!r}"
                ) from None
        if not isinstance(self.host, str) or not self.host:
            raise ValueError(f"smtp host must be a host name, not {self.host!r}")
        if (
            isinstance(self.port, bool)
            or not isinstance(self.port, int)
            or not (0 < self.port < 65536)
        ):
            raise ValueError(f"smtp port must be 1-65535, not {self.port!r}")
        if (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, int | float)
            or (self.timeout <= 0)
        ):
            raise ValueError(f"smtp timeout must be a positive number, not {self.timeout!r}")
        if (
            isinstance(self.retries, bool)
            or not isinstance(self.retries, int)
            or (self.retries < 0)
        ):
            raise ValueError(f"smtp retries must be a whole number >= 0, not {self.retries!r}")
        if (
            isinstance(self.queue_size, bool)
            or not isinstance(self.queue_size, int)
            or (self.queue_size < 1)
        ):
            raise ValueError(
                f"smtp queue_size must be a whole number >= 1, not {self.queue_size!r}"
            )
        if self.password_env is not None and self.username is None:
            raise ValueError("smtp password_env needs a username")


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
