#!/usr/bin/env python3
"""The specification's demo (Job Scheduler 2.0, section 4.3), run for real.

    python demo.py            # about 10 s
    python demo.py --fast     # shorter delays, as the tests run it (or JOBSCHEDULER_DEMO_FAST=1)

What it does, in a temporary directory that it removes at the end:

1. starts an SMTP server on 127.0.0.1 (aiosmtpd: ``pip install -e '.[demo]'``) that keeps
   every mail it receives;
2. copies ``sample_config.yaml`` (and its ``templates/``) and points the copy's ``email.smtp``
   at that server; the sample's own scheduled jobs are paused (``pause_job``) so that only the
   demo's jobs run;
3. 4.3.1, the functions of version 1.0: a `Scheduler` from the config file, jobs added (an
   external file cleanup with a start, stop and interval, a slow external archiver, an internal
   heartbeat class), started; the executing list and the job list (status, last run, next run);
4. 4.3.2, the functions of version 2.0: ``jobA`` (an internal class) -> ``jobB`` (an external
   command, a delay after jobA) -> ``jobC`` (an external command that fails on purpose); an
   e-mail handler on jobC for FAILED; a group of the three with an e-mail handler for
   SUCCESSFUL to two recipients; the handlers removed (a second run of the chain sends nothing);
   the group and the jobs removed;
5. prints the mails the server received (From, To, Subject, body) and shuts down cleanly.

Exit code 0 when everything happened as described, 1 otherwise (the reason is printed).
"""

from __future__ import annotations

import argparse
import email
import email.policy
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from jobscheduler import (
    ConfigStore,
    Dependence,
    EmailEventHandler,
    Event,
    Execution,
    Interval,
    Job,
    JobActionError,
    JobGroup,
    JobType,
    Scheduler,
    SmtpSecurity,
    SmtpSettings,
    SystemClock,
    Unit,
)

HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "sample_config.yaml"
CLOCK = SystemClock()
DEADLINE = 30.0  # seconds: the most the demo waits for any one thing

# The specification's "The Job %JobName% is %JobStatus%...", in Jinja2.
MESSAGE_TEMPLATE = """\
The Job {{ JobName }} is {{ JobStatus }}.
Run {{ execution.run_id }} ({{ execution.trigger }}): \
{{ execution.started.strftime('%H:%M:%S') }} to {{ execution.ended.strftime('%H:%M:%S') }}\
{% if execution.exit_code is not none %}, exit code {{ execution.exit_code }}{% endif %}.
{% if execution.reason %}Reason: {{ execution.reason }}
{% endif %}{% if files is defined %}{{ title }}: {{ files }} file(s), {{ bytes }} bytes.
{% endif %}{% if execution.output_tail %}Output:
{{ execution.output_tail }}{% endif %}"""


class Failure(Exception):
    """Something the demo expected did not happen."""


# -- a mail server on loopback ------------------------------------------------------------------


@dataclass(frozen=True)
class Mail:
    mail_from: str
    rcpt_tos: tuple[str, ...]
    message: EmailMessage

    @property
    def body(self) -> str:
        part = self.message.get_body(("plain",))
        content = part.get_content() if part is not None else ""
        return str(content).replace("\r\n", "\n")


class MailBox:
    """An SMTP server on 127.0.0.1 that keeps what it receives (aiosmtpd in a thread)."""

    def __init__(self) -> None:
        self.host = "127.0.0.1"
        self.port = 0
        self._mails: list[Mail] = []
        self._arrived = threading.Condition()
        self._controller: Any = None

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        with self._arrived:
            self._mails.append(Mail(envelope.mail_from, tuple(envelope.rcpt_tos), message))
            self._arrived.notify_all()
        return "250 Message accepted"

    def start(self) -> None:
        try:
            from aiosmtpd.controller import Controller
        except ImportError:
            raise SystemExit(
                "demo.py needs aiosmtpd for its mail server: pip install -e '.[demo]'"
            ) from None
        for attempt in range(5):
            with socket.socket() as probe:  # a free port (released: another could take it)
                probe.bind((self.host, 0))
                self.port = probe.getsockname()[1]
            controller = Controller(self, hostname=self.host, port=self.port, ready_timeout=10)
            try:
                controller.start()
            except (OSError, RuntimeError):
                if attempt == 4:
                    raise
                continue
            self._controller = controller
            return

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    @property
    def mails(self) -> list[Mail]:
        with self._arrived:
            return list(self._mails)

    def wait_for(self, count: int) -> list[Mail]:
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self._mails) >= count, DEADLINE):
                raise Failure(f"expected {count} mails, the server got {len(self._mails)}")
            return list(self._mails)


# -- printing -----------------------------------------------------------------------------------

_print_lock = threading.Lock()


def say(*lines: str) -> None:
    with _print_lock:
        for line in lines:
            print(line)
        sys.stdout.flush()


def step(code: str) -> None:
    """Show the library call about to be made."""
    say(f"  >>> {code}")


def section(title: str) -> None:
    say("", title, "=" * len(title))


def when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    local = moment.astimezone()
    if abs(local - CLOCK.now().astimezone()) < timedelta(hours=12):
        return local.strftime("%H:%M:%S")
    return local.strftime("%Y-%m-%d %H:%M")


def table(rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    say(
        *(
            "    " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows
        )
    )


class EventLog:
    """An event handler that prints every event of the jobs it is added to, and keeps them."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self._events: list[tuple[str, Event, Execution]] = []
        self._changed = threading.Condition()

    def handle(self, job: Job, event: Event, execution: Execution) -> None:
        elapsed = (CLOCK.now() - self.start).total_seconds()
        detail = f" ({execution.reason})" if execution.reason else ""
        say(f"    [{elapsed:5.1f} s] event: {job.name} {event.name}{detail}")
        with self._changed:
            self._events.append((job.name, event, execution))
            self._changed.notify_all()

    def count(self, name: str) -> int:
        with self._changed:
            return sum(1 for job, _, _ in self._events if job == name)

    def last(self, name: str) -> Execution | None:
        """The execution of job `name`'s last event, if it had one."""
        with self._changed:
            return next((e for job, _, e in reversed(self._events) if job == name), None)

    def wait_for(self, name: str, count: int = 1) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self.count(name) >= count, DEADLINE):
                raise Failure(f"{name} did not end {count} time(s) within {DEADLINE} s")

    def __repr__(self) -> str:
        return "EventLog()"


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = CLOCK.now() + timedelta(seconds=DEADLINE)
    while not condition():
        if CLOCK.now() > deadline:
            raise Failure(f"timed out waiting for {what}")
        CLOCK.sleep(0.05)


def between_runs(scheduler: Scheduler, name: str) -> bool:
    """Whether job `name` has no run going and its next slot is 0.25 s away or more."""
    if any(execution.job_name == name for execution in scheduler.executing):
        return False
    next_run = scheduler.next_run(name)
    return next_run is None or next_run - CLOCK.now() >= timedelta(seconds=0.25)


def print_executing(scheduler: Scheduler) -> None:
    """The spec's getJobExecutionList."""
    rows = [("JOB", "RUN", "PID", "STARTED", "RUNNING FOR")]
    now = CLOCK.now()
    for execution in scheduler.executing:
        rows.append(
            (
                execution.job_name,
                str(execution.run_id),
                str(execution.pid or "-"),
                when(execution.started),
                f"{(now - execution.started).total_seconds():.1f} s",
            )
        )
    if len(rows) == 1:
        say("    (nothing is executing)")
    else:
        table(rows)


def print_jobs(scheduler: Scheduler, events: EventLog) -> None:
    """The spec's getJobList, with each job's status, last run and next run.

    The last run comes from the state store (`history`); its running status (an internal
    job's own, the spec's getRunningStatus) from the execution the job's handler saw.
    """
    running = {execution.job_name for execution in scheduler.executing}
    rows = [("JOB", "TYPE", "STATUS", "LAST RUN", "LAST STATE", "RUNNING STATUS", "NEXT RUN")]
    for job in scheduler.jobs:
        last = [r for r in scheduler.history(job.name, limit=2) if r.ended is not None][:1]
        seen = events.last(job.name)
        next_run = scheduler.next_run(job.name)
        if job.name in running:
            status = "running"
        elif not job.enabled:
            status = "paused"
        elif job.dependence is not None:
            status = f"after {job.dependence.job_name}"
        elif next_run is None:
            status = "ended"
        else:
            status = "scheduled"
        rows.append(
            (
                job.name,
                str(job.type),
                status,
                when(last[0].ended) if last else "-",
                last[0].state if last else "-",
                (seen.running_status or "-") if seen is not None else "-",
                when(next_run),
            )
        )
    table(rows)


def print_mails(mails: list[Mail]) -> None:
    for number, mail in enumerate(mails, 1):
        say(
            f"  --- mail {number} ---",
            f"    From:    {mail.message['From']}   (envelope: {mail.mail_from})",
            f"    To:      {mail.message['To']}   (envelope: {', '.join(mail.rcpt_tos)})",
            f"    Subject: {mail.message['Subject']}",
            *(f"    | {line}" for line in mail.body.rstrip("\n").splitlines()),
        )


def print_file_entry(path: Path, name: str) -> None:
    """The lines of job `name` in the configuration file, as the scheduler wrote them."""
    lines = path.read_text().splitlines()
    start = lines.index(f"  {name}:")
    end = start + 1
    while end < len(lines) and lines[end].startswith("    "):
        end += 1
    say(*(f"    | {line}" for line in lines[start:end]))


# -- the demo -----------------------------------------------------------------------------------


def prepare(work: Path, mailbox: MailBox) -> Path:
    """The sample configuration, copied, its mail sent to `mailbox`, its jobs quiet."""
    config = work / "sample_config.yaml"
    shutil.copy(SAMPLE, config)
    shutil.copytree(HERE / "templates", work / "templates")
    store = ConfigStore(config)
    settings = store.read().email
    assert settings is not None
    smtp = SmtpSettings(mailbox.host, mailbox.port, SmtpSecurity.NONE, timeout=5.0, retries=1)
    store.set_email(replace(settings, smtp=smtp))
    say(f"  copied sample_config.yaml to {config}")
    say(f"  its email.smtp now points at the local server {mailbox.host}:{mailbox.port}")
    return config


def version_1(scheduler: Scheduler, work: Path, fast: bool, events: EventLog) -> None:
    section("4.3.1 Functions in version 1.0")
    quiet = [job.name for job in scheduler.jobs if job.enabled and job.dependence is None]
    for name in quiet:
        scheduler.pause_job(name)
    say(f"  paused the sample's scheduled jobs ({', '.join(quiet)}): only the demo's jobs run")

    files = work / "files"
    files.mkdir()
    for i in range(3):
        (files / f"old-{i}.tmp").write_text("temporary\n")
    (files / "keep.log").write_text("a log line\n")
    first = CLOCK.now().replace(microsecond=0) + timedelta(seconds=2)
    every = 1 if fast else 2
    cleanup = Job(
        "file-cleanup",
        type=JobType.EXTERNAL,
        command=("find", str(files), "-name", "*.tmp", "-print", "-delete"),
        start=first,
        stop=first + timedelta(seconds=3 * every),
        interval=Interval(every, Unit.SECOND),
    )
    step(
        f"scheduler.add_job(Job('file-cleanup', command=['find', '{files.name}', '-name', "
        f"'*.tmp', '-print', '-delete'], start={when(first)}, stop=start + {3 * every} s, "
        f"interval='{cleanup.interval}'))"
    )
    scheduler.add_job(cleanup)
    archive = Job(
        "archive-logs",
        # the sleep keeps it in the executing list long enough to be seen there
        command=("sh", "-c", "sleep 2; tar czf archive.tgz files && echo archived"),
        cwd=str(work),
        start=first,
        interval=Interval(1, Unit.HOUR),
        max_instances=1,
    )
    step("scheduler.add_job(Job('archive-logs', command=[sh, -c, 'sleep …; tar czf …'], …))")
    scheduler.add_job(archive)
    heartbeat = Job(
        "heartbeat-demo",
        type=JobType.INTERNAL,
        command="jobscheduler.examples:Touch",
        args={"path": str(work / "heartbeat")},
        start=first,
        interval=Interval(1, Unit.SECOND),
    )
    step(
        "scheduler.add_job(Job('heartbeat-demo', type=JobType.INTERNAL, "
        "command='jobscheduler.examples:Touch', interval='1 second', …))"
    )
    scheduler.add_job(heartbeat)
    for name in ("file-cleanup", "archive-logs", "heartbeat-demo"):
        scheduler.add_handler(name, events)

    step("scheduler.start()")
    scheduler.start()
    say("  waiting for the first runs …")
    wait_until(
        lambda: any(
            e.job_name == "archive-logs" and e.pid is not None for e in scheduler.executing
        ),
        "archive",
    )
    say("", "  The executing list (scheduler.executing, the spec's getJobExecutionList):")
    print_executing(scheduler)
    events.wait_for("archive-logs")
    events.wait_for("file-cleanup", 2)
    # file-cleanup runs every second: the list is taken between two of its runs, none going
    # and the next at least a quarter second away (on a loaded machine the event above can
    # come late, right at the next slot).
    wait_until(lambda: between_runs(scheduler, "file-cleanup"), "a moment between runs")
    say("", "  The job list (scheduler.jobs, with history and next_run: the spec's getJobList):")
    print_jobs(scheduler, events)
    if any(files.glob("*.tmp")) or not (work / "archive.tgz").exists():
        raise Failure("file-cleanup or archive-logs did not do their work")
    first_cleanup = scheduler.history("file-cleanup")[-1]  # newest first
    say("  file-cleanup's first run printed (the tail of its output, kept in its run record):")
    say(*(f"    | {line}" for line in first_cleanup.output_tail.splitlines()))
    say("  archive-logs wrote archive.tgz")
    for name in ("file-cleanup", "heartbeat-demo"):
        step(f"scheduler.pause_job({name!r})")
        scheduler.pause_job(name)


def version_2(
    scheduler: Scheduler, config: Path, work: Path, fast: bool, events: EventLog, box: MailBox
) -> None:
    section("4.3.2 Functions in version 2.0")
    delay = timedelta(seconds=0.5 if fast else 2)
    start = CLOCK.now().replace(microsecond=0) + timedelta(seconds=2)
    job_a = Job(
        "jobA",
        type=JobType.INTERNAL,
        command="jobscheduler.examples:Report",
        args={"directory": str(work / "files"), "pattern": "*", "title": "Files to archive"},
        start=start,
        interval=Interval(1, Unit.DAY),
    )
    job_b = Job(
        "jobB",
        command=("sh", "-c", "tar czf archive-2.tgz files && ls -l archive-2.tgz"),
        cwd=str(work),
        dependence=Dependence("jobA", Event.SUCCESSFUL, delay),
    )
    job_c = Job(
        "jobC",
        command=("ls", "-l", "no-such-directory"),  # the spec's "dir"; fails on purpose
        cwd=str(work),
        dependence=Dependence("jobB", Event.SUCCESSFUL),
    )
    step(
        "scheduler.add_job(Job('jobA', type=JobType.INTERNAL, "
        f"command='jobscheduler.examples:Report', start={when(start)}, interval='1 day'))"
    )
    scheduler.add_job(job_a)
    step(
        "scheduler.add_job(Job('jobB', command=(sh, -c, 'tar czf …'), "
        f"dependence=Dependence('jobA', Event.SUCCESSFUL, {delay.total_seconds():g} s)))"
    )
    scheduler.add_job(job_b)
    step(
        "scheduler.add_job(Job('jobC', command=('ls', '-l', 'no-such-directory'), "
        "dependence=Dependence('jobB', Event.SUCCESSFUL)))"
    )
    scheduler.add_job(job_c)
    say("  jobB as the scheduler wrote it to the configuration file:")
    print_file_entry(config, "jobB")

    on_failure = EmailEventHandler(MESSAGE_TEMPLATE, ["name1@example.com"], Event.FAILED)
    step(
        "scheduler.add_handler('jobC', "
        "EmailEventHandler(template, ['name1@example.com'], Event.FAILED))"
    )
    scheduler.add_handler("jobC", on_failure)
    step("scheduler.add_group(JobGroup('group_1', ['jobA', 'jobB', 'jobC']))")
    scheduler.add_group(JobGroup("group_1", ("jobA", "jobB", "jobC")))
    on_success = EmailEventHandler(
        MESSAGE_TEMPLATE, ["name2@example.com", "name3@example.com"], Event.SUCCESSFUL
    )
    step(
        "scheduler.add_handler('group_1', EmailEventHandler(template, "
        "['name2@example.com', 'name3@example.com'], Event.SUCCESSFUL))"
    )
    scheduler.add_handler("group_1", on_success)
    for name in ("jobA", "jobB", "jobC"):
        scheduler.add_handler(name, events)

    say(
        f"  jobA runs at {when(start)}; jobB {delay.total_seconds():g} s after it succeeds; "
        "jobC right after jobB …"
    )
    events.wait_for("jobC")
    if not scheduler.wait_idle(DEADLINE):
        raise Failure("the scheduler did not become idle")
    box.wait_for(3)
    say("", "  The job list:")
    print_jobs(scheduler, events)
    say(
        f"  mails received so far: {len(box.mails)} "
        "(jobA and jobB to group_1's recipients, jobC's failure to name1)"
    )

    section("Removing the handlers, the group and the jobs")
    step("scheduler.remove_handler('jobC', scheduler.handlers('jobC')[0])")
    scheduler.remove_handler("jobC", scheduler.handlers("jobC")[0])
    step("scheduler.remove_handler('group_1', scheduler.handlers('group_1')[0])")
    scheduler.remove_handler("group_1", scheduler.handlers("group_1")[0])
    say("  the chain once more, without e-mail handlers:")
    step("scheduler.run_now('jobA')")
    scheduler.run_now("jobA")
    events.wait_for("jobC", 2)
    if not scheduler.wait_idle(DEADLINE):
        raise Failure("the scheduler did not become idle")
    if len(box.mails) != 3:
        raise Failure(f"{len(box.mails) - 3} mails arrived after the handlers were removed")
    say("  no new mail: the handlers are gone")

    step("scheduler.remove_group('group_1')")
    scheduler.remove_group("group_1")
    step("scheduler.remove_job('jobA')")
    try:
        scheduler.remove_job("jobA")
    except JobActionError as exc:
        say(f"  refused, as it should be: {exc}")
    else:
        raise Failure("removing jobA while jobB depends on it was accepted")
    for name in ("jobC", "jobB", "jobA"):
        step(f"scheduler.remove_job({name!r})")
        scheduler.remove_job(name)
    left = [job.name for job in scheduler.jobs]
    say(f"  jobs left: {', '.join(left)}")
    if any(name in left for name in ("jobA", "jobB", "jobC")) or "group_1" in config.read_text():
        raise Failure("the chain or its group is still defined")


def demo(fast: bool) -> None:
    began = CLOCK.now()
    section("Setting up")
    mailbox = MailBox()
    mailbox.start()
    say(f"  an SMTP server listens on {mailbox.host}:{mailbox.port}")
    work = Path(tempfile.mkdtemp(prefix="jobscheduler-demo-"))
    scheduler: Scheduler | None = None
    try:
        config = prepare(work, mailbox)
        step(f"scheduler = Scheduler({config.name!r})")
        scheduler = Scheduler(config)
        events = EventLog(began)
        version_1(scheduler, work, fast, events)
        version_2(scheduler, config, work, fast, events, mailbox)
        section("Shutting down")
        step("scheduler.shutdown(wait=True)")
        scheduler.shutdown(wait=True)
        scheduler = None
        section("Mails received by the local SMTP server")
        print_mails(mailbox.mails)
    finally:
        if scheduler is not None:
            scheduler.shutdown(wait=False)
        mailbox.stop()
        shutil.rmtree(work, ignore_errors=True)
        say("", f"removed {work}; the demo took {(CLOCK.now() - began).total_seconds():.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="shorter delays (for the tests)")
    parser.add_argument("--verbose", action="store_true", help="log at INFO (audit lines)")
    args = parser.parse_args(argv)
    fast = args.fast or os.environ.get("JOBSCHEDULER_DEMO_FAST", "") not in ("", "0")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        demo(fast)
    except Failure as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
