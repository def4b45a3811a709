"""Workers taking a burst's ready runs a batch at a time (`ReadyRuns.take_batch`, the batch
moved whole to the pool's ``claimed`` for every worker): a long run holds back none of the
runs taken with it while another worker is free, a halt ends the batch's runs not started as
it ends the queued ones, a batch keeps the ready runs' order, a take that another worker's
take overtakes still gets the first run left, and `wait_idle` returns as a burst ends."""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import timedelta

from test_processor_support import T0, WAIT, CountingClock, Harness, at, job, settle

from jobscheduler.engine.ready import ReadyRuns
from jobscheduler.engine.timeline import Timeline
from jobscheduler.model.event import Event
from jobscheduler.model.job import Job

QUICK = 100  # a burst: more ready runs than `workers._BURST`


def burst() -> list[Job]:
    """A gated high-priority job and `QUICK` quick ones, all due at T0 + 2 s."""
    return [job("slow", start=2, priority=10), *[job(f"q{i:03d}", start=2) for i in range(QUICK)]]


def started_with_busy_workers(h: Harness, clock: CountingClock, workers: int) -> threading.Event:
    """Start `h`'s processor with `burst()` due while every worker is held by a run of
    "blocker"; returns that job's gate: once set, each worker finds the burst ready."""
    p = h.processor
    blocker = h.gate("blocker")
    p.set_jobs(burst(), T0)
    p.start()
    for _ in range(workers):
        p.run_now(job("blocker", start=3600))
    h.wait_started(workers)
    settle(p, clock)
    clock.advance(timedelta(seconds=2))
    deadline = time.monotonic() + WAIT
    while p.queued_count < QUICK + 1:
        assert time.monotonic() < deadline, p.queued_count
        time.sleep(0.005)
    return blocker


def test_a_long_run_holds_back_none_of_the_runs_taken_with_it() -> None:
    clock = CountingClock(T0)
    h = Harness(clock, max_workers=2)
    slow = h.gate("slow")
    try:
        started_with_busy_workers(h, clock, 2).set()
        # One worker is held by "slow"; the other runs every quick run, those taken in the
        # same batch as "slow" included.
        h.wait_finished(2 + QUICK)
        quick = sorted(e.job_name for e in h.finished if e.job_name.startswith("q"))
        assert quick == [f"q{i:03d}" for i in range(QUICK)]
        assert {e.event for e in h.finished} == {Event.SUCCESSFUL}
        slow.set()
        h.wait_finished(3 + QUICK)
    finally:
        for gate in h.gates.values():
            gate.set()
        h.processor.shutdown(wait=True)


def test_a_stop_ends_the_runs_of_a_batch_not_started_as_the_queued_ones() -> None:
    clock = CountingClock(T0)
    h = Harness(clock, max_workers=1)
    slow = h.gate("slow")
    p = h.processor
    try:
        started_with_busy_workers(h, clock, 1).set()
        h.wait_started(2)  # the one worker is in "slow", the rest of its batch shared
        assert p._pool.claimed  # (what this test is about)
        p.stop()
        h.wait_finished(1 + QUICK)  # the blocker, and every quick run at once: not started
        quick = [e for e in h.finished if e.job_name.startswith("q")]
        assert "slow" not in {e.job_name for e in h.finished}  # still running meanwhile
        assert h.names() == ["blocker", "slow"]
        assert len({e.run_id for e in quick}) == QUICK  # one report each
        assert {(e.event, e.reason) for e in quick} == {(Event.NOT_STARTED, "scheduler stopped")}
        slow.set()
        h.wait_finished(2 + QUICK)
    finally:
        for gate in h.gates.values():
            gate.set()
        p.shutdown(wait=True)


def test_take_batch_gives_the_order_take_gives() -> None:
    def loaded() -> ReadyRuns:
        timeline = Timeline(iter(f"id-{n}" for n in itertools.count()))
        jobs = [job(f"j{i}", start=1, priority=i % 3) for i in range(10)]
        timeline.put(jobs, T0)
        timeline.due(at(1))
        return timeline.ready

    one_by_one = loaded()
    taken = []
    while (run := one_by_one.take()) is not None:
        taken.append((run.job_name, run.run_id))
    batched = loaded()
    runs = batched.take_batch(4) + batched.take_batch(100)
    assert [(run.job_name, run.run_id) for run in runs] == taken
    assert batched.take_batch(5) == [] and len(batched) == 0
    assert all(run.state.act is not None and run.run_id in run.state.act.runs for run in runs)


def test_wait_idle_returns_once_a_burst_has_ended() -> None:
    """The last worker to go idle wakes a `wait_idle` that found it still looking for a run:
    a burst's end is not left to the wait's timeout."""
    from jobscheduler.clock import SystemClock
    from jobscheduler.engine.processor import JobProcessor
    from jobscheduler.model.execution import Execution, SchedulerResult
    from jobscheduler.runners.context import RunContext

    clock = SystemClock()
    done: list[str] = []

    def execute(job: Job, ctx: RunContext) -> Execution:
        now = clock.now()
        return Execution(
            job.name, ctx.run_id, ctx.slot, now, ended=now, event=Event.SUCCESSFUL,
            result=SchedulerResult.NORMAL, trigger=ctx.trigger,
        )  # fmt: skip

    def finished(job: Job, execution: Execution) -> None:
        done.append(execution.run_id)

    p = JobProcessor(execute, finished, clock=clock)
    jobs = [job(f"b{i:04d}", start=3600) for i in range(1000)]
    try:
        p.start()
        for round_ in range(10):
            for j in jobs:
                p.run_now(j)
            started = time.monotonic()
            assert p.wait_idle(WAIT)
            assert len(done) == 1000 * (round_ + 1)
            # Far below the wait's timeout: woken when the burst ended, not by the timeout.
            assert time.monotonic() - started < WAIT / 2, round_
    finally:
        p.shutdown(wait=True)


class _Overtaken(deque[int]):
    """A lane whose next `popleft` first lets another worker take a run (`other`), as a
    worker thread may between deciding to pop the lane and popping it."""

    other: Callable[[], object] | None = None

    def popleft(self) -> int:
        other, self.other = self.other, None
        if other is not None:
            other()
        return super().popleft()


def test_a_take_overtaken_by_another_still_gets_the_lowest_key_left() -> None:
    timeline = Timeline(iter(f"id-{n}" for n in itertools.count()))
    jobs = [job(f"j{i}", start=1, priority=i) for i in range(3)]
    timeline.put(jobs, T0)
    timeline.due(at(1))
    ready = timeline.ready
    # j2, j1 in the lane (pushed in increasing key order) and j0 on the heap, so that a take
    # that compares the heads first, then pops, can lose the lane's head to another take.
    keys = sorted([*ready.lane, *ready.heap])
    ready.heap[:] = [keys[1]]
    lane = _Overtaken([keys[0], keys[2]])
    ready.lane = lane
    others: list[str] = []
    lane.other = lambda: others.append(ready.take().job_name)  # type: ignore[union-attr]

    first = ready.take()
    assert first is not None and others == ["j2"]
    assert first.job_name == "j1"  # not j0, while j1 (higher priority) was left behind
    last = ready.take()
    assert last is not None and last.job_name == "j0" and ready.take() is None
