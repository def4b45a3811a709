"""EmailEventHandler without a network: matching, context, headers, fallbacks, the factory."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path

import jinja2
import pytest

from jobscheduler import ConfigFileError, Event, Execution, FakeClock, Interval, Job, Message, Unit
from jobscheduler.events.email import (
    MAX_SUBJECT,
    EmailConfiguration,
    EmailEventHandler,
    ExecutionView,
    SmtpSettings,
    build_message,
    check_header,
    handlers_from_messages,
    parse_address,
    template_context,
)
from jobscheduler.events.mailer import MailError, Refused
from jobscheduler.model.execution import SchedulerResult
from jobscheduler.model.templates import TemplateError, compile_template

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
RUN_ID = "0190a1b2-c3d4-7e5f-8a6b-1c2d3e4f5a6b"


class RecordingMailer:
    """A Mailer that keeps what it was asked to send (or fails as told)."""

    def __init__(self, fail: Exception | None = None, refused: Refused | None = None) -> None:
        self.sent: list[tuple[SmtpSettings, EmailMessage, str, tuple[str, ...]]] = []
        self.fail = fail
        self.refused = refused or {}

    def send(
        self,
        settings: SmtpSettings,
        message: EmailMessage,
        *,
        sender: str,
        recipients: Sequence[str],
    ) -> Refused:
        if self.fail is not None:
            raise self.fail
        self.sent.append((settings, message, sender, tuple(recipients)))
        return self.refused

    @property
    def messages(self) -> list[EmailMessage]:
        return [message for _, message, _, _ in self.sent]


def body_of(message: EmailMessage) -> str:
    content = message.get_content()
    assert isinstance(content, str)
    return content


CONFIG = EmailConfiguration(
    from_address="Scheduler <scheduler@example.com>",
    subject="Job {{ JobName }} is {{ JobStatus }}",
    default_template="Default: {{ JobName }} {{ JobStatus }}",
    smtp=SmtpSettings(host="mail.example.com", port=2525),
)


def make_job(name: str = "nightly", zone: str | None = "UTC") -> Job:
    return Job(name, start=T0, interval=Interval(1, Unit.DAY), command=("true",), timezone=zone)


def make_execution(
    job: Job, event: Event = Event.FAILED, data: dict[str, object] | None = None
) -> Execution:
    return Execution(
        job_name=job.name,
        run_id=RUN_ID,
        slot=T0,
        started=T0,
        ended=T0 + timedelta(minutes=2),
        event=event,
        result=SchedulerResult.NORMAL,
        exit_code=1,
        output_tail="boom\n",
        reason="exit code 1",
        message_data=data or {},
    )


def make_handler(
    template: str | jinja2.Template = "{{ JobName }} {{ JobStatus }}",
    event: Event = Event.FAILED,
    *,
    recipients: Sequence[str] | str = ("ops@example.com",),
    subject: str | None = None,
    config: EmailConfiguration | None = CONFIG,
    mailer: RecordingMailer | None = None,
) -> tuple[EmailEventHandler, RecordingMailer]:
    mailer = mailer or RecordingMailer()
    handler = EmailEventHandler(
        template,
        recipients,
        event,
        config=config,
        subject=subject,
        mailer=mailer,
        clock=FakeClock(T0),
    )
    return handler, mailer


# ---- which events send ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wanted", "outcome", "sends"),
    [
        (Event.FAILED, Event.FAILED, True),
        (Event.FAILED, Event.SUCCESSFUL, False),
        (Event.FAILED, Event.NOT_STARTED, False),
        (Event.SUCCESSFUL, Event.SUCCESSFUL, True),
        (Event.SUCCESSFUL, Event.FAILED, False),
        (Event.NOT_STARTED, Event.NOT_STARTED, True),
        (Event.NOT_STARTED, Event.FAILED, False),
        (Event.BOTH, Event.SUCCESSFUL, True),
        (Event.BOTH, Event.FAILED, True),
        (Event.BOTH, Event.NOT_STARTED, False),
    ],
)
def test_sends_only_for_matching_events(wanted: Event, outcome: Event, sends: bool) -> None:
    handler, mailer = make_handler(event=wanted)
    job = make_job()
    handler.handle(job, outcome, make_execution(job, outcome))
    assert len(mailer.sent) == (1 if sends else 0)
    if sends:
        assert mailer.messages[0]["Subject"] == f"Job nightly is {outcome.name}"


def test_event_given_as_text() -> None:
    handler, _ = make_handler(event="not started")  # type: ignore[arg-type]
    assert handler.event is Event.NOT_STARTED


def test_send_alert_ignores_the_handlers_event() -> None:
    handler, mailer = make_handler(event=Event.SUCCESSFUL)
    job = make_job()
    assert handler.send_alert(job, Event.FAILED, make_execution(job))
    assert len(mailer.sent) == 1


# ---- the message ------------------------------------------------------------------------------


def test_message_headers_envelope_and_settings() -> None:
    handler, mailer = make_handler(recipients=["ops@example.com", "Dev <dev@example.com>"])
    job = make_job()
    handler.handle(job, Event.FAILED, make_execution(job))
    [(settings, message, sender, recipients)] = mailer.sent
    assert settings is CONFIG.smtp
    assert sender == "scheduler@example.com"
    assert recipients == ("ops@example.com", "dev@example.com")
    assert message["From"] == "Scheduler <scheduler@example.com>"
    assert message["To"] == "ops@example.com, Dev <dev@example.com>"
    assert message["Date"] == "Wed, 01 May 2024 12:00:00 +0000"
    assert message["Message-ID"].endswith("@example.com>")
    assert message["Auto-Submitted"] == "auto-generated"
    assert body_of(message) == "nightly FAILED\n"


def test_duplicate_recipients_are_sent_once() -> None:
    handler, mailer = make_handler(recipients=["a@example.com", "A <a@example.com>"])
    job = make_job()
    handler.handle(job, Event.FAILED, make_execution(job))
    assert mailer.sent[0][3] == ("a@example.com",)


def test_one_recipient_as_text() -> None:
    handler, _ = make_handler(recipients="ops@example.com")
    assert handler.recipients == ("ops@example.com",)


def test_context_names() -> None:
    job = make_job("report", zone="America/New_York")
    execution = make_execution(job, Event.SUCCESSFUL, data={"rows": 5, "JobName": "spoof"})
    context = template_context(job, Event.SUCCESSFUL, execution)
    assert context["JobName"] == "report"  # message data cannot disguise the job
    assert context["JobStatus"] == "SUCCESSFUL"
    assert context["rows"] == 5
    view = context["execution"]
    assert isinstance(view, ExecutionView)
    assert view.started == T0
    assert view.started.utcoffset() == timedelta(hours=-4)  # in the job's zone
    assert view.ended == T0 + timedelta(minutes=2)
    assert view.duration == 120.0
    assert (view.exit_code, view.reason, view.output_tail) == (1, "exit code 1", "boom\n")
    assert (view.result, view.trigger, view.run_id, view.job_name) == (
        "normal",
        "schedule",
        RUN_ID,
        "report",
    )
    with pytest.raises(AttributeError):
        view.exit_code = 0  # type: ignore[misc]


def test_not_started_status_and_missing_values_render_empty() -> None:
    handler, mailer = make_handler(
        "{{ JobStatus }}|{{ nothing }}|{{ nothing.deeper.still }}|{{ execution.ended }}",
        Event.NOT_STARTED,
    )
    job = make_job()
    execution = Execution(job.name, "r1", None, T0, event=Event.NOT_STARTED, reason="disabled")
    handler.handle(job, Event.NOT_STARTED, execution)
    assert body_of(mailer.messages[0]) == "NOT_STARTED|||\n"  # None renders empty


def test_subject_of_the_handler_wins_over_the_configuration() -> None:
    handler, mailer = make_handler(subject="ALERT {{ JobName }} ({{ team }})")
    job = make_job()
    handler.handle(job, Event.FAILED, make_execution(job, data={"team": "ops"}))
    assert mailer.messages[0]["Subject"] == "ALERT nightly (ops)"


def test_subject_is_stripped_and_cut() -> None:
    handler, mailer = make_handler(subject="  {{ long }}\n")
    job = make_job()
    handler.handle(job, Event.FAILED, make_execution(job, data={"long": "x" * 1000}))
    subject = str(mailer.messages[0]["Subject"])
    assert len(subject) == MAX_SUBJECT
    assert subject.endswith("…")


def test_body_is_cut(caplog: pytest.LogCaptureFixture) -> None:
    """Output past the cap ends the render: the alert goes out with the fallback body saying
    the template was cut, and an ERROR line."""
    handler, mailer = make_handler("{% for i in range(3000) %}{{ 'y' * 1000 }}{% endfor %}")
    job = make_job()
    with caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
        handler.handle(job, Event.FAILED, make_execution(job))
    body = body_of(mailer.messages[0])
    assert body.startswith("The job nightly is FAILED.")
    assert "The alert template was cut: output longer than 1000000 characters" in body
    assert len(body) < 1000
    [record] = caplog.records
    assert record.levelno == logging.ERROR and "template cut" in record.getMessage()


def test_non_ascii_body_and_subject() -> None:
    handler, mailer = make_handler("Größe: {{ size }} — ok", subject="Jöb {{ JobName }} ✓")
    job = make_job()
    handler.handle(job, Event.FAILED, make_execution(job, data={"size": "3 µm"}))
    message = mailer.messages[0]
    assert message["Subject"] == "Jöb nightly ✓"
    assert body_of(message) == "Größe: 3 µm — ok\n"
    assert message.as_bytes()  # serialisable as sent


# ---- header safety --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "ops@example.com\r\nBcc: victim@example.com",
        "ops@example.com\nBcc: victim@example.com",
        "ops@example.com\r",
        "ops@example.com\x00",
        "ops@example.com\u2028",
        "a@example.com, b@example.com",
        "not-an-address",
        "Group: a@example.com;",
        "<a@example.com> b@example.com",
    ],
)
def test_bad_recipients_are_refused_when_the_handler_is_built(address: str) -> None:
    with pytest.raises(ValueError):
        EmailEventHandler("x", [address], Event.FAILED, config=CONFIG)


def test_no_recipients_refused() -> None:
    with pytest.raises(ValueError, match="at least one recipient"):
        EmailEventHandler("x", [], Event.FAILED, config=CONFIG)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ops@example.com", ("ops@example.com", "ops@example.com")),
        (" Ops Team <ops@example.com> ", ("Ops Team <ops@example.com>", "ops@example.com")),
    ],
)
def test_parse_address(text: str, expected: tuple[str, str]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("value", ["a\rb", "a\nb", "a\r\nb", "a\x0bb", "a\x85b", "a\x1bb"])
def test_check_header_refuses_breaks_and_controls(value: str) -> None:
    with pytest.raises(ValueError, match="refused"):
        check_header(value, "subject")
    assert check_header("tabs\tare fine", "subject") == "tabs\tare fine"


def test_build_message_refuses_a_bad_sender_and_subject() -> None:
    with pytest.raises(ValueError, match="sender"):
        build_message(
            sender="s@example.com\r\nBcc: x@y.org",
            recipients=["a@example.com"],
            subject="s",
            body="b",
            date=T0,
        )
    with pytest.raises(ValueError, match="subject"):
        build_message(
            sender="s@example.com",
            recipients=["a@example.com"],
            subject="s\nBcc: x@y.org",
            body="b",
            date=T0,
        )


def test_rendered_line_break_in_subject_becomes_a_space(caplog: pytest.LogCaptureFixture) -> None:
    handler, mailer = make_handler(subject="{{ JobName }} {{ extra }}")
    job = make_job()
    with caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
        handler.handle(job, Event.FAILED, make_execution(job, data={"extra": "a\r\nBcc: x@y.z"}))
    [message] = mailer.messages
    assert message["Subject"] == "nightly a Bcc: x@y.z"
    assert message["Bcc"] is None
    assert caplog.records == []


# ---- failures never escape ----------------------------------------------------------------


def test_mail_error_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    handler, _ = make_handler(mailer=RecordingMailer(fail=MailError("server on fire")))
    job = make_job("payroll")
    with caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
        handler.handle(job, Event.FAILED, make_execution(job))
        assert not handler.send_alert(job, Event.FAILED, make_execution(job))
    assert len(caplog.records) == 2
    assert all("'payroll'" in r.getMessage() for r in caplog.records)
    assert all("server on fire" in r.getMessage() for r in caplog.records)


def test_unexpected_mailer_exception_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler, _ = make_handler(mailer=RecordingMailer(fail=RuntimeError("bug")))
    job = make_job()
    with caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
        handler.handle(job, Event.FAILED, make_execution(job))
    assert "unexpected error" in caplog.text
    assert "'nightly'" in caplog.text


def test_partial_refusal_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    mailer = RecordingMailer(refused={"gone@example.com": (550, "no such user")})
    handler, _ = make_handler(mailer=mailer)
    job = make_job()
    with caplog.at_level(logging.WARNING, logger="jobscheduler.email"):
        assert handler.send_alert(job, Event.FAILED, make_execution(job))
    assert "gone@example.com (550 no such user)" in caplog.text


@pytest.mark.parametrize(
    "template", ["{{ 1/0 }}", "{{ range(10**9)|list }}", "{% set x = [].append(1) %}"]
)
def test_failing_body_template_sends_a_fallback(
    template: str, caplog: pytest.LogCaptureFixture
) -> None:
    handler, mailer = make_handler(template)
    job = make_job()
    with caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
        handler.handle(job, Event.FAILED, make_execution(job))
    body = body_of(mailer.messages[0])
    assert body.startswith("The job nightly is FAILED.\n")
    assert "exit code: 1" in body
    assert "reason: exit code 1" in body
    assert "could not be rendered" in body or "template was cut: range of" in body
    assert "template failed" in caplog.text


def test_failing_subject_template_uses_the_default_subject() -> None:
    handler, mailer = make_handler(subject="{{ 1/0 }}")
    job = make_job()
    handler.handle(job, Event.FAILED, make_execution(job))
    assert mailer.messages[0]["Subject"] == "Job nightly is FAILED"


# ---- templates and configuration ------------------------------------------------------------


def test_syntax_errors_are_found_when_the_handler_is_built() -> None:
    with pytest.raises(TemplateError) as info:
        EmailEventHandler("line one\n{{ JobName ", "ops@example.com", Event.FAILED)
    assert info.value.line == 2
    with pytest.raises(TemplateError):
        EmailEventHandler("x", "ops@example.com", Event.FAILED, subject="{% if %}")


def test_compiled_templates_are_accepted_only_from_the_sandbox() -> None:
    handler, mailer = make_handler(compile_template("compiled {{ JobName }}"))
    job = make_job()
    handler.handle(job, Event.FAILED, make_execution(job))
    assert body_of(mailer.messages[0]) == "compiled nightly\n"
    with pytest.raises(ValueError, match="sandbox"):
        EmailEventHandler(jinja2.Template("{{ JobName }}"), "ops@example.com", Event.FAILED)


def test_without_config_the_inherited_one_then_a_default_is_used() -> None:
    handler, mailer = make_handler(config=None)
    assert not handler.has_own_config
    assert handler.config.smtp == SmtpSettings()  # localhost:25, plain
    assert handler.config.from_address.startswith("jobscheduler@")
    job = make_job()
    handler.handle(job, Event.FAILED, make_execution(job))
    assert mailer.messages[0]["Subject"] == "Job nightly is FAILED"

    inherited = EmailConfiguration(
        from_address="inherited@example.com", subject="[{{ JobStatus }}] {{ JobName }}"
    )
    handler.inherit_config(inherited)
    handler.handle(job, Event.FAILED, make_execution(job))
    assert mailer.sent[1][2] == "inherited@example.com"
    assert mailer.messages[1]["Subject"] == "[FAILED] nightly"

    handler.inherit_config(None)
    assert handler.config.from_address.startswith("jobscheduler@")


def test_own_config_is_kept_when_one_is_inherited() -> None:
    handler, _ = make_handler()
    handler.inherit_config(EmailConfiguration(from_address="other@example.com"))
    assert handler.config is CONFIG
    assert handler.has_own_config


def test_bad_from_address_is_refused_when_given() -> None:
    # Refused by the configuration itself, so `validate` refuses what the handler would.
    with pytest.raises(ValueError, match="from_address"):
        EmailConfiguration(from_address="a@example.com, b@example.com")
    with pytest.raises(ValueError, match="recipient"):
        Message(("ops@ex ample.com",))


def test_broken_configuration_subject_is_refused_when_given() -> None:
    broken = EmailConfiguration(from_address="s@example.com", subject="{{ JobName")
    with pytest.raises(TemplateError):
        EmailEventHandler("x", "ops@example.com", Event.FAILED, config=broken)
    handler, _ = make_handler(config=None)
    with pytest.raises(TemplateError):
        handler.inherit_config(broken)


def test_handlers_from_messages(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "failed.txt").write_text(
        "From file: {{ JobName }} {{ JobStatus }}", encoding="utf-8"
    )
    messages = {
        Event.FAILED: Message(("ops@example.com",), template_file="templates/failed.txt"),
        Event.SUCCESSFUL: Message(("a@example.com", "b@example.com")),
        Event.NOT_STARTED: Message(("c@example.com",), template="Inline {{ JobName }}"),
    }
    mailer = RecordingMailer()
    handlers = handlers_from_messages(messages, CONFIG, tmp_path, job="nightly", mailer=mailer)
    assert [h.event for h in handlers] == [Event.FAILED, Event.SUCCESSFUL, Event.NOT_STARTED]
    assert [h.recipients for h in handlers] == [
        ("ops@example.com",),
        ("a@example.com", "b@example.com"),
        ("c@example.com",),
    ]
    job = make_job()
    for event in (Event.FAILED, Event.SUCCESSFUL, Event.NOT_STARTED):
        for handler in handlers:
            handler.handle(job, event, make_execution(job, event))
    assert [body_of(m) for m in mailer.messages] == [
        "From file: nightly FAILED\n",
        "Default: nightly SUCCESSFUL\n",
        "Inline nightly\n",
    ]
    assert all(h.config is CONFIG for h in handlers)


def test_handlers_from_messages_absolute_file_and_no_config(tmp_path: Path) -> None:
    path = tmp_path / "abs.txt"
    path.write_text("abs {{ JobName }}", encoding="utf-8")
    messages = {Event.BOTH: Message(("ops@example.com",), template_file=str(path))}
    [handler] = handlers_from_messages(messages, None, tmp_path / "elsewhere")
    assert not handler.has_own_config
    mailer = RecordingMailer()
    default_messages = {Event.FAILED: Message(("x@example.com",))}
    [default] = handlers_from_messages(default_messages, None, tmp_path, mailer=mailer)
    job = make_job()
    default.handle(job, Event.FAILED, make_execution(job))
    assert body_of(mailer.messages[0]) == "The job nightly is FAILED.\n"


def test_handlers_from_messages_missing_file(tmp_path: Path) -> None:
    messages = {Event.FAILED: Message(("ops@example.com",), template_file="missing.txt")}
    with pytest.raises(ConfigFileError) as info:
        handlers_from_messages(messages, CONFIG, tmp_path, group="ops")
    problem = info.value.problem
    assert problem.file == str(tmp_path / "missing.txt")
    assert problem.group == "ops"
    assert problem.key == "messages.failed.template_file"
    assert "does not exist" in problem.message  # the one reader's words (model.templatereader)


def test_handlers_from_messages_broken_template(tmp_path: Path) -> None:
    (tmp_path / "bad.txt").write_text("one\ntwo\n{% for x in %}\n", encoding="utf-8")
    messages = {Event.FAILED: Message(("ops@example.com",), template_file="bad.txt")}
    with pytest.raises(ConfigFileError) as info:
        handlers_from_messages(messages, CONFIG, tmp_path, job="nightly")
    problem = info.value.problem
    assert (problem.file, problem.line, problem.job) == (str(tmp_path / "bad.txt"), 3, "nightly")
    assert str(tmp_path / "bad.txt") in str(info.value)

    inline = {Event.FAILED: Message(("ops@example.com",), template="{{ JobName ")}
    with pytest.raises(ConfigFileError) as info:
        handlers_from_messages(inline, CONFIG, tmp_path, job="nightly", config_file="jobs.yaml")
    problem = info.value.problem
    assert (problem.file, problem.line, problem.key) == (
        "jobs.yaml",
        1,
        "messages.failed.template",
    )
