"""The claim seam: `JobProcessor(..., claim=...)` asks, once per run, right before it starts,
whether this node runs it (the state store's claim of a slot, shared by several nodes)."""

from __future__ import annotations

import logging
import threading
from datetime import datetime

import pytest
from test_processor_support import T0, WAIT, Harness, at, job

from jobscheduler.clock import FakeClock
from jobscheduler.model.event import Event
from jobscheduler.model.execution import SchedulerResult
from jobscheduler.model.job import Job
from jobscheduler.runners.context import RunContext


class Claims:
    """A claim function that records what it was asked and answers from `answers` (by job
    name; default True), or raises `error`."""

    def __init__(self, answers: dict[str, bool] | None = None) -> None:
        self.answers = answers or {}
        self.error: Exception | None = None
        self.asked: list[tuple[str, datetime | None, str, int]] = []
        self.threads: list[str] = []

    def __call__(self, job: Job, ctx: RunContext) -> bool:
        self.asked.append((job.name, ctx.slot, ctx.trigger, ctx.run_id))
        self.threads.append(threading.current_thread().name)
        if self.error is not None:
            raise self.error
        return self.answers.get(job.name, True)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def test_a_claim_that_says_yes_lets_every_kind_of_run_go_ahead(clock: FakeClock) -> None:
    claims = Claims()
    h = Harness(clock, claim=claims)
    p = h.processor
    a, b, c = job("a", start=1), job("b", start=500), job("c", start=500)
    p.set_jobs([a, b, c], T0)
    p.run_now(b)
    p.run_at(c, at(0), trigger="dependence")
    p.run_due(at(1))
    assert p.drain() == 3
    assert [(n, s, t) for n, s, t, _ in claims.asked] == [
        ("b", None, "run_now"),
        ("c", None, "dependence"),
        ("a", at(1), "schedule"),
    ]
    # Asked once per run, with the context the runner then gets (the same run id).
    assert [run_id for *_, run_id in claims.asked] == [e.run_id for e in h.finished]
    assert h.events() == [(n, Event.SUCCESSFUL, None) for n in ("b", "c", "a")]
    assert p.stats.claims_refused == 0 and p.stats.started == 3


def test_a_run_another_node_claimed_is_dropped_silently(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    claims = Claims({"taken": False})
    h = Harness(clock, claim=claims)
    p = h.processor
    taken = job("taken", start=1, max_instances=1)
    p.set_jobs([taken, job("mine", start=1)], T0)
    p.run_due(at(1))
    with caplog.at_level(logging.DEBUG, "jobscheduler.processor"):
        assert p.drain() == 2  # two runs taken, one of them dropped
    assert h.names() == ["mine"]  # never executed
    assert h.events() == [("mine", Event.SUCCESSFUL, None)]  # no event, no on_finished
    assert p.stats.claims_refused == 1 and p.stats.started == 1
    assert any(
        r.levelno == logging.DEBUG and "another node" in r.getMessage() for r in caplog.records
    )
    # It no longer counts as running: max_instances=1 lets the next run of the job start.
    assert p.executing == []
    claims.answers["taken"] = True
    p.run_now(taken)
    p.run_due(at(1))
    p.drain()
    assert h.events()[-1] == ("taken", Event.SUCCESSFUL, None)
    assert p.stats.refused == 0  # never NOT_STARTED "already running"
    assert p.wait_idle(WAIT)


def test_a_refused_run_of_an_unregistered_job_leaves_no_state_behind(clock: FakeClock) -> None:
    h = Harness(clock, claim=Claims({"stranger": False}))
    p = h.processor
    p.run_now(job("stranger", start=1))
    p.run_due(at(0))
    p.drain()
    assert h.finished == [] and "stranger" not in p.timeline.states


def test_a_claim_that_raises_ends_the_run_not_started(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    claims = Claims()
    claims.error = ConnectionError("state store unreachable")
    h = Harness(clock, claim=claims)
    p = h.processor
    p.set_jobs([job("a", start=1, every=60)], T0)
    p.run_due(at(1))
    with caplog.at_level(logging.ERROR, "jobscheduler.processor"):
        assert p.drain() == 1
    assert h.started == []  # the runner never saw it
    (execution,) = h.finished
    assert (execution.job_name, execution.slot, execution.trigger) == ("a", at(1), "schedule")
    assert execution.event is Event.NOT_STARTED
    assert execution.result is SchedulerResult.ABNORMAL
    assert execution.reason == "claim failed: ConnectionError: state store unreachable"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and errors[0].name == "jobscheduler.processor"
    assert errors[0].exc_info is not None
    assert p.stats.started == 0 and p.stats.claims_refused == 0
    # The scheduler goes on: the next slot is claimed (and runs) as usual.
    claims.error = None
    p.run_due(at(61))
    p.drain()
    assert h.events()[-1] == ("a", Event.SUCCESSFUL, None)


def test_the_claim_is_asked_by_the_worker_without_the_processors_lock(clock: FakeClock) -> None:
    seen: list[tuple[str, datetime | None]] = []

    def claim(job: Job, ctx: RunContext) -> bool:
        # Views take the processor's lock: this would hang if the lock were held here.
        seen.append((threading.current_thread().name, h.processor.next_run(job.name)))
        return True

    h = Harness(clock, claim=claim)
    p = h.processor
    p.start()
    try:
        p.run_now(job("a", start=1000))
        h.wait_finished(1)
    finally:
        p.shutdown()
    assert [(name.startswith("jobscheduler-worker"), nxt) for name, nxt in seen] == [(True, None)]
    assert h.events() == [("a", Event.SUCCESSFUL, None)]
