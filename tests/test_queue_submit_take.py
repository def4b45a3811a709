"""A node's own submit while it has a free worker: its row inserted and taken, its run
claimed, in one transaction (`StateStore.submit_take`), the run handed to a worker by the
submitting thread; the take's choice (priority, then age; limits counted on every node) as a
take right after the insert would make it.

Over every store (the fixture `store`: memory, SQLite, PostgreSQL), real schedulers and worker
threads.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from pg_server import PgServer
from test_queue_take import SEEN, gates, job, wait_until

from jobscheduler import Scheduler
from jobscheduler.state import RunState, StateStore, StoreUnavailableError
from jobscheduler.state.postgres import PostgresStateStore
from jobscheduler.state.values import QueuedRun, TakeClaims

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)

__all__ = ["gates"]  # the fixture, used by name


def claims(*run_ids: str, jobs: tuple[str, ...] = ("plain",)) -> TakeClaims:
    return TakeClaims(jobs=set(jobs), run_ids=list(run_ids), started=NOW)


# -- the store's side ---------------------------------------------------------------------------


def test_a_submit_take_takes_its_own_row_and_claims_its_run(store: StateStore) -> None:
    store.submit("other")  # another job's row, pending: not in the way
    before = store.statements if isinstance(store, PostgresStateStore) else 0
    queue_id, taken = store.submit_take(
        "plain", {"n": 1}, priority=3, node="n1", jobs=["plain"], limit=1, claims=claims("r-1")
    )
    if isinstance(store, PostgresStateStore):  # one statement, in autocommit
        assert store.statements - before == 1
    [row] = taken
    assert (row.id, row.state, row.node, row.run_id, row.args, row.priority) == (
        queue_id,
        "running",
        "n1",
        "r-1",
        {"n": 1},
        3,
    )
    run = store.run("r-1")
    assert run is not None
    assert (run.job, run.state, run.trigger, run.node, run.started) == (
        "plain",
        RunState.RUNNING,
        "submit",
        "n1",
        NOW,
    )
    assert [r.job for r in store.queue(state="pending")] == ["other"]
    # Each row taken once: nobody else finds it.
    assert store.take("n2", jobs=["plain"], limit=5, claims=claims("x", "y", "z", "v", "w")) == []
    assert store.finish("r-1", state=RunState.SUCCEEDED, ended=NOW, settle=queue_id)
    row = {r.id: r for r in store.queue()}[queue_id]
    assert (row.state, row.run_id) == ("succeeded", "r-1")


def test_a_higher_priority_row_pending_is_taken_in_its_place(store: StateStore) -> None:
    high = store.submit("plain", {"n": "high"}, priority=5)
    queue_id, taken = store.submit_take(
        "plain", {"n": "low"}, priority=1, node="n1", jobs=["plain"], limit=1, claims=claims("r-1")
    )
    assert [(r.id, r.run_id) for r in taken] == [(high, "r-1")]
    [pending] = store.queue(state="pending")
    assert (pending.id, pending.args, pending.priority) == (queue_id, {"n": "low"}, 1)
    # An older row of the same priority comes first too (then age); with room for two, both.
    same = store.submit("plain", priority=1)
    newer, taken = store.submit_take(
        "plain", priority=1, node="n1", jobs=["plain"], limit=2, claims=claims("r-2", "r-3")
    )
    assert [r.id for r in taken] == [queue_id, same]
    assert [r.id for r in store.queue(state="pending")] == [newer]


def test_a_submit_take_leaves_rows_of_jobs_it_does_not_take(store: StateStore) -> None:
    queue_id, taken = store.submit_take(
        "elsewhere", node="n1", jobs=["plain"], limit=1, claims=claims("r-1")
    )
    assert taken == []
    assert [r.id for r in store.queue(state="pending")] == [queue_id]
    assert store.run("r-1") is None
    # No room (limit 0): the submit alone.
    queue_id2, taken = store.submit_take("plain", node="n1", jobs=["plain"], limit=0)
    assert taken == []
    assert {r.id for r in store.queue(state="pending")} == {queue_id, queue_id2}


def test_a_submit_take_counts_a_jobs_limit_on_every_node(store: StateStore) -> None:
    """A job at its ``max_instances`` (a row of it taken on another node, its run not started):
    the new row stays pending, as after a take."""
    first = store.submit("solo")
    [row] = store.take("n2", jobs=["solo"], limit=1, limits={"solo": 1})
    assert row.id == first
    queue_id, taken = store.submit_take(
        "solo", node="n1", jobs=["solo"], limit=1, limits={"solo": 1}, claims=claims("r-1")
    )
    assert taken == []
    assert [r.id for r in store.queue(state="pending")] == [queue_id]


def test_a_submit_take_checks_its_values(store: StateStore) -> None:
    with pytest.raises(TypeError):
        store.submit_take("plain", [1], node="n1", jobs=["plain"], limit=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs 2 run ids, not 1"):
        store.submit_take("plain", node="n1", jobs=["plain"], limit=2, claims=claims("r-1"))
    assert store.queue() == []  # nothing inserted


# -- the node's side ----------------------------------------------------------------------------


def _count(store: StateStore, monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    calls: list[Any] = []
    original = getattr(store, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(store, name, counted)
    return calls


def test_a_local_submit_with_a_free_worker_starts_its_run_in_one_transaction(
    store: StateStore, gates: dict[str, threading.Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    gates["st-one"] = threading.Event()
    sched = Scheduler(state=store, node="n1", max_workers=1)
    sched.add_job(job("st-one"))
    sched.start()
    try:
        together = _count(store, monkeypatch, "submit_take")
        submits = _count(store, monkeypatch, "submit")
        queue_id = sched.submit("st-one", {"n": 1})
        # Taken by the submit itself: running, its run claimed, before `submit` returned.
        row = {r.id: r for r in store.queue()}[queue_id]
        assert (row.state, row.node) == ("running", "n1")
        assert row.run_id is not None
        wait_until(lambda: "st-one" in SEEN)
        [(args, _, run_id)] = SEEN["st-one"]
        assert (args, run_id) == ({"n": 1}, row.run_id)
        assert (len(together), submits) == (1, [])  # one transaction, no insert alone
        # The worker is busy: the next submit only inserts its row, pending until it frees.
        second = sched.submit("st-one", {"n": 2})
        assert len(submits) == 1
        assert {r.id: r for r in store.queue()}[second].state == "pending"
        gates["st-one"].set()
        wait_until(lambda: len(SEEN["st-one"]) == 2)
        assert SEEN["st-one"][1][0] == {"n": 2}
        wait_until(lambda: {r.state for r in store.queue()} == {"succeeded"})
        runs = {r.run_id for r in store.history("st-one")}
        assert runs == {r.run_id for r in store.queue()}  # each row ran once, under its run
        assert len(runs) == 2
    finally:
        sched.shutdown()
        SEEN.pop("st-one", None)


def test_a_local_submit_runs_a_higher_priority_row_first(
    store: StateStore, gates: dict[str, threading.Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row of higher priority pending (inserted by another program, not seen by the node
    yet): a submit with a free worker takes that one, and its own waits its turn."""
    monkeypatch.setattr(store, "watch", lambda wake: False)  # the node finds rows by its poll
    gates["st-order"] = threading.Event()
    sched = Scheduler(state=store, node="n1", max_workers=1)
    sched.add_job(job("st-order"))
    sched.queue.poll = 3600.0  # ... which never comes during the test
    sched.start()
    try:
        wait_until(lambda: sched.queue.idle_poll == 7200.0)
        high = store.submit("st-order", {"n": "high"}, priority=9)  # another program's row
        low = sched.submit("st-order", {"n": "low"})
        rows = {r.id: r for r in store.queue()}
        assert (rows[high].state, rows[high].node, rows[low].state) == ("running", "n1", "pending")
        wait_until(lambda: "st-order" in SEEN)
        gates["st-order"].set()
        wait_until(lambda: len(SEEN["st-order"]) == 2)  # the freed worker takes it
        assert [args["n"] for args, _, _ in SEEN["st-order"]] == ["high", "low"]
        wait_until(lambda: {r.state for r in store.queue()} == {"succeeded"})
    finally:
        sched.shutdown()
        SEEN.pop("st-order", None)


def test_a_lost_connection_of_a_submit_taken_at_once_fails_it_then_reconnects(
    pg_server: PgServer,
) -> None:
    """PostgreSQL's one statement runs on a connection of its own: lost, the call fails
    `StoreUnavailableError` (nothing written, nothing retried), and the next connects again."""
    store = PostgresStateStore(pg_server.fresh_schema_url())
    try:

        def submit(run_id: str) -> tuple[int, list[QueuedRun]]:
            return store.submit_take(
                "plain", node="n1", jobs=["plain"], limit=1, claims=claims(run_id)
            )

        first, [row] = submit("r-1")
        assert row.run_id == "r-1"
        pg_server.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND query NOT LIKE '%pg_stat_activity%' "
            "AND backend_type = 'client backend'"
        )
        with pytest.raises(StoreUnavailableError):
            submit("r-2")
        second, [row] = submit("r-3")
        assert row.run_id == "r-3"
        assert sorted(r.id for r in store.queue()) == [first, second]
        assert store.run("r-2") is None
    finally:
        store.close()


def test_a_submit_while_another_is_under_way_only_inserts(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Submits at once (a burst) share the group commit's transactions: only a submit alone
    takes its row in its insert's transaction; the others insert, and the thread takes."""
    inside, go = threading.Event(), threading.Event()
    original = store.submit_take

    def held(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        assert go.wait(60)
        return original(*args, **kwargs)

    monkeypatch.setattr(store, "submit_take", held)
    submits = _count(store, monkeypatch, "submit")
    sched = Scheduler(state=store, node="n1", max_workers=4)
    sched.add_job(job("st-burst"))
    sched.start()
    try:
        first = threading.Thread(target=sched.submit, args=("st-burst", {"n": 1}))
        first.start()
        assert inside.wait(60)
        sched.submit("st-burst", {"n": 2})  # while the first is under way
        assert len(submits) == 1
        go.set()
        first.join(60)
        wait_until(lambda: len(SEEN.get("st-burst", [])) == 2)
        assert sorted(args["n"] for args, _, _ in SEEN["st-burst"]) == [1, 2]
        wait_until(lambda: {r.state for r in store.queue()} == {"succeeded"})
    finally:
        go.set()
        sched.shutdown()
        SEEN.pop("st-burst", None)
