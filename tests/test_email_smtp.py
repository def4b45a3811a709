"""E-mail alerts against a real SMTP server (aiosmtpd) on 127.0.0.1."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Literal

import pytest
from smtp_server import SmtpServer, closed_port, silent_server

from jobscheduler import Event, Execution, FakeClock, Interval, Job, Unit
from jobscheduler.events.email import EmailConfiguration, EmailEventHandler, SmtpSettings
from jobscheduler.events.mailer import MailError, SmtpMailer
from jobscheduler.model.execution import SchedulerResult

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
PASSWORD_ENV = "JOBSCHEDULER_TEST_SMTP_PASSWORD"


class SleeplessClock(FakeClock):
    """A FakeClock whose sleep records the wait and moves time on at once."""

    def __init__(self) -> None:
        super().__init__(T0)
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)


def make_job(name: str = "nightly", zone: str | None = "UTC") -> Job:
    return Job(
        name,
        start=T0,
        interval=Interval(1, Unit.DAY),
        command=("true",),
        timezone=zone,
    )


def make_execution(
    job: Job,
    event: Event = Event.FAILED,
    *,
    data: dict[str, object] | None = None,
    exit_code: int | None = 3,
    reason: str | None = "exit code 3",
) -> Execution:
    return Execution(
        job_name=job.name,
        run_id="0190a1b2-c3d4-7e5f-8a6b-000000000007",
        slot=T0,
        started=T0,
        ended=T0 + timedelta(seconds=90),
        event=event,
        result=SchedulerResult.NORMAL,
        exit_code=exit_code,
        output_tail="last line of output\n",
        reason=reason,
        message_data=data or {},
    )


def settings_for(
    server_port: int,
    *,
    security: Literal["none", "starttls", "ssl"] = "none",
    username: str | None = None,
    retries: int = 2,
    timeout: float = 5.0,
) -> SmtpSettings:
    return SmtpSettings(
        host="127.0.0.1",
        port=server_port,
        security=security,  # type: ignore[arg-type]  # the string form is accepted
        username=username,
        password_env=PASSWORD_ENV if username else None,
        timeout=timeout,
        retries=retries,
    )


def handler_for(
    settings: SmtpSettings,
    *,
    template: str = "Job {{ JobName }} ended {{ JobStatus }}.",
    recipients: tuple[str, ...] = ("ops@example.com",),
    event: Event = Event.FAILED,
    subject: str | None = None,
    server: SmtpServer | None = None,
    clock: SleeplessClock | None = None,
) -> EmailEventHandler:
    config = EmailConfiguration(
        from_address="Job Scheduler <scheduler@example.com>",
        subject="[{{ JobStatus }}] {{ JobName }}",
        smtp=settings,
    )
    clock = clock or SleeplessClock()
    context = server.client_ssl_context() if server is not None and server.ca else None
    mailer = SmtpMailer(clock=clock, ssl_context=context, local_hostname="localhost", backoff=0.5)
    return EmailEventHandler(
        template, recipients, event, config=config, subject=subject, mailer=mailer, clock=clock
    )


@pytest.fixture
def server() -> Iterator[SmtpServer]:
    with SmtpServer() as running:
        yield running


def test_job_alert_is_rendered_and_delivered(server: SmtpServer) -> None:
    job = make_job("nightly-cleanup")
    template = (
        "The job {{ JobName }} is {{ JobStatus }}.\n"
        "Files removed: {{ removed }}; host {{ host }}.\n"
        "Exit code {{ execution.exit_code }}, reason: {{ execution.reason }}.\n"
        "Started {{ execution.started.strftime('%Y-%m-%d %H:%M') }}, "
        "took {{ execution.duration }} s.\n"
        "{{ execution.output_tail }}"
    )
    handler = handler_for(
        settings_for(server.port),
        template=template,
        recipients=("ops@example.com", "Night Shift <night@example.com>"),
    )
    execution = make_execution(job, data={"removed": 42, "host": "db1"})

    handler.handle(job, Event.FAILED, execution)

    [mail] = server.wait_for(1)
    assert mail.mail_from == "scheduler@example.com"
    assert mail.rcpt_tos == ("ops@example.com", "night@example.com")
    assert mail.subject == "[FAILED] nightly-cleanup"
    assert mail.message["To"] == "ops@example.com, Night Shift <night@example.com>"
    assert mail.message["From"] == "Job Scheduler <scheduler@example.com>"
    assert mail.message["Auto-Submitted"] == "auto-generated"
    assert mail.body == (
        "The job nightly-cleanup is FAILED.\n"
        "Files removed: 42; host db1.\n"
        "Exit code 3, reason: exit code 3.\n"
        "Started 2024-05-01 12:00, took 90.0 s.\n"
        "last line of output\n"
    )
    assert not mail.tls and mail.login is None


def test_times_are_shown_in_the_jobs_time_zone(server: SmtpServer) -> None:
    job = make_job("berlin", zone="Europe/Berlin")
    handler = handler_for(
        settings_for(server.port), template="{{ execution.started.strftime('%H:%M %Z') }}"
    )
    handler.handle(job, Event.FAILED, make_execution(job))
    assert server.wait_for(1)[0].body.strip() == "14:00 CEST"


def test_group_alert_covers_each_job_of_the_group(server: SmtpServer) -> None:
    # A group's handler is called for the events of each of its jobs (the wiring is the
    # scheduler's); one handler, several jobs, one mail per matching event.
    handler = handler_for(
        settings_for(server.port),
        template="{{ JobName }}: {{ JobStatus }} ({{ rows }} rows)",
        recipients=("a@example.com", "b@example.com"),
        event=Event.SUCCESSFUL,
    )
    job_a, job_b, job_c = make_job("jobA"), make_job("jobB"), make_job("jobC")
    handler.handle(
        job_a, Event.SUCCESSFUL, make_execution(job_a, Event.SUCCESSFUL, data={"rows": 1})
    )
    handler.handle(job_b, Event.FAILED, make_execution(job_b, Event.FAILED, data={"rows": 2}))
    handler.handle(
        job_c, Event.SUCCESSFUL, make_execution(job_c, Event.SUCCESSFUL, data={"rows": 3})
    )

    mails = server.wait_for(2)
    assert [m.subject for m in mails] == ["[SUCCESSFUL] jobA", "[SUCCESSFUL] jobC"]
    assert [m.body for m in mails] == ["jobA: SUCCESSFUL (1 rows)\n", "jobC: SUCCESSFUL (3 rows)\n"]
    assert all(m.rcpt_tos == ("a@example.com", "b@example.com") for m in mails)
    assert server.attempts == 2  # the FAILED run of jobB sent nothing


def test_not_started_alert(server: SmtpServer) -> None:
    job = make_job()
    handler = handler_for(
        settings_for(server.port),
        template="{{ JobName }} did not start: {{ execution.reason }}",
        event=Event.NOT_STARTED,
    )
    execution = make_execution(job, Event.NOT_STARTED, exit_code=None, reason="already running")
    handler.handle(job, Event.SUCCESSFUL, make_execution(job, Event.SUCCESSFUL))
    handler.handle(job, Event.NOT_STARTED, execution)
    [mail] = server.wait_for(1)
    assert mail.subject == "[NOT_STARTED] nightly"
    assert mail.body == "nightly did not start: already running\n"


def test_starttls_with_auth_password_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "s3cret")
    with SmtpServer(tls="starttls", users={"alerts": "s3cret"}) as server:
        settings = settings_for(server.port, security="starttls", username="alerts")
        handler = handler_for(settings, server=server)
        job = make_job()
        handler.handle(job, Event.FAILED, make_execution(job))
        [mail] = server.wait_for(1)
    assert mail.tls
    assert mail.login == "alerts"
    assert mail.subject == "[FAILED] nightly"


def test_implicit_ssl_with_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "pässword")
    with SmtpServer(tls="ssl", users={"alerts": "pässword"}) as server:
        settings = settings_for(server.port, security="ssl", username="alerts")
        handler = handler_for(settings, server=server)
        job = make_job()
        handler.handle(job, Event.FAILED, make_execution(job))
        [mail] = server.wait_for(1)
    assert mail.tls
    assert mail.login == "alerts"


def test_wrong_password_is_refused_without_retries(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "wrong")
    clock = SleeplessClock()
    with SmtpServer(tls="starttls", users={"alerts": "right"}) as server:
        settings = settings_for(server.port, security="starttls", username="alerts")
        handler = handler_for(settings, server=server, clock=clock)
        job = make_job()
        with caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
            handler.handle(job, Event.FAILED, make_execution(job))
        assert server.messages == []
    assert clock.sleeps == []  # 535 is permanent
    [record] = [r for r in caplog.records if r.name == "jobscheduler.email"]
    assert "'nightly'" in record.getMessage()
    assert "login refused: 535" in record.getMessage()
    assert "wrong" not in record.getMessage()


def test_missing_password_variable_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    with SmtpServer(tls="starttls", users={"alerts": "right"}) as server:
        settings = settings_for(server.port, security="starttls", username="alerts")
        handler = handler_for(settings, server=server)
        job = make_job()
        with caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
            handler.handle(job, Event.FAILED, make_execution(job))
        assert server.attempts == 0
    assert f"environment variable {PASSWORD_ENV}" in caplog.text


def test_untrusted_certificate_is_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    clock = SleeplessClock()
    with SmtpServer(tls="starttls") as server:
        settings = settings_for(server.port, security="starttls")
        mailer = SmtpMailer(clock=clock, local_hostname="localhost")  # the system's trust store
        handler = EmailEventHandler(
            "x",
            "ops@example.com",
            Event.FAILED,
            config=EmailConfiguration("s@example.com", smtp=settings),
            mailer=mailer,
        )
        job = make_job()
        with caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
            assert not handler.send_alert(job, Event.FAILED, make_execution(job))
        assert server.messages == []
    assert clock.sleeps == []
    assert "not trusted" in caplog.text


def test_starttls_required_but_not_offered(caplog: pytest.LogCaptureFixture) -> None:
    with SmtpServer() as server:  # plain server: no STARTTLS
        handler = handler_for(settings_for(server.port, security="starttls"))
        job = make_job()
        with caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
            handler.handle(job, Event.FAILED, make_execution(job))
        assert server.messages == []
    assert "STARTTLS extension not supported" in caplog.text


def test_unreachable_server_is_retried_then_logged(caplog: pytest.LogCaptureFixture) -> None:
    clock = SleeplessClock()
    handler = handler_for(settings_for(closed_port(), retries=3), clock=clock)
    job = make_job("backup")
    with caplog.at_level(logging.WARNING, logger="jobscheduler.email"):
        handler.handle(job, Event.FAILED, make_execution(job))  # must not raise
    assert clock.sleeps == [0.5, 1.0, 2.0]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(warnings) == 3
    [error] = errors
    assert "'backup'" in error.getMessage()
    assert "cannot reach 127.0.0.1" in error.getMessage()
    assert "after 4 attempts" in error.getMessage()


def test_silent_server_times_out(caplog: pytest.LogCaptureFixture) -> None:
    clock = SleeplessClock()
    with silent_server() as port:
        handler = handler_for(settings_for(port, retries=1, timeout=0.2), clock=clock)
        job = make_job()
        with caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
            handler.handle(job, Event.FAILED, make_execution(job))
    assert clock.sleeps == [0.5]
    assert "did not answer within 0.2 s" in caplog.text


class SignallingClock(FakeClock):
    """A FakeClock that says when someone starts sleeping on it."""

    def __init__(self) -> None:
        super().__init__(T0)
        self.sleeping = threading.Event()

    def sleep(self, seconds: float) -> None:
        self.sleeping.set()
        super().sleep(seconds)


def test_backoff_waits_on_the_given_clock() -> None:
    """The wait between attempts is the clock's: nothing is sent again until it moves."""
    clock = SignallingClock()
    mailer = SmtpMailer(clock=clock, local_hostname="localhost", backoff=30.0)
    with SmtpServer(reject="mail", reject_code=451, reject_times=1) as server:
        config = EmailConfiguration("s@example.com", smtp=settings_for(server.port, retries=2))
        handler = EmailEventHandler(
            "body", "ops@example.com", Event.FAILED, config=config, mailer=mailer, clock=clock
        )
        job = make_job()
        done = threading.Event()

        def alert() -> None:
            handler.handle(job, Event.FAILED, make_execution(job))
            done.set()

        worker = threading.Thread(target=alert)
        worker.start()
        try:
            assert clock.sleeping.wait(5)
            assert server.attempts == 1
            clock.advance(29)
            assert not done.wait(0.2)
            assert server.attempts == 1
            clock.advance(1)
            assert done.wait(5)
        finally:
            clock.advance(3600)
            worker.join(5)
        assert server.attempts == 2
        assert len(server.messages) == 1


@pytest.mark.parametrize("stage", ["mail", "rcpt", "data"])
def test_permanent_rejection_is_logged_not_retried(
    stage: Literal["mail", "rcpt", "data"], caplog: pytest.LogCaptureFixture
) -> None:
    clock = SleeplessClock()
    with SmtpServer(reject=stage, reject_code=550) as server:
        handler = handler_for(settings_for(server.port, retries=3), clock=clock)
        job = make_job()
        with caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
            handler.handle(job, Event.FAILED, make_execution(job))
        assert server.messages == []
        assert server.attempts == 1
    assert clock.sleeps == []
    [record] = [r for r in caplog.records if r.name == "jobscheduler.email"]
    assert "'nightly'" in record.getMessage()
    assert "550" in record.getMessage()


def test_temporary_rejection_is_retried_until_accepted() -> None:
    clock = SleeplessClock()
    with SmtpServer(reject="data", reject_code=451, reject_times=2) as server:
        handler = handler_for(settings_for(server.port, retries=3), clock=clock)
        job = make_job()
        assert handler.send_alert(job, Event.FAILED, make_execution(job))
        assert len(server.wait_for(1)) == 1
        assert server.attempts == 3
    assert clock.sleeps == [0.5, 1.0]


def test_temporary_rejection_gives_up_after_the_retries() -> None:
    clock = SleeplessClock()
    mail = EmailMessage()
    mail["Subject"] = "x"
    mail.set_content("x")
    with SmtpServer(reject="rcpt", reject_code=451) as server:
        settings = settings_for(server.port, retries=2)
        mailer = SmtpMailer(clock=clock, local_hostname="localhost", backoff=0.5)
        with pytest.raises(MailError) as info:
            mailer.send(settings, mail, sender="s@example.com", recipients=["ops@example.com"])
        assert server.attempts == 3
    assert not info.value.permanent
    assert info.value.attempts == 3
    assert clock.sleeps == [0.5, 1.0]
    assert "all recipients refused: ops@example.com (451" in str(info.value)


def test_some_recipients_refused_others_get_the_mail(caplog: pytest.LogCaptureFixture) -> None:
    with SmtpServer(reject_recipients=("gone@example.com",)) as server:
        handler = handler_for(
            settings_for(server.port), recipients=("ops@example.com", "gone@example.com")
        )
        job = make_job()
        with caplog.at_level(logging.WARNING, logger="jobscheduler.email"):
            assert handler.send_alert(job, Event.FAILED, make_execution(job))
        [mail] = server.wait_for(1)
    assert mail.rcpt_tos == ("ops@example.com",)
    assert "gone@example.com (550" in caplog.text


def test_line_breaks_in_the_rendered_subject_become_spaces(
    server: SmtpServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 15, case 5: before, an alert whose subject showed a multi-line value was refused
    (0 of 12 delivered); now each is sent, on one line, and no header is added."""
    handler = handler_for(settings_for(server.port), subject="Job {{ JobName }} {{ note }}")
    job = make_job()
    payloads = [
        "x\r\nBcc: victim@example.com",
        "x\nBcc: victim@example.com",
        "x\rBcc: v@x.org",
        "Traceback:\n  File 'a.py', line 1\nValueError: bad",
        "a\x0bb",
        "a\x0cb",
        "a\x1cb\x1db\x1eb",
        "a\x85b",
        "a\u2028b\u2029c",
        "a\x00b",
        "a \r\n\r\n  b",
        "\n\nleading and trailing\n",
    ]
    with caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
        for payload in payloads:
            handler.handle(job, Event.FAILED, make_execution(job, data={"note": payload}))
    mails = server.wait_for(len(payloads))
    assert [m.subject for m in mails] == [
        "Job nightly x Bcc: victim@example.com",
        "Job nightly x Bcc: victim@example.com",
        "Job nightly x Bcc: v@x.org",
        "Job nightly Traceback: File 'a.py', line 1 ValueError: bad",
        "Job nightly a b",
        "Job nightly a b",
        "Job nightly a b b b",
        "Job nightly a b",
        "Job nightly a b c",
        "Job nightly a b",
        "Job nightly a b",
        "Job nightly leading and trailing",
    ]
    assert all(m.message["Bcc"] is None for m in mails)
    assert all(m.rcpt_tos == ("ops@example.com",) for m in mails)
    assert caplog.records == []


def test_backoff_doubles_up_to_the_cap() -> None:
    mailer = SmtpMailer(backoff=1.0, max_backoff=5.0)
    assert [mailer.delay(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    with pytest.raises(ValueError):
        SmtpMailer(backoff=-1)


def test_username_without_password_env_is_refused_before_connecting() -> None:
    mail = EmailMessage()
    mail.set_content("x")
    settings = SmtpSettings(host="127.0.0.1", port=closed_port(), username="alerts")
    with pytest.raises(MailError, match="password_env is not") as info:
        SmtpMailer().send(settings, mail, sender="s@example.com", recipients=["o@example.com"])
    assert info.value.permanent
    assert info.value.attempts == 0
