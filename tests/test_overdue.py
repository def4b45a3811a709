"""Overdue runs: ``warn_after`` read and refused as a config value, the decision on a
`FakeClock` (once per run, never for a run that ended in time, ``auto`` from the store), and
the OVERDUE alert mailed through a real SMTP server by a running scheduler."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from smtp_server import SmtpServer

from jobscheduler import Event, FakeClock, Job, Scheduler, parse_config
from jobscheduler.cluster.overdue import OverdueWatch, auto_limit
from jobscheduler.errors import ConfigFileError, InvalidJobError
from jobscheduler.model.execution import Execution
from jobscheduler.runners.runner import RunContext
from jobscheduler.state import MemoryStateStore, RunState

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def wait_until(check: Callable[[], object], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def job(warn_after: object) -> Job:
    return Job("slow", command=["true"], start=T0, interval="1 hour", warn_after=warn_after)  # type: ignore[arg-type]


# -- the option -------------------------------------------------------------------------------


def test_warn_after_is_a_duration_or_auto() -> None:
    assert job(90).warn_after == timedelta(seconds=90)
    assert job("AUTO").warn_after == "auto"
    assert job(None).warn_after is None
    for bad, message in ((0, "must be positive"), ("soon", "a duration (10m, 1h30m) or auto")):
        with pytest.raises(InvalidJobError, match=message.replace("(", r"\(").replace(")", r"\)")):
            job(bad)
    text = (
        "jobs:\n  nightly:\n    command: [true]\n    start: 2024-01-01 00:00:00\n"
        "    interval: 1 day\n    warn_after: {}\n"
    )
    assert parse_config(text.format("1h30m")).job("nightly").warn_after == timedelta(minutes=90)
    assert parse_config(text.format("auto")).job("nightly").warn_after == "auto"
    # A bare number is seconds, as for `timeout` (docs/config.md, "Durations").
    for seconds in ("30", '"30"'):
        assert parse_config(text.format(seconds)).job("nightly").warn_after == timedelta(seconds=30)
    with pytest.raises(ConfigFileError) as caught:
        parse_config(text.format("later"), filename="jobs.yaml")
    assert str(caught.value) == (
        "jobs.yaml:6, job 'nightly', key 'warn_after': warn_after must be a duration "
        "(10m, 1h30m) or auto, not 'later'"
    )


def test_auto_is_twice_the_p95_of_the_last_succeeded_runs() -> None:
    assert auto_limit([10.0] * 4) is None  # fewer than 5: no warning yet
    assert auto_limit([10.0, 11.0, 12.0, 13.0, 30.0]) == timedelta(seconds=60)
    assert auto_limit([float(n) for n in range(1, 21)]) == timedelta(seconds=38)


# -- the decision, on a FakeClock ------------------------------------------------------------


class Blocked:
    """An ``execute`` whose runs go on until released."""

    def __init__(self) -> None:
        self.release: dict[str, threading.Event] = {}
        self.started: list[str] = []  # the watch puts a run in view before it calls this

    def __call__(self, job: Job, context: RunContext) -> Execution:
        self.started.append(context.run_id)
        self.release.setdefault(context.run_id, threading.Event()).wait(30)
        return Execution(job_name=job.name, run_id=context.run_id, slot=None, started=T0)


def test_a_run_past_warn_after_is_told_once_and_one_in_time_never() -> None:
    clock = FakeClock(T0)
    store = MemoryStateStore(clock=clock)
    told: list[tuple[str, str]] = []
    execute = Blocked()
    watch = OverdueWatch(
        execute, lambda: store, clock, lambda j, e: told.append((j.name, e.run_id))
    )
    slow, quick = job(timedelta(minutes=10)), Job("quick", command=["true"], start=T0,
                                                  interval="1 hour", warn_after=600)  # fmt: skip
    runs = []
    for name, which in (("a", slow), ("b", quick)):
        execute.release[name] = threading.Event()
        context = RunContext(which, name, None, "run_now")
        runs.append(threading.Thread(target=watch.execute, args=(which, context)))
        runs[-1].start()
    try:
        wait_until(lambda: len(execute.started) == 2)
        clock.advance(timedelta(minutes=5))
        execute.release["b"].set()  # "quick" ends in time
        runs[1].join(10)
        clock.advance(timedelta(minutes=4, seconds=59))
        assert told == []
        clock.advance(timedelta(seconds=1))  # 10 minutes: "slow" is overdue
        wait_until(lambda: told == [("slow", "a")])
        clock.advance(timedelta(hours=5))
        assert told == [("slow", "a")]  # once only
    finally:
        for event in execute.release.values():
            event.set()
        for thread in runs:
            thread.join(10)
        watch.close()


def test_auto_reads_the_jobs_last_succeeded_runs() -> None:
    clock = FakeClock(T0)
    store = MemoryStateStore(clock=clock)
    watch = OverdueWatch(Blocked(), lambda: store, clock, lambda j, e: None)
    auto = job("auto")
    assert watch.limit(auto) is None
    for n, seconds in enumerate([60, 70, 80, 90, 100, 500]):
        state = RunState.FAILED if seconds == 500 else RunState.SUCCEEDED  # failures do not count
        started = T0 + timedelta(hours=n)
        store.record("slow", started, "schedule", f"r{n}", node="n", state=state,
                     started=started, ended=started + timedelta(seconds=seconds))  # fmt: skip
    assert watch.limit(auto) == timedelta(seconds=200)
    assert watch.limit(job(timedelta(minutes=3))) == timedelta(minutes=3)
    assert watch.limit(job(None)) is None


# -- mailed through a real SMTP server ------------------------------------------------------


def test_an_overdue_run_is_mailed_and_still_ends_once(tmp_path: Path) -> None:
    release = tmp_path / "release"
    script = f"import os, time\nwhile not os.path.exists({str(release)!r}):\n    time.sleep(0.02)\n"
    with SmtpServer() as server:
        config = tmp_path / "jobs.yaml"
        config.write_text(
            "email:\n"
            "  from_address: scheduler@example.com\n"
            '  subject: "[{{ JobStatus }}] {{ JobName }}"\n'
            f"  smtp: {{host: 127.0.0.1, port: {server.port}}}\n"
            "jobs:\n"
            "  slow:\n"
            f"    command: [{sys.executable}, -c, {script!r}]\n"
            "    on_demand: true\n"
            "    warn_after: 1s\n"
            "    messages:\n"
            "      overdue:\n"
            "        recipients: [ops@example.com]\n"
            '        template: "{{ JobName }} has run since {{ execution.started }}"\n'
            "      successful: {recipients: [ops@example.com]}\n"
        )
        sched = Scheduler(config, state="memory", node="n1")
        sched.start()
        try:
            sched.run_now("slow")
            [mail] = server.wait_for(1, timeout=20)
            assert mail.subject == "[OVERDUE] slow"
            assert mail.rcpt_tos == ("ops@example.com",)
            assert "slow has run since" in mail.body
            [running] = sched.history("slow")
            assert running.state is RunState.RUNNING  # a warning, not the run's end
            release.touch()
            mails = server.wait_for(2, timeout=20)
            assert [m.subject for m in mails] == ["[OVERDUE] slow", "[SUCCESSFUL] slow"]
            sched.wait_idle(10)
            [ended] = sched.history("slow")
            assert ended.state is RunState.SUCCEEDED
        finally:
            sched.shutdown(wait=False)
    assert Event.parse("overdue") is Event.OVERDUE


# -- an async job: started on the runner's event loop, holding no worker ----------------------


async def _sleeps_a_while() -> None:
    import asyncio

    await asyncio.sleep(1.5)


def test_an_async_run_is_told_overdue_and_leaves_the_watches_when_it_ends() -> None:
    # Main's processor starts runs through `Runner.start` (an async job detaches): the watches
    # wrap it as they wrap `execute`, and a detached run leaves them when it ends.
    from jobscheduler import JobType

    told: list[tuple[Event, str]] = []

    class Told:
        def handle(self, job: Job, event: Event, execution: Execution) -> None:
            told.append((event, execution.run_id))

    sched = Scheduler(state="memory", node="n1")
    waits = Job("waits", type=JobType.INTERNAL, command=_sleeps_a_while, on_demand=True,
                warn_after=0.3)  # fmt: skip
    sched.add_job(waits)
    sched.add_handler("waits", Told())
    sched.start()
    try:
        sched.run_now("waits")
        wait_until(lambda: any(e is Event.OVERDUE for e, _ in told))
        wait_until(lambda: any(e is Event.SUCCESSFUL for e, _ in told))
        [overdue] = [r for e, r in told if e is Event.OVERDUE]
        [ended] = [r for e, r in told if e is Event.SUCCESSFUL]
        assert overdue == ended  # the same run: told once, then it ended as any run does
        assert not sched._overdue._runs and not sched._live._running  # left the watches
    finally:
        sched.shutdown(wait=True)


def test_resume_after_needs_its_unit_as_the_docs_say() -> None:
    """`pause_after_failures.resume_after` is one of the durations that carry their unit."""
    text = (
        "jobs:\n  nightly:\n    command: [true]\n    start: 2024-01-01 00:00:00\n"
        "    interval: 1 day\n    pause_after_failures: {{failures: 3, resume_after: {}}}\n"
    )
    job = parse_config(text.format("5m")).job("nightly")
    assert job.pause_after_failures is not None
    assert job.pause_after_failures.resume_after == timedelta(minutes=5)
    with pytest.raises(ConfigFileError, match="resume_after 300 is a bare number: write it"):
        parse_config(text.format("300"))
