"""On-demand runs through the state store's queue (engine/queue.py), over every store.

Real schedulers, real worker threads, real SQLite files and a real PostgreSQL server; the
idle cost is counted on a `FakeClock`.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jobscheduler import Job, Scheduler, current_run
from jobscheduler.clock import FakeClock
from jobscheduler.cluster.queue import IDLE_FACTOR, POLL, JobPausedError, QueueFullError, Submitted
from jobscheduler.errors import UnknownNameError
from jobscheduler.state import Look, MemoryStateStore, RunState, StateStore

FAR = datetime(2099, 1, 1, tzinfo=UTC)  # a schedule that never comes during a test
SEEN: dict[str, list[Any]] = {}
_lock = threading.Lock()
GATE = threading.Event()


def record_args(key: str) -> None:
    """An internal job: notes the run's arguments, trigger and run id under `key`."""
    run = current_run()
    assert run is not None
    with _lock:
        SEEN.setdefault(key, []).append(
            (dict(run.args) if run.args is not None else None, run.trigger, run.run_id)
        )


def hold(key: str) -> None:
    """An internal job: notes that it runs, then waits for `GATE` (bounded)."""
    with _lock:
        SEEN.setdefault(key, []).append(key)
    GATE.wait(30)


def wait_until(check: Callable[[], bool], within: float = 60.0) -> None:
    """Return once `check()` is true; fail after `within` s (reached only on failure)."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def running_in(store: StateStore, job: str) -> bool:
    """Whether `store` holds a running record of `job`: a kill request finds it (a run shows
    in `Scheduler.executing` a moment before its record is written)."""
    return bool(store.history(job, state=RunState.RUNNING))


def job(name: str, fn: str = "record_args", **options: Any) -> Job:
    return Job(
        name,
        type="internal",
        command=f"{__name__}:{fn}",
        start=FAR,
        interval="1 day",
        args={"key": name},
        **options,
    )


@pytest.fixture
def scheduler(store: StateStore) -> Iterator[Scheduler]:
    sched = Scheduler(state=store, max_workers=4)
    yield sched
    GATE.set()
    sched.shutdown(wait=True)
    GATE.clear()


def settled(store: StateStore, queue_id: int) -> str:
    rows = [r for r in store.queue(limit=1000) if r.id == queue_id]
    return rows[0].state


def test_a_submitted_run_sees_its_args_and_settles_its_row(
    scheduler: Scheduler, store: StateStore
) -> None:
    scheduler.add_job(job("q-args"))
    scheduler.start()
    queue_id = scheduler.submit("q-args", {"day": "mon", "n": 3})
    wait_until(lambda: settled(store, queue_id) == "succeeded")
    [(args, trigger, run_id)] = SEEN.pop("q-args")
    assert args == {"day": "mon", "n": 3}
    assert trigger == "submit"
    [row] = [r for r in store.queue() if r.id == queue_id]
    assert row.run_id == run_id and row.node == scheduler.node
    [record] = scheduler.history("q-args")
    assert record.run_id == run_id and record.trigger == "submit" and record.slot is None


def test_an_external_run_gets_jobscheduler_args(scheduler: Scheduler, store: StateStore) -> None:
    code = "import os; print(os.environ['JOBSCHEDULER_ARGS'], os.environ['JOBSCHEDULER_TRIGGER'])"
    scheduler.add_job(
        Job("q-ext", command=[sys.executable, "-c", code], start=FAR, interval="1 day")
    )
    scheduler.start()
    queue_id = scheduler.submit("q-ext", {"x": "é"}, priority=3)
    wait_until(lambda: settled(store, queue_id) == "succeeded")
    [record] = scheduler.history("q-ext")
    assert record.output_tail.strip() == '{"x":"é"} submit'
    assert [r.priority for r in store.queue() if r.id == queue_id] == [3]


def test_refused_submits_change_nothing(scheduler: Scheduler, store: StateStore) -> None:
    scheduler.add_job(job("q-paused", enabled=False))
    scheduler.add_job(job("q-ok"))
    with pytest.raises(JobPausedError, match="paused"):
        scheduler.submit("q-paused")
    with pytest.raises(UnknownNameError):
        scheduler.submit("nope")
    with pytest.raises(TypeError):
        scheduler.submit("q-ok", ["not", "a", "dict"])  # type: ignore[arg-type]
    scheduler.queue.max_pending = 2
    scheduler.submit("q-ok")
    scheduler.submit("q-ok")
    with pytest.raises(QueueFullError, match="full"):
        scheduler.submit("q-ok")
    assert [r.state for r in store.queue()] == ["pending", "pending"]


def test_higher_priority_first_and_max_instances_holds(
    scheduler: Scheduler, store: StateStore
) -> None:
    scheduler.add_job(job("q-one", "hold", max_instances=1))
    low = scheduler.submit("q-one", {"k": "low"}, priority=0)
    high = scheduler.submit("q-one", {"k": "high"}, priority=9)
    third = scheduler.submit("q-one", {"k": "third"}, priority=0)
    scheduler.start()
    wait_until(lambda: len(SEEN.get("q-one", [])) == 1)
    time.sleep(0.3)  # a second run would have started by now, were max_instances ignored
    assert len(SEEN["q-one"]) == 1
    GATE.set()
    wait_until(lambda: all(settled(store, q) == "succeeded" for q in (low, high, third)))
    SEEN.pop("q-one")
    runs = {r.run_id: r.started for r in scheduler.history("q-one")}
    order = sorted((runs[r.run_id or ""], r.id) for r in store.queue())
    assert [queue_id for _, queue_id in order] == [high, low, third]


def test_a_kill_request_stops_the_run_where_it_runs(
    scheduler: Scheduler, store: StateStore
) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    scheduler.add_job(Job("q-kill", command=sleeper, start=FAR, interval="1 day"))
    scheduler.start()
    queue_id = scheduler.submit("q-kill")
    wait_until(lambda: running_in(store, "q-kill"))
    # Started by a worker, not only claimed with its row (a kill before that: NOT_STARTED).
    wait_until(lambda: any(e.job_name == "q-kill" for e in scheduler.executing))
    assert store.request_kill(job="q-kill") == 1
    scheduler.queue.wake(kills=True)
    wait_until(lambda: settled(store, queue_id) == "failed")
    [record] = scheduler.history("q-kill")
    assert record.reason == "killed" and record.run_id == store.queue()[0].run_id
    assert store.kill_requests(scheduler.node) == []


def test_a_row_inserted_by_another_program_runs(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    sched = Scheduler(state=f"sqlite:///{path}", node="n1")
    sched.queue.poll = 0.05
    sched.add_job(job("q-sql"))
    sched.start()
    try:
        with sqlite3.connect(path) as db:  # the plain insert of docs/operations.md
            db.execute(
                "INSERT INTO jobscheduler_queue (job, args, priority) VALUES (?, ?, 5)",
                ("q-sql", json.dumps({"day": "mon"})),
            )
        wait_until(lambda: [r.state for r in sched.state_store.queue()] == ["succeeded"])
        [(args, trigger, _)] = SEEN.pop("q-sql")
        assert args == {"day": "mon"} and trigger == "submit"
    finally:
        sched.shutdown()


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_two_nodes_on_one_store_run_each_row_once(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    if engine == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.db'}"
    else:
        url = request.getfixturevalue("pg_server").fresh_schema_url()
    nodes = [Scheduler(state=url, node=f"n{i}", max_workers=3) for i in range(2)]
    for sched in nodes:
        sched.queue.poll = 0.02
        sched.add_job(job("q-once"))
        sched.start()
    try:
        ids = [nodes[i % 2].submit("q-once", {"i": i}) for i in range(60)]
        wait_until(lambda: sum(r.state == "succeeded" for r in nodes[0].state_store.queue()) == 60)
        seen = SEEN.pop("q-once")
        assert sorted(args["i"] for args, _, _ in seen) == list(range(60))
        rows = nodes[0].state_store.queue()
        assert len({r.run_id for r in rows}) == 60 and {r.id for r in rows} == set(ids)
        assert len(nodes[0].history("q-once", limit=1000)) == 60
    finally:
        for sched in nodes:
            sched.shutdown()


class CountingStore(MemoryStateStore):
    """Counts the queries the queue consumer makes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def look(self, node: str, **kwargs: Any) -> Look:
        self.calls.append("look")
        return super().look(node, **kwargs)

    def take(self, node: str, **kwargs: Any) -> Any:
        self.calls.append("take")
        return super().take(node, **kwargs)

    def kill_requests(self, node: str) -> list[tuple[int, str, str | None]]:
        self.calls.append("kill_requests")
        return super().kill_requests(node)


def test_an_idle_node_makes_one_query_per_idle_poll() -> None:
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    store = CountingStore()
    sched = Scheduler(state=store, clock=clock)
    sched.add_job(job("q-idle"))
    sched.start()
    idle = POLL * IDLE_FACTOR
    assert sched.queue.idle_poll == idle == 2.0
    try:
        wait_until(lambda: store.calls == ["look", "take"])  # at start: a look, and a take
        for n in range(1, 6):
            clock.advance(idle - 0.5)
            time.sleep(0.05)
            assert len(store.calls) == n + 1  # before the idle poll: no query
            clock.advance(0.5)
            wait_until(lambda n=n: len(store.calls) == n + 2)
        # Nothing pending, no kill request: one look each time, nothing else.
        assert store.calls[2:] == ["look"] * 5
        store.submit("q-idle", {"n": 1})  # inserted by another program: no wake-up
        clock.advance(idle)
        wait_until(lambda: SEEN.get("q-idle") is not None)
        assert store.calls[7:9] == ["look", "take"]  # the look found it: taken
        assert [args for args, _, _ in SEEN.pop("q-idle")] == [{"n": 1}]
    finally:
        sched.shutdown()


def test_a_node_with_runs_looks_every_poll_and_follows_kill_requests() -> None:
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    store = CountingStore()
    sched = Scheduler(state=store, clock=clock, max_workers=2)
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    sched.add_job(Job("q-busy", command=sleeper, start=FAR, interval="1 day"))
    sched.start()
    try:
        sched.submit("q-busy")
        wait_until(lambda: bool(sched.executing))
        looks = store.calls.count("look")
        clock.advance(POLL)  # a run on hand: the busy pace
        wait_until(lambda: store.calls.count("look") == looks + 1)
        [running] = sched.executing
        wait_until(lambda: running_in(store, "q-busy"))
        assert store.request_kill(run_id=running.run_id) == 1  # from another machine
        clock.advance(POLL)
        wait_until(lambda: "kill_requests" in store.calls)
        wait_until(lambda: [r.state for r in store.queue()] == ["failed"])
        assert store.kill_requests(sched.node) == []
    finally:
        sched.shutdown()


def test_submitted_is_the_text_submit() -> None:
    trigger = Submitted(7, {"a": 1})
    assert trigger == "submit" and str(trigger) == "submit" and json.dumps(trigger) == '"submit"'
    assert (trigger.queue_id, trigger.args) == (7, {"a": 1})


def test_a_row_pinned_to_another_host_is_left_alone(store: StateStore) -> None:
    sched = Scheduler(state=store, node="web-7")
    sched.queue.poll = 0.05
    sched.add_job(job("q-host"))
    sched.start()
    try:
        elsewhere = store.submit("q-host", {"n": 1}, host="db-*")
        here = store.submit("q-host", {"n": 2}, host="web-*")
        wait_until(lambda: settled(store, here) == "succeeded")
        time.sleep(0.2)  # a few more polls
        assert settled(store, elsewhere) == "pending"
        assert [args for args, _, _ in SEEN.pop("q-host")] == [{"n": 2}]
    finally:
        sched.shutdown()


def test_a_postgres_node_hears_of_rows_and_kills_from_elsewhere_at_once(
    pg_server: Any,
) -> None:
    from jobscheduler.cluster.queue import WATCHED_IDLE_POLL
    from jobscheduler.state.postgres import PostgresStateStore

    url = pg_server.fresh_schema_url()
    sched = Scheduler(state=url, node="n1", max_workers=2)
    sched.queue.poll = 60.0  # no poll comes during the test: only notifications wake it
    sched.add_job(job("q-heard"))
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    sched.add_job(Job("q-held", command=sleeper, start=FAR, interval="1 day"))
    sched.start()
    other = PostgresStateStore(url)  # another process's store
    try:
        assert sched.queue.idle_poll == max(WATCHED_IDLE_POLL, 120.0)
        other.submit("q-heard", {"n": 1})
        wait_until(lambda: SEEN.get("q-heard") is not None, within=30.0)
        assert [args for args, _, _ in SEEN.pop("q-heard")] == [{"n": 1}]
        other.submit("q-held")
        wait_until(lambda: bool(sched.executing) and running_in(other, "q-held"), within=30.0)
        [running] = sched.executing
        assert other.request_kill(run_id=running.run_id) == 1
        wait_until(lambda: other.queue()[0].state == "failed", within=30.0)
        assert sched.history("q-held")[0].reason == "killed"
    finally:
        other.close()
        sched.shutdown()
