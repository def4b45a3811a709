"""`retry:` attempts, backoff with jitter, trigger and attempt, final-outcome alerts, claims."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import policy_jobs as pj
import pytest
from hypothesis import given
from hypothesis import strategies as st
from policy_support import T0, WAIT, Recorder, internal_job, step_one

from jobscheduler import Event, Execution, FakeClock, Job
from jobscheduler.model.policies import Retry
from jobscheduler.policies.retry import Retries
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import MemoryStateStore, RunState


def job(name: str, function: str, key: str, **fields: Any) -> Job:
    return internal_job(name, function, key, "1 hour", **fields)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def scheduler(clock: FakeClock) -> Iterator[Scheduler]:
    s = Scheduler(clock=clock, max_workers=2)
    yield s
    s.shutdown(wait=False)


def step(s: Scheduler, clock: FakeClock, seconds: float) -> None:
    step_one(s, clock, seconds)


def test_a_failed_run_is_tried_again_as_the_same_slot_with_the_next_attempt(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    recorder = Recorder()
    retry = Retry(3, backoff=timedelta(seconds=10), max_backoff=timedelta(minutes=5))
    scheduler.add_job(job("flaky", "flaky", key, args={"failures": 2}, retry=retry))
    scheduler.add_handler("flaky", recorder)
    scheduler.start()
    step(scheduler, clock, 60)
    assert len(pj.calls(key)) == 1
    step(scheduler, clock, 4.9)  # the first backoff is 5 to 10 s (jitter 50-100 %)
    assert len(pj.calls(key)) == 1
    step(scheduler, clock, 5.1)
    assert len(pj.calls(key)) == 2
    step(scheduler, clock, 20)  # the second: 10 to 20 s
    runs = pj.calls(key)
    assert [r["attempt"] for r in runs] == [1, 2, 3]
    assert [r["trigger"] for r in runs] == ["schedule", "retry", "retry"]
    assert {r["slot"] for r in runs} == {T0 + timedelta(seconds=60)}
    records = list(reversed(scheduler.history("flaky")))
    assert [(r.attempt, r.state, r.trigger) for r in records] == [
        (1, RunState.FAILED, "schedule"),
        (2, RunState.FAILED, "retry"),
        (3, RunState.SUCCEEDED, "retry"),
    ]
    assert [e for e, _ in recorder.seen] == [Event.SUCCESSFUL]  # only the final outcome


def test_the_last_attempt_fails_and_only_then_handlers_hear(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    recorder = Recorder()
    retry = Retry(2, backoff=timedelta(seconds=1))
    scheduler.add_job(job("bad", "fail", key, retry=retry))
    scheduler.add_handler("bad", recorder)
    scheduler.start()
    step(scheduler, clock, 60)
    assert recorder.seen == []
    step(scheduler, clock, 1)
    step(scheduler, clock, 60)
    assert [r["attempt"] for r in pj.calls(key)] == [1, 2]  # attempts: 2 in all
    assert [e for e, _ in recorder.seen] == [Event.FAILED]


def test_alert_each_attempt_tells_every_try(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    recorder = Recorder()
    retry = Retry(3, backoff=timedelta(seconds=1), alert_each_attempt=True)
    scheduler.add_job(job("bad", "fail", key, retry=retry))
    scheduler.add_handler("bad", recorder)
    scheduler.start()
    step(scheduler, clock, 60)
    step(scheduler, clock, 1)
    step(scheduler, clock, 2)
    assert [e for e, _ in recorder.seen] == [Event.FAILED] * 3


def test_a_stopped_run_is_not_retried(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    scheduler.add_job(job("held", "Holds", key, retry=Retry(3, backoff=timedelta(seconds=1))))
    scheduler.start()
    clock.advance(timedelta(seconds=60))
    scheduler._processor.run_due(clock.now())
    pj.wait_calls(key, 1, WAIT)
    assert pj.started(key).wait(WAIT)
    assert scheduler.stop_job("held") == 1
    assert scheduler.wait_idle(WAIT)
    step(scheduler, clock, 120)
    assert len(pj.calls(key)) == 1


def test_two_nodes_on_one_store_run_each_attempt_once(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    store = MemoryStateStore()
    definition = job("bad", "fail", key, retry=Retry(3, backoff=timedelta(seconds=1)))
    # Leases longer than the clock's steps: the two nodes must not take each other over.
    nodes = [Scheduler(clock=clock, state=store, node=f"n{i}", lease=3600) for i in (1, 2)]
    try:
        for node in nodes:
            node.add_job(definition)
            node.start()
        for seconds in (60, 1, 2, 60):
            clock.advance(timedelta(seconds=seconds))
            for node in nodes:
                node._processor.run_due(clock.now())
            for node in nodes:
                assert node.wait_idle(WAIT)
        assert sorted(r["attempt"] for r in pj.calls(key)) == [1, 2, 3]
        attempts = sorted((r.attempt, r.state) for r in store.history("bad"))
        assert attempts == [(n, RunState.FAILED) for n in (1, 2, 3)]
    finally:
        for node in nodes:
            node.shutdown(wait=False)


@given(
    attempt=st.integers(1, 60),
    share=st.floats(0.5, 1.0),
    backoff=st.integers(1, 10_000),
    cap=st.integers(1, 100_000),
)
def test_backoff_doubles_and_the_cap_applies_after_the_jitter(
    attempt: int, share: float, backoff: int, cap: int
) -> None:
    retry = Retry(
        attempt + 1,
        backoff=timedelta(milliseconds=backoff),
        max_backoff=timedelta(milliseconds=max(cap, backoff)),
    )
    delay = retry.delay(attempt, share)
    raw = timedelta(milliseconds=backoff) * min(2 ** (attempt - 1), 2**40) * share
    assert delay <= retry.max_backoff
    assert abs(delay - min(raw, retry.max_backoff)) <= timedelta(milliseconds=1)


def test_the_jitter_stays_within_half_and_the_whole() -> None:
    retries = Retries(random.Random(7))
    retry = Retry(10, backoff=timedelta(seconds=8), max_backoff=timedelta(hours=1))
    failed = Execution(
        "j", "r", T0, T0, ended=T0, event=Event.FAILED, reason="exit code 1", trigger="schedule"
    )
    definition = Job("j", command="true", start=T0, interval="1 hour", retry=retry)
    for _ in range(200):
        when, trigger = retries.next_try(definition, failed, 2, T0) or (None, None)
        assert when is not None and trigger is not None
        assert timedelta(seconds=8) <= when - T0 <= timedelta(seconds=16)
        assert trigger == "retry" and trigger.attempt == 3 and trigger.slot == T0
