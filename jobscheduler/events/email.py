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

Rendering is bounded in time and size (`jobscheduler.model.templates`); a template that goes
past a bound is treated like a failing one (logged, fallback body saying the template was cut).

Header safety: addresses are checked when the handler is built (`ValueError`). In the rendered
subject, every line break and control character (CR, LF, VT, FF, the file/group/record
separators, NEL, U+2028, U+2029, NUL, …) is replaced by a space, runs of them (and the blanks
around them) by one: the data an alert reports (a multi-line exception) never suppresses it,
and never adds a header either. The subject is then stripped of surrounding white space; one
longer than `MAX_SUBJECT` characters is cut; a body longer than `MAX_BODY` characters is cut
with a note.

`handle` never raises: every failure (rendering, header checks, the mail server, a bug) is logged
on the logger ``jobscheduler.email`` with the job's name and the reason. Called directly,
`handle` and `send_alert` send in the caller's thread, with the bounded attempts and retries
of `jobscheduler.events.mailer.SmtpMailer`. The scheduler's dispatch calls `queue_alert`
instead: the alert is rendered and put on its mail server's queue
(`jobscheduler.events.outbox.Outbox`), and sent from that server's own thread.
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from ..clock import Clock, SystemClock
from ..errors import ConfigFileError, Problem
from ..model.addresses import check_header, parse_address
from ..model.emailconfig import EmailConfiguration, SmtpSecurity, SmtpSettings
from ..model.event import Event
from ..model.execution import Execution
from ..model.job import Job, Message
from ..model.templatereader import TemplateReader
from ..model.templates import TemplateError, compile_template, render
from .context import ExecutionView, template_context
from .mailer import Mailer, SmtpMailer
from .outbox import Alert, Outbox, deliver
from .subject import clean_subject

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
    "clean_subject",
    "handlers_from_messages",
    "parse_address",
    "template_context",
]

logger = logging.getLogger("jobscheduler.email")

MAX_SUBJECT = 250
MAX_BODY = 1_000_000


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


def _fallback_body(job: Job, status: str, view: ExecutionView, cut: str | None = None) -> str:
    lines = [f"The job {job.name} is {status}.", ""]
    facts = [
        ("started", view.started),
        ("ended", view.ended),
        ("exit code", view.exit_code),
        ("reason", view.reason),
    ]
    lines.extend(f"{label}: {value}" for label, value in facts if value is not None)
    if cut is not None:  # our own words about a bound, never the template's
        lines += ["", f"(The alert template was cut: {cut}; see the scheduler's log.)", ""]
    else:
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
            alert = self.compose(job, event, execution)
            return alert is not None and deliver(alert)
        except Exception:
            logger.exception("alert for job %r not sent: unexpected error", _name(job))
            return False

    def queue_alert(self, job: Job, event: Event, execution: Execution, outbox: Outbox) -> None:
        """If `event` matches: render the alert now and put it on its server's queue in
        `outbox` (sent from that server's thread). Never raises: failures are logged."""
        try:
            if not self.event.matches(event):
                return
            alert = self.compose(job, event, execution)
            if alert is not None and outbox.put(alert):
                logger.info(
                    "alert for job %r (%s) to %s queued for %s",
                    alert.job,
                    alert.status,
                    ", ".join(alert.recipients),
                    alert.server,
                )
        except Exception:
            logger.exception("alert for job %r not sent: unexpected error", _name(job))

    def compose(self, job: Job, event: Event, execution: Execution) -> Alert | None:
        """The rendered alert, ready to send; None (logged) when it cannot be sent at all."""
        status = event.name
        config = self.config
        context = template_context(job, event, execution)
        subject = self._render_subject(config, context, job, status)
        body = self._render_body(context, job, status)
        try:
            message = build_message(
                sender=config.from_address,
                recipients=self.recipients,
                subject=subject,
                body=body,
                date=self._clock.now(),
            )
        except ValueError as exc:
            to = ", ".join(self._envelope)
            logger.error("alert for job %r (%s) to %s not sent: %s", job.name, status, to, exc)
            return None
        return Alert(
            job=job.name,
            status=status,
            settings=config.smtp,
            message=message,
            sender=parse_address(config.from_address, "sender")[1],
            recipients=self._envelope,
            mailer=self.mailer,
        )

    def _render_subject(
        self, config: EmailConfiguration, context: Mapping[str, Any], job: Job, status: str
    ) -> str:
        try:
            template = self.subject if self.subject is not None else self._config_subject(config)
            subject = render(template, context, clock=self._clock)
        except Exception as exc:
            logger.error(
                "alert for job %r (%s): subject template failed (%s); using the default subject",
                job.name,
                status,
                _describe(exc),
            )
            subject = f"Job {job.name} is {status}"
        subject = clean_subject(subject)
        if len(subject) > MAX_SUBJECT:
            subject = subject[: MAX_SUBJECT - 1] + "…"
        return subject

    def _render_body(self, context: Mapping[str, Any], job: Job, status: str) -> str:
        try:
            body = render(self.template, context, clock=self._clock)
        except Exception as exc:
            logger.error(
                "alert for job %r (%s): template failed (%s); sending the fallback body",
                job.name,
                status,
                _describe(exc),
            )
            view = context["execution"]
            assert isinstance(view, ExecutionView)
            cut = str(exc).removeprefix("template cut: ") if _is_limit(exc) else None
            return _fallback_body(job, status, view, cut)
        if len(body) > MAX_BODY:
            body = body[:MAX_BODY] + f"\n[… cut at {MAX_BODY} characters]\n"
        return body

    def __repr__(self) -> str:
        return f"EmailEventHandler(event={self.event.name}, recipients={list(self.recipients)!r})"


def _name(job: object) -> str:
    return str(getattr(job, "name", job))


def _is_limit(exc: BaseException) -> bool:
    return isinstance(exc, TemplateError) and exc.limit


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TemplateError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def handlers_from_messages(
    messages: Mapping[Event, Message],
    config: EmailConfiguration | None,
    templates: TemplateReader | Path,
    *,
    job: str | None = None,
    group: str | None = None,
    config_file: str | None = None,
    mailer: Mailer | None = None,
    clock: Clock | None = None,
) -> list[EmailEventHandler]:
    """One `EmailEventHandler` per entry of a job's or group's ``messages:``, in order.

    The body is the message's inline ``template``, else its ``template_file``, else
    `config.default_template`, each as `templates` read and compiled it (a store's reader:
    nothing is read or compiled again; a `Path`: a new reader for that folder, where relative
    template files are looked up; ``~`` is the home directory). With `config` None the
    handlers inherit the scheduler's settings (see `EmailEventHandler`) and use the built-in
    default template. An unreadable file or a template that does not compile raises
    `ConfigFileError` naming the template file (or `config_file` for inline text), its line,
    the `job` or `group`, and the key.
    """
    reader = templates if isinstance(templates, TemplateReader) else TemplateReader(templates)
    handlers: list[EmailEventHandler] = []
    for event, message in messages.items():
        key = f"messages.{event.value}"
        file_name = config_file
        if message.template is not None:
            key = f"{key}.template"
        elif message.template_file is not None:
            key = f"{key}.template_file"
            path = Path(message.template_file).expanduser()
            file_name = str(path if path.is_absolute() else reader.base_dir / path)
        elif config is not None and config.default_template_file is not None:
            file_name = config.default_template_file
        try:
            loaded = reader.message(message, f"messages.{event.value}")
            if loaded is None:
                loaded = reader.default(config)
        except ValueError as exc:  # TemplateError (with its line) included
            line = exc.line if isinstance(exc, TemplateError) else None
            raise ConfigFileError(
                Problem(str(exc), file=file_name, line=line, job=job, group=group, key=key)
            ) from None
        handlers.append(
            EmailEventHandler(
                loaded.template,
                message.recipients,
                event,
                config=config,
                mailer=mailer,
                clock=clock,
            )
        )
    return handlers
