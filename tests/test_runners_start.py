"""`Runner.start` of a plain synchronous function (the usual job, named ``"module:name"`` or
held by a job defined in code): called in the starting thread, with the same outcomes,
stops, give-up and `current_run()` as `Runner.execute`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import jobs_for_tests as jobs
import pytest

from jobscheduler.clock import FakeClock
from jobscheduler.model.event import Event
from jobscheduler.model.execution import Execution, SchedulerResult
from jobscheduler.model.job import Job, JobType
from jobscheduler.runners.identity import RunInfo, current_run
from jobscheduler.runners.runner import RunContext, Runner
from jobscheduler.triggers.interval import Interval

START = datetime(2024, 1, 1, tzinfo=UTC)
WAIT = 30.0  # real seconds a test waits for another thread before it fails
SEEN: list[RunInfo | None] = []


def note_run(**args: Any) -> None:
    SEEN.append(current_run())


def job(command: object, **fields: Any) -> Job:
    return Job(
        "plain",
        type=JobType.INTERNAL,
        command=command,
        start=START,
        interval=Interval.parse("1 hour"),
        **fields,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def runner(clock: FakeClock) -> Iterator[Runner]:
    with Runner(clock) as r:
        yield r


def start(runner: Runner, j: Job, ctx: RunContext) -> Execution:
    done: list[Execution] = []
    execution = runner.start(j, ctx, done.append)
    assert execution is not None and done == []  # ended here: `done` is for detached runs
    return execution


@pytest.mark.parametrize("command", [f"{__name__}:note_run", note_run])
def test_a_plain_function_runs_here_and_sees_its_run(runner: Runner, command: object) -> None:
    SEEN.clear()
    j = job(command, args={"day": "mon"})
    ctx = RunContext(j, "run-1", START, node="n1")
    e = start(runner, j, ctx)
    assert (e.event, e.result, e.reason, e.run_id) == (
        Event.SUCCESSFUL,
        SchedulerResult.NORMAL,
        None,
        "run-1",
    )
    assert e.started == e.ended == START and ctx.snapshot() is e and ctx.finished
    [info] = SEEN
    assert info is not None and (info.job, info.run_id, info.node) == ("plain", "run-1", "n1")
    assert current_run() is None  # left once the run ended


def test_a_raising_function_fails(runner: Runner) -> None:
    j = job(f"{jobs.__name__}:explode")
    e = start(runner, j, RunContext(j, "run-1", None))
    assert (e.event, e.result, e.reason, e.error) == (
        Event.FAILED,
        SchedulerResult.NORMAL,
        "raised KeyError",
        "KeyError: 'kaboom'",
    )


def test_a_run_stopped_before_it_starts_is_not_called(runner: Runner) -> None:
    SEEN.clear()
    j = job(note_run)
    ctx = RunContext(j, "run-1", None)
    ctx.stop("shutdown")
    e = start(runner, j, ctx)
    assert (e.event, e.result, e.reason) == (
        Event.NOT_STARTED,
        SchedulerResult.ABNORMAL,
        "shutdown",
    )
    assert SEEN == []


def test_a_context_runs_once(runner: Runner) -> None:
    j = job(note_run)
    ctx = RunContext(j, "run-1", None)
    first = start(runner, j, ctx)
    second = start(runner, j, ctx)
    assert first.event is Event.SUCCESSFUL and ctx.snapshot() is first
    assert second.event is Event.NOT_STARTED and "already run" in (second.reason or "")


def test_a_function_past_its_timeout_and_kill_grace_is_given_up(
    runner: Runner, clock: FakeClock
) -> None:
    given_up: list[Execution] = []
    runner.when_given_up(lambda j, ctx, e: given_up.append(e))
    j = job(f"{jobs.__name__}:wait_for", args={"key": "start-give-up"}, timeout=5, kill_grace=3)
    ctx = RunContext(j, "run-1", None)
    results: list[Execution] = []
    thread = in_thread(lambda: results.append(start(runner, j, ctx)))
    assert jobs.event("start-give-up:started").wait(WAIT)
    for _ in range(int(WAIT / 0.01)):
        if given_up:
            break
        clock.advance(1)
        jobs.event("never").wait(0.01)
    [e] = given_up
    assert (e.event, e.result, e.reason) == (Event.FAILED, SchedulerResult.ABNORMAL, "did not stop")
    jobs.event("start-give-up").set()  # the call returns: its own result is ignored
    thread.join(WAIT)
    assert results == [e] and ctx.snapshot() is e


def test_a_function_that_returns_after_its_timeout_fails_timed_out(
    runner: Runner, clock: FakeClock
) -> None:
    j = job(f"{jobs.__name__}:wait_for", args={"key": "start-late"}, timeout=5, kill_grace=300)
    ctx = RunContext(j, "run-1", None)
    results: list[Execution] = []
    thread = in_thread(lambda: results.append(start(runner, j, ctx)))
    assert jobs.event("start-late:started").wait(WAIT)
    for _ in range(int(WAIT / 0.01)):
        if ctx.stop_reason is not None:
            break
        clock.advance(5)
        jobs.event("never").wait(0.01)
    jobs.event("start-late").set()  # returns within its kill_grace
    thread.join(WAIT)
    [e] = results
    assert (e.event, e.result, e.reason) == (Event.FAILED, SchedulerResult.ABNORMAL, "timed out")


def in_thread(target: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread
