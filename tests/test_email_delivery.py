"""Alert delivery under faulty mail servers (issue 15, case 2), against real sockets on 127.0.0.1.

A server that accepts and never answers, or that drips its greeting one byte at a time, must
hold neither the alerts to other servers, nor the scheduler's shutdown; one delivery attempt is
bounded as a whole by ``smtp.timeout``; queues are bounded; nothing is dropped without a log
line.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage

import pytest
from smtp_server import SmtpServer, silent_server

from jobscheduler import Event, Execution, Interval, Job, Unit
from jobscheduler.events.dispatch import HandlerRegistry
from jobscheduler.events.email import EmailConfiguration, EmailEventHandler, SmtpSettings
from jobscheduler.events.mailer import MailError, SmtpMailer
from jobscheduler.events.outbox import Alert, Outbox
from jobscheduler.model.execution import SchedulerResult

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
HOST = "127.0.0.1"


@contextlib.contextmanager
def dripping_server(interval: float = 0.3, for_seconds: float = 8.0) -> Iterator[int]:
    """A port on 127.0.0.1 whose server greets every connection one byte every `interval`
    seconds (a multi-line greeting that never ends), then hangs up after `for_seconds`."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((HOST, 0))
    listener.listen(16)
    listener.settimeout(0.1)
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        end = time.monotonic() + for_seconds
        text = b"220-slow.example.com " + b"x" * 10_000
        with conn:
            for byte in text:
                if stop.is_set() or time.monotonic() > end:
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return
                stop.wait(interval)

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        server.join(5)
        listener.close()


def make_job(name: str = "nightly") -> Job:
    return Job(name, start=T0, interval=Interval(1, Unit.DAY), command=("true",), timezone="UTC")


def make_execution(job: Job, event: Event = Event.FAILED) -> Execution:
    return Execution(
        job_name=job.name,
        run_id=1,
        slot=T0,
        started=T0,
        ended=T0 + timedelta(seconds=5),
        event=event,
        result=SchedulerResult.NORMAL,
        exit_code=1,
        reason="exit code 1",
    )


def settings(
    port: int, *, timeout: float = 5.0, retries: int = 0, queue: int = 100
) -> SmtpSettings:
    return SmtpSettings(host=HOST, port=port, timeout=timeout, retries=retries, queue_size=queue)


def handler(smtp: SmtpSettings, recipient: str = "ops@example.com") -> EmailEventHandler:
    config = EmailConfiguration(
        "scheduler@example.com", subject="{{ JobName }} {{ JobStatus }}", smtp=smtp
    )
    mailer = SmtpMailer(local_hostname="localhost", backoff=0.2)
    return EmailEventHandler(
        "body of {{ JobName }}", recipient, Event.FAILED, config=config, mailer=mailer
    )


def message() -> EmailMessage:
    mail = EmailMessage()
    mail["Subject"] = "x"
    mail.set_content("x")
    return mail


def wait_until(check: Callable[[], object], within: float = 30.0) -> None:
    """Return once `check()` is true; fail after `within` s (reached only on failure)."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


# ---- one attempt is bounded as a whole ---------------------------------------------------------


def test_a_dripping_server_cannot_stretch_an_attempt() -> None:
    """Before: a greeting dripped one byte every 0.3 s held the attempt until the server hung
    up (8 s, with ``timeout: 1s, retries: 0``); now it ends at the timeout."""
    with dripping_server(interval=0.3, for_seconds=8.0) as port:
        mailer = SmtpMailer(local_hostname="localhost")
        began = time.monotonic()
        with pytest.raises(MailError) as info:
            mailer.send(
                settings(port, timeout=1.0),
                message(),
                sender="s@example.com",
                recipients=["o@example.com"],
            )
        took = time.monotonic() - began
    assert took < 2.5, f"one attempt with timeout 1 s took {took:.1f} s"
    assert "did not finish within 1 s" in str(info.value)
    assert not info.value.permanent


def test_retries_are_bounded_by_the_message_deadline() -> None:
    with dripping_server(interval=0.2, for_seconds=20.0) as port:
        mailer = SmtpMailer(local_hostname="localhost", backoff=0.1)
        smtp = settings(port, timeout=0.5, retries=2)
        began = time.monotonic()
        with pytest.raises(MailError) as info:
            mailer.send(smtp, message(), sender="s@example.com", recipients=["o@example.com"])
        took = time.monotonic() - began
    assert info.value.attempts == 3
    assert took <= mailer.deadline(smtp) + 1.0
    assert mailer.deadline(smtp) == pytest.approx(3 * 0.5 + 0.1 + 0.2)


# ---- one server's trouble is its own -----------------------------------------------------------


def test_a_hanging_server_does_not_hold_alerts_to_a_healthy_one() -> None:
    """Before: 8 alerts to a server that never answers took the 4 handler threads, and 0 of 8
    alerts to a healthy server arrived within 5 s; now all 8 do."""
    job = make_job()
    registry = HandlerRegistry(4)
    with silent_server() as dead_port, SmtpServer() as healthy:
        # The dead server holds each attempt for 120 s: alerts queued behind those could not
        # arrive within the 30 s the healthy ones get (30 s only for a loaded machine).
        dead = handler(settings(dead_port, timeout=120.0))
        good = handler(settings(healthy.port))
        for _ in range(8):
            registry.dispatch(job, Event.FAILED, make_execution(job), [], [dead])
        for _ in range(8):
            registry.dispatch(job, Event.FAILED, make_execution(job), [], [good])
        wait_until(lambda: len(healthy.messages) >= 8, within=30.0)
        delivered = len(healthy.messages)
        registry.mail_grace = 0.2
        registry.close(wait=False)
    assert delivered == 8, f"{delivered} of 8 alerts to the healthy server"


def test_a_full_queue_drops_the_new_alert_with_an_error_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = make_job("backup")
    registry = HandlerRegistry(4)
    undelivered: list[tuple[Alert, str]] = []
    registry.outbox.set_hooks(
        on_undelivered=lambda alert, reason: undelivered.append((alert, reason))
    )
    registry.mail_grace = 0.0
    sending = threading.Event()

    def full() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "is full" in r.getMessage()]  # all 'backup'

    with (
        silent_server(accepted=sending) as port,
        caplog.at_level(logging.ERROR, logger="jobscheduler.email"),
    ):
        # An attempt outlasts the test: the first alert is still being sent at the end.
        dead = handler(settings(port, timeout=600.0, queue=3), "night@example.com")
        registry.dispatch(job, Event.FAILED, make_execution(job), [], [dead])
        assert sending.wait(30)  # the first alert is being sent: it has left the queue
        for _ in range(9):
            registry.dispatch(job, Event.FAILED, make_execution(job), [], [dead])
        # Each of the 10 is either dropped (a line) or kept: wait until all are decided.
        wait_until(lambda: len(full()) + len(registry.outbox.pending()) >= 10)
        assert registry.join(0.5) is False  # one being sent, three waiting

        assert len(full()) == 6
        assert len(registry.outbox.pending()) == 4
        began = time.monotonic()
        registry.close(wait=False)
        assert time.monotonic() - began < 2.0
        # (alerts of other tests still being sent in the background may log too: not 'backup')
        lines = [
            r.getMessage()
            for r in caplog.records
            if r.levelno == logging.ERROR and "'backup'" in r.getMessage()
        ]
    assert len(lines) == 10  # 6 dropped + 4 given up at shutdown: one line each
    assert all("'backup'" in line and "night@example.com" in line for line in lines)
    assert all("subject 'backup FAILED'" in line for line in lines)
    assert sum("still being sent at shutdown" in line for line in lines) == 1
    assert sum("still queued at shutdown" in line for line in lines) == 3
    assert len(undelivered) == 10


@pytest.mark.parametrize("wait", [True, False])
def test_shutdown_does_not_wait_for_a_dead_server(
    wait: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: close(wait=True) waited for every alert to a dead server (here 5 × 30 s);
    now it gives up after mail_drain (wait) or mail_grace (not wait) and logs each one."""
    job = make_job()
    registry = HandlerRegistry(4)
    registry.mail_drain, registry.mail_grace = 1.0, 0.2
    with silent_server() as port, caplog.at_level(logging.ERROR, logger="jobscheduler.email"):
        dead = handler(settings(port, timeout=30.0))
        for _ in range(5):
            registry.dispatch(job, Event.FAILED, make_execution(job), [], [dead])
        began = time.monotonic()
        registry.close(wait=wait)
        took = time.monotonic() - began
    assert took < (3.0 if wait else 2.0), f"close(wait={wait}) took {took:.1f} s"
    given_up = [r for r in caplog.records if "not delivered" in r.getMessage()]
    assert len(given_up) == 5


def test_alerts_to_a_healthy_server_still_go_out_at_shutdown() -> None:
    job = make_job()
    registry = HandlerRegistry(4)
    with SmtpServer() as server:
        good = handler(settings(server.port))
        for _ in range(5):
            registry.dispatch(job, Event.FAILED, make_execution(job), [], [good])
        registry.close(wait=False)
        assert len(server.messages) == 5


def test_an_outbox_thread_ends_when_its_queue_is_empty() -> None:
    outbox = Outbox()
    with SmtpServer() as server:
        alert = handler(settings(server.port)).compose(
            make_job(), Event.FAILED, make_execution(make_job())
        )
        assert alert is not None
        assert outbox.put(alert)
        assert outbox.join(5)
        assert len(server.messages) == 1
    assert not any(t.name.startswith("jobscheduler-mail-127") for t in threading.enumerate())
    assert outbox.close() == []


# ---- the setting in the file -------------------------------------------------------------------


def test_queue_size_in_the_file_is_read_written_and_checked() -> None:
    from jobscheduler.config import dump_config, parse_config
    from jobscheduler.errors import ConfigFileError

    text = (
        "email:\n  from_address: s@example.com\n"
        "  smtp: {host: mail.example.com, timeout: 2s, queue_size: 7}\n"
    )
    catalog = parse_config(text)
    assert catalog.email is not None
    assert catalog.email.smtp.queue_size == 7
    assert "queue_size: 7" in dump_config(catalog)
    assert parse_config(dump_config(catalog)).email == catalog.email
    with pytest.raises(ConfigFileError, match="queue_size") as info:
        parse_config(text.replace("queue_size: 7", "queue_size: 0"), filename="jobs.yaml")
    assert "jobs.yaml" in str(info.value) and ":3" in str(info.value)


def test_slow_handlers_do_not_hold_alerts() -> None:
    """Handlers that block take the handler pool; alerts have threads of their own."""
    release = threading.Event()

    class Stuck:
        def handle(self, job: Job, event: Event, execution: Execution) -> None:
            release.wait(10)

    job = make_job()
    registry = HandlerRegistry(2)
    try:
        with SmtpServer() as server:
            stuck = [Stuck() for _ in range(4)]
            registry.dispatch(job, Event.FAILED, make_execution(job), [], stuck)
            registry.dispatch(
                job, Event.FAILED, make_execution(job), [], [handler(settings(server.port))]
            )
            assert len(server.wait_for(1, timeout=30)) == 1
    finally:
        release.set()
        registry.close(wait=True)
