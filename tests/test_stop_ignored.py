"""An internal job that ignores ``stop()``: given up after its kill_grace, its worker replaced.

Real threads (the worker, the watchdog, the job's own run()); the scheduler's clock is a
`FakeClock` where the test drives the timeout, and the real clock where it measures how long
``shutdown(wait=False)`` takes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import jobs_for_tests as jft
import pytest

from jobscheduler import FakeClock, Job, JobType
from jobscheduler.scheduler import Scheduler

T0 = datetime(2024, 1, 1, tzinfo=UTC)
WAIT = 10.0


def internal(name: str, command: str, **fields: object) -> Job:
    return Job(
        name,
        type=JobType.INTERNAL,
        command=f"{jft.__name__}:{command}",
        start=T0 + timedelta(days=1),
        interval="1 day",
        timezone="UTC",
        **fields,  # type: ignore[arg-type]
    )


def wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def stubborn(request: pytest.FixtureRequest) -> Iterator[str]:
    key = request.node.nodeid
    yield key
    instance = jft.INSTANCES.get(key)
    if instance is not None:
        instance.release()  # let its thread end


def test_a_run_that_ignores_stop_is_given_up_and_its_worker_replaced(stubborn: str) -> None:
    clock = FakeClock(T0)
    scheduler = Scheduler(clock=clock, max_workers=1)
    try:
        scheduler.add_job(
            internal(
                "stubborn",
                "IgnoresStop",
                args={"key": stubborn},
                timeout=timedelta(seconds=10),
                kill_grace=timedelta(seconds=5),
            )
        )
        scheduler.add_job(internal("quick", "add"))
        scheduler.start()
        scheduler.run_now("stubborn")
        wait_until(lambda: stubborn in jft.INSTANCES, "the run to start")
        job = jft.instance(stubborn)
        assert job.started.wait(WAIT)
        clock.advance(timedelta(seconds=10))  # the timeout: stop() is called, and ignored
        wait_until(lambda: job.stop_calls == 1, "stop() to be called")
        assert [e.job_name for e in scheduler.executing] == ["stubborn"]
        clock.advance(timedelta(seconds=5))  # kill_grace is over: given up
        wait_until(
            lambda: [r for r in scheduler.history("stubborn") if r.state != "running"],
            "the run to be reported",
        )
        [given_up] = scheduler.history("stubborn")
        assert (given_up.state, given_up.reason) == ("failed", "did not stop")
        assert scheduler.executing == []
        assert not job.finished.is_set()  # its thread still runs
        # The only worker is stuck in run(): another job runs all the same.
        scheduler.run_now("quick")
        assert scheduler.wait_idle(WAIT)
        assert [e.state for e in scheduler.history("quick")] == ["succeeded"]
        # shutdown does not wait for the abandoned thread
        began = time.monotonic()
        scheduler.shutdown(wait=False)
        assert time.monotonic() - began < 2.0
        assert not job.finished.is_set()
    finally:
        scheduler.shutdown(wait=False)
    job.release()
    assert job.finished.wait(WAIT)
    assert [e.reason for e in scheduler.history("stubborn")] == ["did not stop"]  # reported once


def test_shutdown_without_wait_gives_up_on_it_after_its_kill_grace(stubborn: str) -> None:
    scheduler = Scheduler(max_workers=2)  # the real clock: shutdown is measured
    try:
        scheduler.add_job(
            internal(
                "stubborn",
                "IgnoresStop",
                args={"key": stubborn},
                kill_grace=timedelta(milliseconds=200),
            )
        )
        scheduler.start()
        scheduler.run_now("stubborn")
        wait_until(lambda: stubborn in jft.INSTANCES, "the run to start")
        job = jft.instance(stubborn)
        assert job.started.wait(WAIT)
        releaser = threading.Timer(8.0, job.release)  # before the fix: shutdown waited for it
        releaser.start()
        began = time.monotonic()
        scheduler.shutdown(wait=False)
        took = time.monotonic() - began
        releaser.cancel()
        assert took < 3.0, f"shutdown(wait=False) took {took:.1f} s"
        assert job.stop_calls == 1 and not job.finished.is_set()
        [given_up] = scheduler.history("stubborn")
        assert (given_up.state, given_up.reason) == ("failed", "did not stop")
    finally:
        scheduler.shutdown(wait=False)


def test_a_function_past_its_timeout_is_given_up_too(
    request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    """A function cannot be stopped at all: it is given up kill_grace after its timeout."""
    key = request.node.nodeid
    clock = FakeClock(T0)
    scheduler = Scheduler(clock=clock, max_workers=1)
    try:
        scheduler.add_job(
            internal(
                "blocked",
                "wait_for",
                args={"key": key},
                timeout=timedelta(seconds=3),
                kill_grace=timedelta(seconds=1),
            )
        )
        scheduler.start()
        scheduler.run_now("blocked")
        assert jft.event(key + ":started").wait(WAIT)
        clock.advance(timedelta(seconds=3))
        wait_until(lambda: "cannot be stopped (timed out)" in caplog.text, "the timeout")
        clock.advance(timedelta(seconds=1))
        assert scheduler.wait_idle(WAIT)
        [given_up] = scheduler.history("blocked")
        assert (given_up.state, given_up.reason) == ("failed", "did not stop")
    finally:
        jft.event(key).set()
        scheduler.shutdown(wait=False)
