"""Finishes reported per batch: the notice thread's `report_many`, the scheduler's
`_on_finished_many` (records posted together, marks moved in one go), each run still reported
exactly once, in order, with one failing run not costing the others theirs."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from test_processor_support import T0, WAIT, at, job

from jobscheduler import Dependence, Event, FakeClock, Job, JobType
from jobscheduler.clock import Clock
from jobscheduler.engine.processor import JobProcessor
from jobscheduler.model.execution import Execution, SchedulerResult
from jobscheduler.runners.context import RunContext
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import MemoryStateStore, RunState


def eventually(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


class Reports:
    """What a processor reported: each run by run id, and the batch sizes of `many`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: list[str] = []
        self.batches: list[int] = []

    def one(self, job: Job, execution: Execution) -> None:
        with self.lock:
            self.runs.append(execution.run_id)

    def many(self, notices: Sequence[tuple[Job, Execution]]) -> None:
        with self.lock:
            self.batches.append(len(notices))
            self.runs.extend(execution.run_id for _, execution in notices)


def gated_execute(gate: threading.Event, clock: Clock) -> Callable[[Job, RunContext], Execution]:
    def execute(job: Job, ctx: RunContext) -> Execution:
        assert gate.wait(WAIT)
        now = clock.now()
        return Execution(
            job.name, ctx.run_id, ctx.slot, now, ended=now, event=Event.SUCCESSFUL,
            result=SchedulerResult.NORMAL, trigger=ctx.trigger,
        )  # fmt: skip

    return execute


def test_refusals_due_together_reach_on_finished_many_once_each() -> None:
    clock = FakeClock(T0)
    gate = threading.Event()
    reports = Reports()
    p = JobProcessor(
        gated_execute(gate, clock), reports.one, clock=clock, max_workers=1,
        on_finished_many=reports.many,
    )  # fmt: skip
    busy = job("busy", start=3600, max_instances=1)
    try:
        p.start()
        p.run_now(busy)  # holds the one worker and the job's one instance
        eventually(lambda: len(p.executing) == 1)
        for _ in range(20):
            p.run_at(busy, at(1))  # all due at one instant: each refused, "already running"
        clock.advance(timedelta(seconds=1))
        eventually(lambda: len(reports.runs) == 20)
        assert len(set(reports.runs)) == 20  # one report each, none twice
        assert max(reports.batches) > 1  # told per batch, not per run
        gate.set()
        eventually(lambda: len(reports.runs) == 21)
    finally:
        gate.set()
        p.shutdown(wait=True)


def test_a_batch_that_raises_is_logged_and_the_thread_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock(T0)
    gate = threading.Event()
    reports = Reports()
    raised = []

    def many(notices: Sequence[tuple[Job, Execution]]) -> None:
        if not raised:
            raised.append(len(notices))
            raise RuntimeError("boom")
        reports.many(notices)

    p = JobProcessor(
        gated_execute(gate, clock), reports.one, clock=clock, max_workers=1,
        on_finished_many=many,
    )  # fmt: skip
    busy = job("busy", start=3600, max_instances=1)
    try:
        p.start()
        p.run_now(busy)
        eventually(lambda: len(p.executing) == 1)
        with caplog.at_level(logging.ERROR, logger="jobscheduler.processor"):
            for round_ in (1, 2):
                for _ in range(5):
                    p.run_at(busy, at(round_))
                clock.advance(timedelta(seconds=1))
                if round_ == 1:
                    eventually(lambda: bool(raised))
        eventually(lambda: len(reports.runs) == 5)  # the second round, after the failed one
        assert "on_finished for a batch of" in caplog.text
        assert raised == [5]
    finally:
        gate.set()
        p.shutdown(wait=True)


# -- the scheduler's side ------------------------------------------------------------------


def plain(name: str, **fields: Any) -> Job:
    return Job(
        name, type=JobType.INTERNAL, command="builtins:print", start=at(3600),
        interval="60 seconds", timezone="UTC", **fields,
    )  # fmt: skip


def claimed(s: Scheduler, job: Job, slot: datetime, run_id: str) -> Execution:
    """A run of `job` for `slot` claimed in the scheduler's store, and its finished Execution."""
    started = slot + timedelta(seconds=1)
    store = s.state_store
    assert store.claim(job.name, slot, "schedule", run_id, node="n", started=started)
    return Execution(
        job.name, run_id, slot, started, ended=started + timedelta(seconds=1),
        event=Event.SUCCESSFUL, result=SchedulerResult.NORMAL, trigger="schedule",
    )  # fmt: skip


@pytest.fixture
def scheduler() -> Iterator[Scheduler]:
    s = Scheduler(clock=FakeClock(T0), node="n")
    yield s
    s.shutdown(wait=False)


def run_id(n: int) -> str:
    return f"0190d6c4-0000-7000-8000-{n:012x}"


def test_a_batch_records_every_run_and_moves_each_jobs_mark_to_its_latest(
    scheduler: Scheduler,
) -> None:
    a, b = plain("a"), plain("b")
    scheduler.add_jobs([a, b])
    notices = [
        (a, claimed(scheduler, a, at(60), run_id(1))),
        (b, claimed(scheduler, b, at(60), run_id(2))),
        (a, claimed(scheduler, a, at(120), run_id(3))),
    ]
    scheduler._on_finished_many(notices)
    runs = {r.run_id: r.state for r in scheduler.history()}
    assert runs == dict.fromkeys([run_id(1), run_id(2), run_id(3)], RunState.SUCCEEDED)
    scheduler._keeper._marks.flush(scheduler.state_store)
    marks = scheduler.state_store.marks()
    assert {name: mark.last_slot for name, mark in marks.items()} == {"a": at(120), "b": at(60)}


def test_a_run_with_more_than_a_record_goes_alone_in_its_place(scheduler: Scheduler) -> None:
    a, b = plain("a"), plain("b")
    follower = Job(
        "follower", type=JobType.INTERNAL, command="builtins:print", dependence=Dependence("b"),
        timezone="UTC",
    )  # fmt: skip
    scheduler.add_jobs([a, b, follower])
    order: list[str] = []
    record_many = scheduler._keeper.record_many
    record = scheduler._keeper.record

    def spy_many(executions: Sequence[Execution]) -> None:
        order.append("many:" + ",".join(e.job_name for e in executions))
        record_many(executions)

    def spy_one(execution: Execution, settle: int | None = None, **kw: Any) -> bool:
        order.append("one:" + execution.job_name)
        return record(execution, settle, **kw)

    scheduler._keeper.record_many = spy_many  # type: ignore[method-assign]
    scheduler._keeper.record = spy_one  # type: ignore[method-assign]
    scheduler._on_finished_many(
        [
            (a, claimed(scheduler, a, at(60), run_id(1))),
            (b, claimed(scheduler, b, at(60), run_id(2))),  # has a dependent
            (a, claimed(scheduler, a, at(120), run_id(3))),
        ]
    )
    assert order == ["many:a", "one:b", "many:a"]
    processor = scheduler._processor
    started = [r.job_name for r in [*processor.pending, *processor.queued]]  # not started yet
    assert started == ["follower"]
    assert {r.state for r in scheduler.history()} == {RunState.SUCCEEDED}


class FailingFinish(MemoryStateStore):
    """A memory store whose finish of one run id raises (a bug in it, not an outage)."""

    def __init__(self, failing: str) -> None:
        super().__init__()
        self.failing = failing

    def finish(self, run_id: str, **fields: Any) -> bool:  # type: ignore[override]
        if run_id == self.failing:
            raise RuntimeError("finish broke")
        return super().finish(run_id, **fields)


def test_one_record_that_fails_costs_the_batch_nothing_else(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = FailingFinish(run_id(2))
    s = Scheduler(state=store, clock=FakeClock(T0), node="n")
    try:
        a = plain("a")
        s.add_jobs([a])
        notices = [(a, claimed(s, a, at(60 * i), run_id(i))) for i in (1, 2, 3)]
        with caplog.at_level(logging.ERROR):
            s._on_finished_many(notices)
        states = {r.run_id: r.state for r in s.history("a")}
        assert states == {
            run_id(1): RunState.SUCCEEDED,
            run_id(2): RunState.RUNNING,  # its finish failed: logged
            run_id(3): RunState.SUCCEEDED,
        }
        assert f"recording run {run_id(2)}" in caplog.text
        s._keeper._marks.flush(store)
        # Moved for the failed one too, as `record` does.
        assert {name: mark.last_slot for name, mark in store.marks().items()} == {"a": at(180)}
    finally:
        s.shutdown(wait=False)
