"""Claims together (`JobProcessor.batch_claims`): a worker that takes a run while others wait
to start claims up to `workers.BATCH` of them with one ``claim_many`` call (one store
transaction), runs the first and leaves the others, with their answers, to the next workers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import pytest
from test_processor_support import T0, WAIT, Harness, at, job

from jobscheduler.clock import FakeClock
from jobscheduler.engine.workers import BATCH
from jobscheduler.model.event import Event
from jobscheduler.model.execution import Execution
from jobscheduler.model.job import Job
from jobscheduler.runners.context import RunContext


class ManyClaims:
    """A ``claim_many`` that records each batch and answers by job name (default True), or
    raises `error` for the whole batch."""

    def __init__(self, answers: dict[str, bool | Exception] | None = None) -> None:
        self.answers = answers or {}
        self.error: Exception | None = None
        self.batches: list[list[str]] = []
        self.single: list[str] = []
        self.lock = threading.Lock()

    def one(self, job: Job, ctx: RunContext) -> bool:
        with self.lock:
            self.single.append(job.name)
        answer = self.answers.get(job.name, True)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def many(self, runs: Sequence[tuple[Job, RunContext]]) -> list[bool | Exception]:
        with self.lock:
            self.batches.append([job.name for job, _ in runs])
        if self.error is not None:
            raise self.error
        return [self.answers.get(job.name, True) for job, _ in runs]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def _harness(
    clock: FakeClock,
    claims: ManyClaims,
    workers: int = 10,
    execute: Callable[[Job, RunContext], Execution] | None = None,
) -> Harness:
    h = Harness(clock, max_workers=workers, execute=execute, claim=claims.one)
    h.processor.batch_claims(claims.many)
    return h


def test_runs_due_together_are_claimed_in_batches_and_each_runs_once(clock: FakeClock) -> None:
    claims = ManyClaims()
    h = _harness(clock, claims)
    p = h.processor
    jobs = [job(f"j{i:03}", start=1) for i in range(150)]
    p.set_jobs(jobs, T0)
    p.run_due(at(1))
    assert p.drain() == 150
    claimed = [name for batch in claims.batches for name in batch]
    # All but the last run were claimed together, none twice, in batches of at most BATCH.
    assert sorted(claimed + claims.single) == sorted(j.name for j in jobs)
    assert len(claimed) == len(set(claimed)) >= 149
    assert max(len(b) for b in claims.batches) == BATCH
    assert sorted(h.names()) == sorted(j.name for j in jobs)
    assert p.stats.started == 150 and p.stats.claims_refused == 0


def test_a_run_another_node_took_is_dropped_from_the_batch(clock: FakeClock) -> None:
    claims = ManyClaims({"j001": False, "j005": False})
    h = _harness(clock, claims)
    p = h.processor
    p.set_jobs([job(f"j{i:03}", start=1) for i in range(10)], T0)
    p.run_due(at(1))
    p.drain()
    assert sorted(h.names()) == [f"j{i:03}" for i in range(10) if i not in (1, 5)]
    assert all(e.event is Event.SUCCESSFUL for e in h.finished)  # the dropped: no report
    assert p.stats.claims_refused == 2 and p.stats.started == 8
    assert p.running_count == 0


def test_a_failing_store_ends_every_run_of_the_batch_not_started(clock: FakeClock) -> None:
    claims = ManyClaims()
    claims.error = ConnectionError("store away")
    h = _harness(clock, claims)
    p = h.processor
    p.set_jobs([job(f"j{i:03}", start=1) for i in range(5)], T0)
    p.run_due(at(1))
    p.drain()
    assert h.names() == []  # nothing started unrecorded
    assert len(h.finished) == 5
    for execution in h.finished:
        assert execution.event is Event.NOT_STARTED
        assert execution.reason == "claim failed: ConnectionError: store away"
    assert p.stats.started == 0 and p.running_count == 0


def test_one_runs_error_in_the_checks_is_that_runs_answer(clock: FakeClock) -> None:
    claims = ManyClaims({"j002": RuntimeError("fenced")})
    h = _harness(clock, claims)
    p = h.processor
    p.set_jobs([job(f"j{i:03}", start=1) for i in range(4)], T0)
    p.run_due(at(1))
    p.drain()
    assert sorted(h.names()) == ["j000", "j001", "j003"]
    failed = [e for e in h.finished if e.event is Event.NOT_STARTED]
    assert [e.job_name for e in failed] == ["j002"]
    assert failed[0].reason == "claim failed: RuntimeError: fenced"
    assert p.stats.started == 3


def test_a_stop_asked_for_while_runs_wait_claimed_reaches_them(clock: FakeClock) -> None:
    claims = ManyClaims()
    reasons: dict[str, str | None] = {}

    def noting(job: Job, ctx: RunContext) -> Execution:
        reasons[job.name] = ctx.stop_reason  # a runner would not start a stopped run
        return h.execute(job, ctx)  # the harness's: records the run, waits at its gate

    h = Harness(clock, max_workers=1, execute=noting, claim=claims.one)
    h.processor.batch_claims(claims.many)
    p = h.processor
    h.gates["a0"] = threading.Event()
    p.set_jobs([job("a0", start=1)] + [job(f"b{i}", start=1) for i in range(3)], T0)
    p.start()
    try:
        p.run_due(at(1))
        h.wait_started(1)
        # a0 runs (gated); b0..b2 were claimed with it and wait for the only worker.
        assert claims.batches and len(claims.batches[0]) == 4
        assert p.stop_job("b1", "stopped by hand") == 1
        h.gates["a0"].set()
        assert p.wait_idle(WAIT)
    finally:
        p.shutdown(wait=True)
    assert reasons == {"a0": None, "b0": None, "b1": "stopped by hand", "b2": None}
