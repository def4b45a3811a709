"""Sandbox escapes in alert templates never reach the mail (delivered through a real server).

Every payload either renders as nothing (the sandbox hands back an empty undefined) or makes the
template fail, in which case the alert goes out with the fixed fallback body or subject. The
tests pin the whole text, so a leak of any kind (a class list, a module, a function's globals,
a command's output) fails them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from smtp_server import ReceivedMail, SmtpServer

from jobscheduler import Event, Execution, FakeClock, Interval, Job, Unit
from jobscheduler.events.email import EmailConfiguration, EmailEventHandler, SmtpSettings
from jobscheduler.events.mailer import SmtpMailer

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

PAYLOADS = [
    "{{ ''.__class__ }}",
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ ''.__class__.__base__.__subclasses__() }}",
    "{{ ().__class__.__bases__[0].__subclasses__() }}",
    "{{ {}.__class__.__subclasses__() }}",
    "{% for c in [].__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
    "{{ ''.__class__.__mro__[-1].__subclasses__()|map(attribute='__name__')|join(',') }}",
    "{{ ''|attr('__class__') }}",
    "{{ ''|attr('__class__')|attr('__mro__') }}",
    "{{ ((''|attr('__class__')|attr('__mro__'))[1]|attr('__subclasses__'))() }}",
    "{{ execution|attr('\\x5f\\x5fclass\\x5f\\x5f') }}",
    "{{ '{0.__class__}'.format(JobName) }}",
    "{{ '{0.__class__.__mro__}'.format(JobName) }}",
    "{{ '{0.__class__}'.format(execution) }}",
    "{{ '{0.__init__.__globals__}'.format(cycler) }}",
    "{{ '{x.__class__.__mro__}'.format_map({'x': JobName}) }}",
    "{{ '{0.__class__}'.format_map([JobName]) }}",
    "{% set f = '{0.__globals__}'.format %}{{ f(lipsum) }}",
    "{{ '%s'|format(''.__class__.__mro__) }}",
    "{{ '%s' % ''.__class__ }}",
    "{{ JobName.format.__self__.__class__ }}",
    "{{ JobName.__len__.__self__ }}",
    "{{ execution.__class__.__init__.__globals__ }}",
    "{{ execution.started.__class__.__mro__ }}",
    "{{ execution.started.tzinfo.__class__ }}",
    "{{ self.__init__.__globals__ }}",
    "{{ self._TemplateReference__context }}",
    "{{ cycler.__init__.__globals__.os }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ lipsum.__globals__['os'].popen('id').read() }}",
    "{{ lipsum.__globals__.__builtins__.__import__('os').system('id') }}",
    "{{ config.__class__ }}{{ request.application }}",
    "{% set x = execution.__setattr__('exit_code', 0) %}{{ x }}",
    "{% set l = [] %}{% set x = l.append(l.__class__) %}{{ l }}",
]

LEAK_MARKERS = ("class", "subclasses", "mro", "globals", "module", "function", "uid=", "object")


def make_job() -> Job:
    return Job(
        "nightly", start=T0, interval=Interval(1, Unit.DAY), command=("true",), timezone="UTC"
    )


def make_execution(data: dict[str, object] | None = None) -> Execution:
    return Execution(
        "nightly",
        "r1",
        T0,
        T0,
        T0 + timedelta(seconds=5),
        Event.FAILED,
        exit_code=2,
        reason="exit code 2",
        message_data=data or {},
    )


@pytest.fixture(scope="module")
def server() -> Iterator[SmtpServer]:
    with SmtpServer() as running:
        yield running


# The SMTP client's timeout is reached only on failure: the server is a thread of this busy
# test process, on a machine that may be busier still (docs/testing.md).
SMTP_TIMEOUT = 30.0


def send(server: SmtpServer, template: str, *, subject: str | None = None) -> ReceivedMail:
    before = len(server.messages)
    settings = SmtpSettings(host=server.host, port=server.port, timeout=SMTP_TIMEOUT, retries=0)
    clock = FakeClock(T0)
    handler = EmailEventHandler(
        template,
        "ops@example.com",
        Event.FAILED,
        config=EmailConfiguration("scheduler@example.com", smtp=settings),
        subject=subject,
        mailer=SmtpMailer(clock=clock, local_hostname="localhost"),
        clock=clock,
    )
    handler.handle(make_job(), Event.FAILED, make_execution({"note": "data"}))
    return server.wait_for(before + 1)[before]


FALLBACK_BODY = (
    "The job nightly is FAILED.\n\n"
    "started: 2024-05-01 12:00:00+00:00\n"
    "ended: 2024-05-01 12:00:05+00:00\n"
    "exit code: 2\n"
    "reason: exit code 2\n\n"
    "(The alert template could not be rendered; see the scheduler's log.)\n"
)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_in_the_body_never_reaches_the_mail(server: SmtpServer, payload: str) -> None:
    mail = send(server, f"start|{payload}|end")
    assert mail.body in ("start||end\n", FALLBACK_BODY)
    assert not any(marker in mail.body.lower() for marker in LEAK_MARKERS)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_in_the_subject_never_reaches_the_mail(server: SmtpServer, payload: str) -> None:
    mail = send(server, "body", subject=f"S:{payload}")
    assert mail.subject in ("S:", "Job nightly is FAILED")


def test_some_payloads_fail_and_fall_back(server: SmtpServer) -> None:
    # Not all payloads render empty: the fallback path is exercised for real.
    mail = send(server, "{{ ''.__class__.__mro__[1].__subclasses__() }}")
    assert mail.body == FALLBACK_BODY


def test_template_code_in_message_data_is_text_not_code(server: SmtpServer) -> None:
    handler_data = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    settings = SmtpSettings(host=server.host, port=server.port, timeout=SMTP_TIMEOUT, retries=0)
    clock = FakeClock(T0)
    handler = EmailEventHandler(
        "note={{ note }}",
        "ops@example.com",
        Event.FAILED,
        config=EmailConfiguration("scheduler@example.com", smtp=settings),
        mailer=SmtpMailer(clock=clock, local_hostname="localhost"),
        clock=clock,
    )
    before = len(server.messages)
    handler.handle(make_job(), Event.FAILED, make_execution({"note": handler_data}))
    mail = server.wait_for(before + 1)[before]
    assert mail.body == f"note={handler_data}\n"  # shown verbatim, never evaluated
