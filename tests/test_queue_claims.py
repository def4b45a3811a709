"""A submitted run claimed with its queue row's take: one transaction takes the row and
inserts its run (`TakeClaims`), so the way from a submit to the run's start is two commits
(the row's insert, the take), not three; the worker starts the run under that run id without
claiming it again.

Over every store (the fixture `store`: memory, SQLite, PostgreSQL), real schedulers and
worker threads; the engine's side on a `FakeClock`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from test_processor_support import T0, Harness
from test_processor_support import job as engine_job
from test_queue_take import SEEN, gates, job, wait_until

from jobscheduler import Scheduler
from jobscheduler.clock import FakeClock
from jobscheduler.cluster.queue import Submitted
from jobscheduler.engine.processor import JobProcessor
from jobscheduler.model.event import Event
from jobscheduler.state import RunState, StateStore
from jobscheduler.state.values import TakeClaims

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)

__all__ = ["gates"]  # the fixture, used by name


# -- the store's side ---------------------------------------------------------------------------


def test_a_take_claims_the_runs_of_its_rows_in_its_transaction(store: StateStore) -> None:
    first = store.submit("plain", {"n": 1}, priority=5)
    limited = store.submit("limited", {"n": 2}, priority=4)
    second = store.submit("plain", {"n": 3})
    claims = TakeClaims(jobs={"plain"}, run_ids=["r-1", "r-2", "r-3"], started=NOW)
    taken = store.take("n1", jobs=["plain", "limited"], limit=3, claims=claims)
    # Each row of a job named in `claims` has its run, under the run ids in the take's order.
    assert [(r.id, r.state, r.run_id) for r in taken] == [
        (first, "running", "r-1"),
        (limited, "running", None),  # its worker claims it (under its limit)
        (second, "running", "r-2"),
    ]
    for run_id in ("r-1", "r-2"):
        run = store.run(run_id)
        assert run is not None
        assert (run.job, run.state, run.trigger, run.node, run.slot, run.attempt) == (
            "plain",
            RunState.RUNNING,
            "submit",
            "n1",
            None,
            1,
        )
        assert run.started == NOW
    assert store.run("r-3") is None  # an id left unused claims nothing
    rows = {r.id: r for r in store.queue()}
    assert (rows[first].run_id, rows[limited].run_id) == ("r-1", None)
    # The run's end settles its row with it (as any submitted run's end).
    ended = NOW + timedelta(seconds=1)
    assert store.finish("r-1", state=RunState.SUCCEEDED, ended=ended, settle=first)
    row = {r.id: r for r in store.queue()}[first]
    assert (row.state, row.run_id) == ("succeeded", "r-1")
    # A second take finds nothing: each row taken (and each run claimed) once.
    again = TakeClaims(jobs={"plain"}, run_ids=["r-9"], started=NOW)
    assert store.take("n2", jobs=["plain"], limit=1, claims=again) == []
    assert store.run("r-9") is None


def test_a_take_that_claims_needs_a_run_id_for_each_row(store: StateStore) -> None:
    store.submit("plain")
    few = TakeClaims(jobs={"plain"}, run_ids=["r-1"], started=NOW)
    with pytest.raises(ValueError, match="needs 2 run ids, not 1"):
        store.take("n1", jobs=["plain"], limit=2, claims=few)
    naive = TakeClaims(jobs={"plain"}, run_ids=["r-1"], started=datetime(2030, 1, 1))
    with pytest.raises((ValueError, TypeError)):
        store.take("n1", jobs=["plain"], limit=1, claims=naive)
    assert [r.state for r in store.queue()] == ["pending"]  # nothing taken


def test_a_row_claimed_with_its_take_goes_back_to_the_queue_without_its_lost_run(
    store: StateStore,
) -> None:
    queue_id = store.submit("again", {"day": "mon"}, priority=7)
    claims = TakeClaims(jobs={"again"}, run_ids=["lost-1"], started=NOW)
    [row] = store.take("dead", jobs=["again"], limit=1, claims=claims)
    assert row.run_id == "lost-1"
    store.take_over("dead", by="n2", requeue=["again"])
    lost = store.run("lost-1")
    assert lost is not None and lost.state is RunState.ABANDONED
    back = {r.id: r for r in store.queue()}[queue_id]
    assert (back.state, back.node, back.run_id, back.attempt) == ("pending", None, None, 2)
    # Taken again: a new run, its attempt the row's, its arguments and priority kept.
    claims = TakeClaims(jobs={"again"}, run_ids=["again-2"], started=NOW)
    [row] = store.take("n2", jobs=["again"], limit=1, claims=claims)
    assert (row.id, row.args, row.priority, row.attempt, row.run_id) == (
        queue_id,
        {"day": "mon"},
        7,
        2,
        "again-2",
    )
    run = store.run("again-2")
    assert run is not None and (run.state, run.attempt, run.node) == (RunState.RUNNING, 2, "n2")


def test_the_pending_count_counts_pending_rows_up_to_its_limit(store: StateStore) -> None:
    assert store.pending_count(limit=10) == 0
    ids = [store.submit("plain", {"n": n}) for n in range(4)]
    assert store.pending_count(limit=10) == 4
    assert store.pending_count(limit=3) == 3  # counted no further
    assert store.pending_count(limit=0) == 0
    store.take("n1", jobs=["plain"], limit=1)
    assert store.settle_pending(ids[-1], "not_started", None)
    assert store.pending_count(limit=10) == 2  # one taken, one settled
    with pytest.raises(TypeError):
        store.pending_count(limit="3")  # type: ignore[arg-type]


# -- the scheduler's side -----------------------------------------------------------------------


def _count_claims(store: StateStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Note every claim the store is asked for after the take (by name of the method)."""
    asked: list[str] = []

    def noting(name: str) -> Callable[..., Any]:
        method = getattr(store, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            asked.append(name)
            return method(*args, **kwargs)

        return wrapper

    for name in ("claim", "claim_many", "claim_within", "claim_many_within"):
        monkeypatch.setattr(store, name, noting(name))
    return asked


def test_a_submitted_run_starts_under_the_run_its_take_claimed(
    store: StateStore, gates: dict[str, threading.Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _count_claims(store, monkeypatch)
    gates["c-plain"] = threading.Event()
    sched = Scheduler(state=store, node="n1", max_workers=2)
    sched.add_job(job("c-plain"))
    sched.start()
    try:
        queue_id = sched.submit("c-plain", {"n": 1})
        wait_until(lambda: "c-plain" in SEEN)
        [(args, _, run_id)] = SEEN["c-plain"]
        assert args == {"n": 1}
        # While it runs: its row links to it, and it is the one run record, claimed once.
        row = {r.id: r for r in store.queue()}[queue_id]
        assert (row.state, row.run_id) == ("running", run_id)
        [record] = store.history("c-plain")
        assert (record.run_id, record.state, record.trigger) == (
            run_id,
            RunState.RUNNING,
            "submit",
        )
        assert asked == []  # never claimed again by its worker
        gates["c-plain"].set()
        wait_until(lambda: store.queue()[0].state == "succeeded")
        assert store.queue()[0].run_id == run_id
        wait_until(lambda: store.history("c-plain")[0].state is RunState.SUCCEEDED)
        assert [r.run_id for r in store.history("c-plain")] == [run_id]
    finally:
        sched.shutdown()
        SEEN.pop("c-plain", None)


def test_a_kill_request_before_a_worker_has_the_run_stops_it_before_it_starts(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run claimed with its row's take is ``running`` in the store before the engine has it:
    a kill request that comes then is kept for it, and the run ends NOT_STARTED "killed" when
    a worker binds it, never run and never left ``running``."""
    handed, killed = threading.Event(), threading.Event()
    original = JobProcessor.run_at

    def late_run_at(self: JobProcessor, job: Any, when: Any, trigger: str = "dependence") -> None:
        if job.name != "c-killed":
            original(self, job, when, trigger)
            return

        def later() -> None:  # the engine gets the run only once the kill request is done
            assert killed.wait(30)
            original(self, job, when, trigger)

        handed.set()
        threading.Thread(target=later, daemon=True).start()

    monkeypatch.setattr(JobProcessor, "run_at", late_run_at)
    sched = Scheduler(state=store, node="n1", max_workers=2)
    sched.add_job(job("c-killed"))
    sched.start()
    try:
        queue_id = sched.submit("c-killed")
        assert handed.wait(30)
        [record] = store.history("c-killed")
        assert record.state is RunState.RUNNING  # claimed with the take
        assert store.request_kill(job="c-killed") == 1
        sched.queue.wake(kills=True)
        wait_until(lambda: store.kill_requests("n1") == [])
        killed.set()
        wait_until(lambda: store.history("c-killed")[0].state is not RunState.RUNNING)
        [record] = store.history("c-killed")
        assert (record.state, record.reason) == (RunState.NOT_STARTED, "killed")
        wait_until(lambda: {r.id: r for r in store.queue()}[queue_id].state == "not_started")
        assert "c-killed" not in SEEN  # never ran
    finally:
        killed.set()
        sched.shutdown()
        SEEN.pop("c-killed", None)


def test_a_submitted_run_of_a_job_with_a_limit_is_claimed_by_its_worker(
    store: StateStore, gates: dict[str, threading.Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    gates["c-limited"] = threading.Event()
    sched = Scheduler(state=store, node="n1", max_workers=2)
    sched.add_job(job("c-limited", max_instances=1))
    asked = _count_claims(store, monkeypatch)
    sched.start()
    try:
        queue_id = sched.submit("c-limited")
        wait_until(lambda: "c-limited" in SEEN)
        [(_, _, run_id)] = SEEN["c-limited"]
        # The take claimed nothing for it: its worker claimed it (under the limit, where the
        # store counts the job's runs on every node: `cluster.limits`).
        assert asked != []
        gates["c-limited"].set()
        wait_until(lambda: store.queue()[0].state == "succeeded")
        row = {r.id: r for r in store.queue()}[queue_id]
        assert row.run_id == run_id
        assert [r.run_id for r in store.history("c-limited")] == [run_id]
    finally:
        sched.shutdown()
        SEEN.pop("c-limited", None)


# -- the engine's side --------------------------------------------------------------------------


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def test_a_run_whose_trigger_brings_its_run_id_has_that_id(clock: FakeClock) -> None:
    h = Harness(clock)
    p = h.processor
    p.run_at(engine_job("s", start=500), T0, trigger=Submitted(7, {"a": 1}, 1, "taken-1"))
    p.run_at(engine_job("t", start=500), T0, trigger=Submitted(8, None))  # no run claimed
    p.run_due(T0)
    assert p.drain() == 2
    ids = {e.job_name: e.run_id for e in h.finished}
    assert ids["s"] == "taken-1"
    assert ids["t"] != "taken-1" and ids["t"]


def test_a_run_claimed_with_its_take_that_never_starts_is_reported_under_its_id(
    clock: FakeClock,
) -> None:
    h = Harness(clock)
    p = h.processor
    p.shutdown()
    p.run_at(engine_job("s", start=500), T0, trigger=Submitted(7, None, 1, "taken-2"))
    [execution] = h.finished
    # Its report ends the claim its take made (`write_run` finishes it, its row settled).
    assert (execution.run_id, execution.event, execution.reason) == (
        "taken-2",
        Event.NOT_STARTED,
        "shutdown",
    )
