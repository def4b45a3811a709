"""E-mail alerts: `EmailEventHandler` renders a sandboxed Jinja2 template and mails it.

An alert is sent when the handler's event matches the run's (`Event.matches`: BOTH stands for
SUCCESSFUL or FAILED; a NOT_STARTED handler hears of runs that did not start). To hear of every
outcome, register a BOTH handler and a NOT_STARTED one.

What a template sees (subject and body alike):

- ``JobName``: the job's name;
- ``JobStatus``: the run's event in capitals, as the specification writes it: ``SUCCESSFUL``,
  ``FAILED`` or ``NOT_STARTED``;
- every key of the run's message data (`Execution.message_data`), by name; ``JobName``,
  ``JobStatus`` and ``execution`` win over message data of the same name, so a job cannot
  disguise itself;
- ``execution``: a read-only `ExecutionView` of the run (``started``, ``ended``, ``slot``,
  ``duration``, ``exit_code``, ``output_tail``, ``error``, ``reason``, ``running_status``,
  ``result``, ``trigger``, ``run_id``, ``job_name``); times are aware datetimes in the job's
  time zone, so ``{{ execution.started.strftime('%H:%M') }}`` works.

Undefined names render as empty text (see `jobscheduler.templates`). Templates run in Jinja2's
immutable sandbox: ``__class__``, ``__mro__``, ``__subclasses__``, ``|attr('__class__')``,
``'{0.__class__}'.format(x)`` and the like render empty or fail; they never reach Python's
internals. When rendering fails (a sandbox refusal, ``{{ 1/0 }}``, anything), the error is logged
and the alert is still sent, with a fixed subject ("Job <name> is <status>") or a plain fallback
body stating the job, status, times, exit code and reason: an alert with a broken template is
better than silence, and the fallback is built without Jinja2, so nothing a template tried can
leak into it.

Header safety: addresses are checked when the handler is built (`ValueError`); the rendered
subject is stripped of surrounding white space and refused, with the whole alert, when it still
holds a line break (CR, LF or any other) or a control character: such an alert is logged as an
error and never sent. A subject longer than `MAX_SUBJECT` characters is cut; a body longer than
`MAX_BODY` characters is cut with a note.

`handle` never raises: every failure (rendering, header checks, the mail server, a bug) is logged
on the logger ``jobscheduler.email`` with the job's name and the reason. Sending is
synchronous, with the retries and backoff of `jobscheduler.events.mailer.SmtpMailer`; the
scheduler calls handlers off its own thread.
"""

from __future__ import annotations

import logging
import re
import socket
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from email.message import EmailMessage
from email.utils import format_datetime, getaddresses
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from ..clock import Clock, SystemClock
from ..errors import ConfigFileError, Problem
from ..model.emailconfig import EmailConfiguration, SmtpSecurity, SmtpSettings
from ..model.event import Event
from ..model.execution import Execution
from ..model.job import Job, Message
from ..model.templates import TemplateError, compile_template, render
from ..triggers.zones import resolve_zone
from .mailer import Mailer, MailError, SmtpMailer

__all__ = [
    "MAX_BODY",
    "MAX_SUBJECT",
    "EmailConfiguration",
    "EmailEventHandler",
    "ExecutionView",
    "SmtpSecurity",
    "SmtpSettings",
    "build_message",
    "check_header",
    "handlers_from_messages",
    "parse_address",
    "template_context",
]

logger = logging.getLogger("jobscheduler.email")

MAX_SUBJECT = 250
MAX_BODY = 1_000_000

# Line breaks of every kind (what str.splitlines splits on) and the other C0/C1 controls
# except TAB: none of them belongs in a header.
_BAD_HEADER_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
# A plain addr-spec: no quoting, comments, groups or routes; one "@".
_ADDR_SPEC = re.compile(r"[^\s@<>()\[\],;:\"\\]+@[^\s@<>()\[\],;:\"\\]+")


def check_header(value: str, what: str) -> str:
    """Return `value` if it is safe in a mail header; raise ValueError naming `what` when it
    holds a line break (CR, LF, or any other Unicode line break) or a control character."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be text, not {type(value).__name__}")
    bad = _BAD_HEADER_CHARS.search(value)
    if bad is not None:
        kind = "a line break" if len(f"a{bad.group()}b".splitlines()) > 1 else "a control character"
        raise ValueError(f"{what} {value!r} contains {kind}; refused")
    return value


def parse_address(text: str, what: str = "address") -> tuple[str, str]:
    """Check one e-mail address and return (as written, the bare addr-spec for the envelope).

    ``ops@example.com`` and ``Ops Team <ops@example.com>`` are accepted; line breaks, control
    characters, several addresses in one (``a@x, b@y``), groups and quoted local parts are
    refused with a ValueError naming `what`.
    """
    check_header(text, what)
    stripped = text.strip()
    pairs = getaddresses([stripped])
    if len(pairs) != 1:
        raise ValueError(f"{what} {text!r} must be exactly one e-mail address")
    _, addr = pairs[0]
    if not _ADDR_SPEC.fullmatch(addr) or (stripped != addr and not stripped.endswith(f"<{addr}>")):
        raise ValueError(f"{what} {text!r} is not a plain e-mail address")
    return stripped, addr


@dataclass(frozen=True, slots=True)
class ExecutionView:
    """What a template sees as ``execution``: plain values of one run, read-only.

    Times are aware datetimes in the job's time zone (None when unknown: ``ended`` of a run
    that never ended, ``slot`` of a run that had no scheduled slot). ``duration`` is in
    seconds; ``result`` is ``"normal"`` or ``"abnormal"``; ``trigger`` is ``"schedule"``,
    ``"run_now"`` or ``"dependence"``.
    """

    job_name: str
    run_id: str
    slot: datetime | None
    started: datetime
    ended: datetime | None
    duration: float | None
    exit_code: int | None
    output_tail: str
    error: str | None
    reason: str | None
    running_status: str | None
    result: str | None
    trigger: str

    @classmethod
    def of(cls, execution: Execution, zone: tzinfo = UTC) -> ExecutionView:
        def local(moment: datetime | None) -> datetime | None:
            if moment is None:
                return None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return moment.astimezone(zone)

        started = local(execution.started)
        assert started is not None
        return cls(
            job_name=execution.job_name,
            run_id=execution.run_id,
            slot=local(execution.slot),
            started=started,
            ended=local(execution.ended),
            duration=execution.duration,
            exit_code=execution.exit_code,
            output_tail=execution.output_tail,
            error=execution.error,
            reason=execution.reason,
            running_status=execution.running_status,
            result=None if execution.result is None else str(execution.result),
            trigger=execution.trigger,
        )


def _zone_of(job: Job) -> tzinfo:
    try:
        return resolve_zone(job.timezone)
    except ValueError:
        return UTC


def template_context(job: Job, event: Event, execution: Execution) -> dict[str, Any]:
    """The names a template sees: message data, then ``JobName``, ``JobStatus`` and
    ``execution`` (which win over message data keys of the same name)."""
    context: dict[str, Any] = {str(key): value for key, value in execution.message_data.items()}
    context["JobName"] = job.name
    context["JobStatus"] = event.name
    context["execution"] = ExecutionView.of(execution, _zone_of(job))
    return context


def build_message(
    *,
    sender: str,
    recipients: Iterable[str],
    subject: str,
    body: str,
    date: datetime,
) -> EmailMessage:
    """An `EmailMessage` with From, To, Subject, Date, Message-ID and ``Auto-Submitted:
    auto-generated`` (RFC 3834: auto-responders stay quiet). Raises ValueError when the sender,
    a recipient or the subject is not safe in a header."""
    from_header, from_addr = parse_address(sender, "sender")
    to_headers = [parse_address(r, "recipient")[0] for r in recipients]
    if not to_headers:
        raise ValueError("an alert needs at least one recipient")
    check_header(subject, "subject")
    message = EmailMessage()
    message["From"] = from_header
    message["To"] = ", ".join(to_headers)
    message["Subject"] = subject
    message["Date"] = format_datetime(date if date.tzinfo else date.replace(tzinfo=UTC))
    domain = from_addr.rsplit("@", 1)[1]
    message["Message-ID"] = f"<{uuid.uuid4().hex}@{domain}>"
    message["Auto-Submitted"] = "auto-generated"
    message.set_content(body)
    return message


def _fallback_body(job: Job, status: str, view: ExecutionView) -> str:
    lines = [f"The job {job.name} is {status}.", ""]
    facts = [
        ("started", view.started),
        ("ended", view.ended),
        ("exit code", view.exit_code),
        ("reason", view.reason),
    ]
    lines.extend(f"{label}: {value}" for label, value in facts if value is not None)
    lines += ["", "(The alert template could not be rendered; see the scheduler's log.)", ""]
    return "\n".join(lines)


def _as_template(template: str | jinja2.Template, what: str) -> jinja2.Template:
    if isinstance(template, jinja2.Template):
        if not isinstance(template.environment, SandboxedEnvironment):
            raise ValueError(
                f"{what} must be compiled in Jinja2's sandbox: pass the text, or use "
                "jobscheduler.templates.compile_template"
            )
        return template
    return compile_template(template, what)


def _fallback_config() -> EmailConfiguration:
    host = socket.gethostname() or "localhost"
    return EmailConfiguration(from_address=f"jobscheduler@{host}")


class EmailEventHandler:
    """Mails `recipients` a rendered `template` when a run ends with `event` (see the module
    docstring for the context, sandbox, fallbacks and header checks).

    `template` and `subject` are Jinja2 text (compiled now: a syntax error raises
    `TemplateError` here) or templates compiled by `jobscheduler.templates.compile_template`.
    `subject` None: the configuration's subject. `recipients` is one address or several;
    each is checked now (ValueError).

    `config` is checked now (its subject compiles, its from_address is one plain address).
    `config` None: the handler uses the configuration given later by `inherit_config` (the
    scheduler passes its file's ``email:`` settings to handlers added without one), or, lacking
    that, a default: from ``jobscheduler@<this host>`` through ``localhost:25``, plain SMTP.

    `mailer` sends the message (default: `SmtpMailer(clock=clock)`); `clock` dates it.
    """

    def __init__(
        self,
        template: str | jinja2.Template,
        recipients: str | Iterable[str],
        event: Event | str,
        *,
        config: EmailConfiguration | None = None,
        subject: str | jinja2.Template | None = None,
        mailer: Mailer | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.event = Event.parse(event) if isinstance(event, str) else event
        if not isinstance(self.event, Event):
            raise ValueError(f"event must be an Event, not {event!r}")
        if isinstance(recipients, str):
            recipients = [recipients]
        self.recipients: tuple[str, ...] = tuple(recipients)
        if not self.recipients:
            raise ValueError("an alert needs at least one recipient")
        for address in self.recipients:
            parse_address(address, "recipient")
        self._envelope = tuple(dict.fromkeys(parse_address(r)[1] for r in self.recipients))
        self.template = _as_template(template, "template")
        self.subject = None if subject is None else _as_template(subject, "subject")
        self._config = config
        self._inherited: EmailConfiguration | None = None
        self._subject_cache: tuple[str, jinja2.Template] | None = None
        if config is not None:
            self._check_config(config)
        self._clock: Clock = clock if clock is not None else SystemClock()
        self.mailer: Mailer = mailer if mailer is not None else SmtpMailer(clock=self._clock)

    @property
    def config(self) -> EmailConfiguration:
        """The settings in use: the handler's own, else the inherited ones, else the default."""
        if self._config is not None:
            return self._config
        if self._inherited is not None:
            return self._inherited
        return _fallback_config()

    @property
    def has_own_config(self) -> bool:
        return self._config is not None

    def inherit_config(self, config: EmailConfiguration | None) -> None:
        """Use `config` unless the handler was built with its own (None forgets an inherited
        one). Raises `TemplateError` when its subject does not compile, ValueError when its
        from_address is not one plain address."""
        if config is not None:
            self._check_config(config)
        self._inherited = config

    def _check_config(self, config: EmailConfiguration) -> None:
        parse_address(config.from_address, "from_address")
        self._config_subject(config)

    def _config_subject(self, config: EmailConfiguration) -> jinja2.Template:
        cached = self._subject_cache
        if cached is not None and cached[0] == config.subject:
            return cached[1]
        compiled = compile_template(config.subject, "email subject")
        self._subject_cache = (config.subject, compiled)
        return compiled

    def handle(self, job: Job, event: Event, execution: Execution) -> None:
        """Send the alert if `event` matches the handler's event. Never raises."""
        try:
            if self.event.matches(event):
                self.send_alert(job, event, execution)
        except Exception:
            logger.exception("alert for job %r not sent: unexpected error", _name(job))

    def send_alert(self, job: Job, event: Event, execution: Execution) -> bool:
        """Render and send now, whatever the handler's event; True when the server took the
        message. Never raises: failures are logged."""
        try:
            return self._send(job, event, execution)
        except Exception:
            logger.exception("alert for job %r not sent: unexpected error", _name(job))
            return False

    def _send(self, job: Job, event: Event, execution: Execution) -> bool:
        status = event.name
        config = self.config
        context = template_context(job, event, execution)
        subject = self._render_subject(config, context, job, status)
        body = self._render_body(context, job, status)
        to = ", ".join(self._envelope)
        try:
            message = build_message(
                sender=config.from_address,
                recipients=self.recipients,
                subject=subject,
                body=body,
                date=self._clock.now(),
            )
        except ValueError as exc:
            logger.error("alert for job %r (%s) to %s not sent: %s", job.name, status, to, exc)
            return False
        sender = parse_address(config.from_address, "sender")[1]
        try:
            refused = self.mailer.send(
                config.smtp, message, sender=sender, recipients=self._envelope
            )
        except MailError as exc:
            logger.error("alert for job %r (%s) to %s not sent: %s", job.name, status, to, exc)
            return False
        if refused:
            listed = "; ".join(f"{a} ({code} {text})" for a, (code, text) in refused.items())
            logger.warning(
                "alert for job %r (%s): the server refused some recipients: %s",
                job.name,
                status,
                listed,
            )
        logger.info("alert for job %r (%s) sent to %s", job.name, status, to)
        return True

    def _render_subject(
        self, config: EmailConfiguration, context: Mapping[str, Any], job: Job, status: str
    ) -> str:
        try:
            template = self.subject if self.subject is not None else self._config_subject(config)
            subject = render(template, context)
        except Exception as exc:
            logger.error(
                "alert for job %r (%s): subject template failed (%s); using the default subject",
                job.name,
                status,
                _describe(exc),
            )
            subject = f"Job {job.name} is {status}"
        subject = subject.strip()
        if len(subject) > MAX_SUBJECT:
            subject = subject[: MAX_SUBJECT - 1] + "…"
        return subject

    def _render_body(self, context: Mapping[str, Any], job: Job, status: str) -> str:
        try:
            body = render(self.template, context)
        except Exception as exc:
            logger.error(
                "alert for job %r (%s): template failed (%s); sending the fallback body",
                job.name,
                status,
                _describe(exc),
            )
            view = context["execution"]
            assert isinstance(view, ExecutionView)
            return _fallback_body(job, status, view)
        if len(body) > MAX_BODY:
            body = body[:MAX_BODY] + f"\n[… cut at {MAX_BODY} characters]\n"
        return body

    def __repr__(self) -> str:
        return f"EmailEventHandler(event={self.event.name}, recipients={list(self.recipients)!r})"


def _name(job: object) -> str:
    return str(getattr(job, "name", job))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TemplateError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def handlers_from_messages(
    messages: Mapping[Event, Message],
    config: EmailConfiguration | None,
    base_dir: Path,
    *,
    job: str | None = None,
    group: str | None = None,
    config_file: str | None = None,
    mailer: Mailer | None = None,
    clock: Clock | None = None,
) -> list[EmailEventHandler]:
    """One `EmailEventHandler` per entry of a job's or group's ``messages:``, in order.

    The body is the message's inline ``template``, else its ``template_file`` (UTF-8; a relative
    path is relative to `base_dir`, the configuration file's folder), else
    `config.default_template`. With `config` None the handlers inherit the scheduler's settings
    (see `EmailEventHandler`) and use the built-in default template. An unreadable file or a
    template that does not compile raises `ConfigFileError` naming the template file (or
    `config_file` for inline text), its line, the `job` or `group`, and the key.
    """
    default_template = (config if config is not None else _fallback_config()).default_template
    handlers: list[EmailEventHandler] = []
    for event, message in messages.items():
        key = f"messages.{event.value}"
        file_name = config_file
        if message.template is not None:
            source, name, key = message.template, f"{key}.template", f"{key}.template"
        elif message.template_file is not None:
            path = Path(message.template_file)
            if not path.is_absolute():
                path = base_dir / path
            key = f"{key}.template_file"
            file_name = str(path)
            try:
                source = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                raise ConfigFileError(
                    Problem(
                        f"cannot read template file: {reason}",
                        file=file_name,
                        job=job,
                        group=group,
                        key=key,
                    )
                ) from None
            name = str(path)
        else:
            source, name = default_template, "email default_template"
            if config is not None and config.default_template_file is not None:
                file_name = config.default_template_file
        try:
            template = compile_template(source, name)
        except TemplateError as exc:
            raise ConfigFileError(
                Problem(str(exc), file=file_name, line=exc.line, job=job, group=group, key=key)
            ) from None
        handlers.append(
            EmailEventHandler(
                template, message.recipients, event, config=config, mailer=mailer, clock=clock
            )
        )
    return handlers
