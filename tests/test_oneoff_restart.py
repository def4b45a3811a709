"""A one-off job across restarts on a durable state store (issue 18): one that ran is not run
again; one missed while no node ran follows `catch_up` (a catch-up run, or a missed record).

Real SQLite files; the scheduler's time is a `FakeClock`, so the downtime costs nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import policy_jobs as pj

from jobscheduler import FakeClock, Job, JobType
from jobscheduler.scheduler import Scheduler

T0 = datetime(2024, 3, 30, 12, 0, tzinfo=UTC)
WAIT = 60.0  # seconds: reached only when a test fails, even on a loaded machine


def once(key: str, catch_up: str) -> Job:
    return Job(
        "once",
        type=JobType.INTERNAL,
        command=f"{pj.__name__}:ok",
        args={"key": key},
        start=T0 + timedelta(hours=1),
        timezone="Europe/Berlin",  # the night of the spring change follows: no matter
        catch_up=catch_up,
    )


def node(url: str, clock: FakeClock, job: Job) -> Scheduler:
    """A new scheduler process on the store at `url`, with `job` defined, started."""
    scheduler = Scheduler(clock=clock, state=url)
    scheduler.add_job(job)
    scheduler.start()
    return scheduler


def test_a_one_off_that_ran_is_not_run_again_after_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    clock = FakeClock(T0)
    key = "oneoff-ran"
    first = node(url, clock, once(key, "latest"))
    clock.advance(timedelta(hours=1))
    first._processor.run_due(clock.now())
    assert first.wait_idle(WAIT)
    first.shutdown()
    assert [c["trigger"] for c in pj.calls(key)] == ["schedule"]
    clock.advance(timedelta(hours=2))
    second = node(url, clock, once(key, "latest"))
    try:
        assert second.wait_idle(WAIT)
        assert second.next_run("once") is None
        assert len(pj.calls(key)) == 1  # not run again, not caught up
        states = [(r.trigger, r.state) for r in second.history("once")]
        assert states == [("schedule", "succeeded")]
    finally:
        second.shutdown()


def test_a_one_off_missed_while_no_node_ran_is_caught_up(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    clock = FakeClock(T0)
    key = "oneoff-caught-up"
    node(url, clock, once(key, "latest")).shutdown()  # up at T0: the job's mark
    clock.advance(timedelta(hours=3))  # nobody up at T0 + 1 h
    second = node(url, clock, once(key, "latest"))
    try:
        assert second.wait_idle(WAIT)
        [call] = pj.calls(key)
        assert (call["trigger"], call["slot"]) == ("catch_up", T0 + timedelta(hours=1))
        [record] = second.history("once")
        assert (record.trigger, record.state) == ("catch_up", "succeeded")
        assert second.next_run("once") is None
    finally:
        second.shutdown()
    third = node(url, clock, once(key, "latest"))  # and once only
    try:
        assert third.wait_idle(WAIT)
        assert len(pj.calls(key)) == 1
    finally:
        third.shutdown()


def test_a_one_off_missed_without_catch_up_is_recorded_missed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    clock = FakeClock(T0)
    key = "oneoff-missed"
    node(url, clock, once(key, "none")).shutdown()
    clock.advance(timedelta(hours=3))
    second = node(url, clock, once(key, "none"))
    try:
        assert second.wait_idle(WAIT)
        assert pj.calls(key) == []  # the spec's rule: missed slots are not made up
        [record] = second.history("once")
        assert (record.state, record.slot) == ("missed", T0 + timedelta(hours=1))
    finally:
        second.shutdown()
