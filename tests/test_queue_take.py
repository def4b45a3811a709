"""The queue's take: rows taken only for a free worker (priority, then age), and rows whose
arguments no run can be given (poison rows) ending ``not_started`` without holding back the
rows taken with them.

Real schedulers and worker threads on real SQLite files and a real PostgreSQL server, rows
inserted by plain SQL as another program would; the take's decisions on a `FakeClock`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jobscheduler import Job, Scheduler, current_run
from jobscheduler.clock import FakeClock
from jobscheduler.model.event import Event
from jobscheduler.model.execution import Execution, SchedulerResult
from jobscheduler.state import MemoryStateStore, RunState, StateStore
from jobscheduler.state.values import MAX_ARGS_SIZE, MAX_JSON_DEPTH, read_args
from jobscheduler.state.writes import write_run

FAR = datetime(2099, 1, 1, tzinfo=UTC)  # a schedule that never comes during a test
SEEN: dict[str, list[Any]] = {}
GATES: dict[str, threading.Event] = {}
_lock = threading.Lock()


def note(key: str) -> None:
    """An internal job: notes its arguments, its start (monotonic) and its run id under
    `key`, then waits for the key's gate if it has one (bounded)."""
    run = current_run()
    assert run is not None
    with _lock:
        SEEN.setdefault(key, []).append(
            (dict(run.args) if run.args is not None else None, time.monotonic(), run.run_id)
        )
        gate = GATES.get(key)
    if gate is not None:
        gate.wait(60)


def job(name: str, **options: Any) -> Job:
    return Job(
        name,
        type="internal",
        command=f"{__name__}:note",
        start=FAR,
        interval="1 day",
        args={"key": name},
        **options,
    )


def wait_until(check: Callable[[], bool], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def nested(depth: int) -> str:
    """JSON text of an object whose one value nests `depth` lists deep."""
    return '{"a": ' + "[" * depth + "]" * depth + "}"


@pytest.fixture
def gates() -> Iterator[dict[str, threading.Event]]:
    """`GATES`, every gate set after the test (no run stays held) and then forgotten."""
    yield GATES
    for gate in GATES.values():
        gate.set()
    GATES.clear()


# -- poison rows ------------------------------------------------------------------------------


def _url_and_insert(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[str, Callable[[list[tuple[str, str | None, int]]], None]]:
    """A store URL and a plain SQL insert of queue rows (job, args text, priority) into it,
    as another program would write them."""
    sql = "INSERT INTO jobscheduler_queue (job, args, priority) VALUES ({p}, {p}, {p})"
    if engine == "sqlite":
        path = tmp_path / "state.db"

        def insert_sqlite(rows: list[tuple[str, str | None, int]]) -> None:
            with sqlite3.connect(path) as db:
                db.executemany(sql.format(p="?"), rows)
            db.close()

        return f"sqlite:///{path}", insert_sqlite
    import psycopg

    url = request.getfixturevalue("pg_server").fresh_schema_url()

    def insert_pg(rows: list[tuple[str, str | None, int]]) -> None:
        with psycopg.connect(url, autocommit=True) as db:
            db.cursor().executemany(sql.format(p="%s"), rows)

    return url, insert_pg


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_poison_row_ends_not_started_and_the_rows_taken_with_it_run(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    url, insert = _url_and_insert(engine, tmp_path, request)
    sched = Scheduler(state=url, node="n1", max_workers=8)  # all 8 rows in one take
    sched.add_job(job("p-batch"))
    store = sched.state_store
    good = [(json.dumps({"i": i}), 0) for i in range(5)]
    bad = {
        "deep": nested(2000),  # past the decoder's own recursion bound
        "not-json": "{day: mon",
        "large": json.dumps({"blob": "x" * MAX_ARGS_SIZE}),
    }
    rows = [*good[:2], (bad["deep"], 0), *good[2:4], (bad["not-json"], 0), *good[4:]]
    rows.append((bad["large"], 0))
    insert([("p-batch", args, priority) for args, priority in rows])
    sched.start()
    try:
        wait_until(lambda: all(r.state not in ("pending", "running") for r in store.queue()))
        final = sorted(store.queue(), key=lambda r: r.id)
        assert [r.state for r in final] == [
            "succeeded", "succeeded", "not_started", "succeeded", "succeeded", "not_started",
            "succeeded", "not_started",
        ]  # fmt: skip
        reasons = [r.reason for r in final if r.state == "not_started"]
        assert (
            reasons[0]
            == f"bad arguments: the arguments are nested deeper than {MAX_JSON_DEPTH} levels"
        )
        assert reasons[1] is not None and reasons[1].startswith(
            "bad arguments: the arguments are not valid JSON: "
        )
        assert reasons[2] == f"bad arguments: the arguments are larger than {MAX_ARGS_SIZE} bytes"
        assert all(r.run_id is None for r in final if r.state == "not_started")
        seen = SEEN.pop("p-batch")
        assert sorted(args["i"] for args, _, _ in seen) == list(range(5))
        assert {r.run_id for r in final if r.state == "succeeded"} == {rid for *_, rid in seen}
        # Claimed with the take, a poison row claims no run: one record per run that ran.
        wait_until(lambda: len(store.history("p-batch")) == 5)
        assert {r.run_id for r in store.history("p-batch")} == {rid for *_, rid in seen}
        # Listing the rows never fails on them either: the bad rows show no args.
        assert [r.args for r in final if r.state == "not_started"] == [None, None, None]
    finally:
        sched.shutdown()


def test_read_args_refuses_what_no_run_can_be_given() -> None:
    assert read_args(None) is None and read_args("") is None and read_args("null") is None
    assert read_args('{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}
    assert read_args("[1, 2]") == {"value": [1, 2]}  # JSON, not an object: kept as a value
    assert read_args(nested(MAX_JSON_DEPTH - 1)) is not None  # 64 levels with the object
    with pytest.raises(ValueError, match="nested deeper than 64"):
        read_args(nested(MAX_JSON_DEPTH))
    with pytest.raises(ValueError, match="nested deeper than 64"):
        read_args(nested(30_000))  # within the size bound
    with pytest.raises(ValueError, match="not valid JSON"):
        read_args(b"\xff\xfe")
    with pytest.raises(ValueError, match="no JSON text but a int"):
        read_args(5)  # SQLite keeps an integer written into the text column
    with pytest.raises(ValueError, match="larger than"):
        read_args('"' + "é" * (MAX_ARGS_SIZE // 2) + '"')  # bytes counted, not characters


def test_a_submit_refuses_args_no_run_could_be_given(store: StateStore) -> None:
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(MAX_JSON_DEPTH):
        inner["a"] = {}
        inner = inner["a"]
    with pytest.raises(ValueError, match="nested deeper than 64"):
        store.submit("j", deep)
    with pytest.raises(ValueError, match="larger than"):
        store.submit("j", {"blob": "x" * MAX_ARGS_SIZE})
    assert store.queue() == []


# -- rows taken only for a free worker ------------------------------------------------------------


def test_a_later_higher_priority_submit_runs_first_when_the_worker_frees_up(
    store: StateStore, gates: dict[str, threading.Event]
) -> None:
    gates["p-busy"] = threading.Event()
    sched = Scheduler(state=store, node="n1", max_workers=1)
    sched.add_job(job("p-busy"))
    sched.add_job(job("p-order"))
    sched.start()
    try:
        busy = sched.submit("p-busy")
        wait_until(lambda: "p-busy" in SEEN)  # the one worker is busy
        low = sched.submit("p-order", {"p": 1}, priority=1)
        time.sleep(0.05)
        high = sched.submit("p-order", {"p": 10}, priority=10)
        time.sleep(0.2)  # a few rounds of the consumer: neither row is taken
        states = {r.id: r.state for r in store.queue()}
        assert (states[busy], states[low], states[high]) == ("running", "pending", "pending")
        gates["p-busy"].set()
        wait_until(lambda: len(SEEN.get("p-order", [])) == 2)
        assert [args["p"] for args, _, _ in sorted(SEEN["p-order"], key=lambda s: s[1])] == [
            10,
            1,
        ]
    finally:
        sched.shutdown()
        SEEN.pop("p-busy", None)
        SEEN.pop("p-order", None)


class TakeLog(MemoryStateStore):
    """Notes the limit of every take, and what it took."""

    def __init__(self) -> None:
        super().__init__()
        self.takes: list[tuple[int, int]] = []  # (limit, rows taken)

    def take(self, node: str, **kwargs: Any) -> Any:
        rows = super().take(node, **kwargs)
        self.takes.append((kwargs["limit"], len(rows)))
        return rows


def test_the_take_asks_for_the_free_workers_in_one_batch(
    gates: dict[str, threading.Event],
) -> None:
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    store = TakeLog()
    sched = Scheduler(state=store, clock=clock, node="n1", max_workers=3)
    sched.add_job(job("p-many"))
    sched.add_job(job("p-one", max_instances=1))
    gates["p-many"] = threading.Event()
    gates["p-one"] = threading.Event()
    ids = [store.submit("p-many", {"n": n}) for n in range(5)]
    one = [store.submit("p-one", {"n": n}, priority=100) for n in range(2)]
    sched.start()
    try:
        # Three workers free: one take of 3 rows: the job of max_instances 1 gets one, its
        # second row is left pending (not held here as ``running``), then the other rows.
        wait_until(lambda: len(SEEN.get("p-many", [])) == 2 and "p-one" in SEEN)
        assert store.takes[0] == (3, 3)
        states = [r.state for r in sorted(store.queue(), key=lambda r: r.id)]
        of_many, of_one = states[:5], states[5:]
        assert of_many == ["running", "running", "pending", "pending", "pending"]
        assert of_one == ["running", "pending"]
        # Every worker busy: the poll finds rows pending, and takes nothing.
        takes = len(store.takes)
        for _ in range(3):
            clock.advance(1.0)
            time.sleep(0.05)
        assert len(store.takes) == takes
        # One run ends: one worker free, one row taken.
        gates["p-one"].set()
        wait_until(lambda: len(SEEN["p-one"]) == 2)
        assert store.takes[takes] == (1, 1)
        gates["p-many"].set()
        wait_until(lambda: all(r.state == "succeeded" for r in store.queue()))
        assert {r.id for r in store.queue()} == set(ids + one)
    finally:
        sched.shutdown()
        SEEN.pop("p-many", None)
        SEEN.pop("p-one", None)


def test_the_end_of_any_run_takes_the_rows_left_for_want_of_a_worker(
    gates: dict[str, threading.Event],
) -> None:
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    store = TakeLog()
    sched = Scheduler(state=store, clock=clock, node="n1", max_workers=1)
    sched.add_job(job("p-sched"))
    sched.add_job(job("p-row"))
    gates["p-sched"] = threading.Event()
    sched.start()
    try:
        sched.run_now("p-sched")  # not a submitted run: it holds the one worker
        wait_until(lambda: "p-sched" in SEEN)
        queue_id = sched.submit("p-row", {"n": 1})
        time.sleep(0.2)
        assert [r.state for r in store.queue()] == ["pending"]
        takes = len(store.takes)
        gates["p-sched"].set()  # the worker frees up; the clock stands still: no poll comes
        wait_until(lambda: "p-row" in SEEN)
        assert store.takes[takes] == (1, 1)
        wait_until(lambda: [r.state for r in store.queue()] == ["succeeded"])
        assert store.queue()[0].id == queue_id
    finally:
        sched.shutdown()
        SEEN.pop("p-sched", None)
        SEEN.pop("p-row", None)


def test_a_take_over_puts_the_rows_of_rerun_jobs_back_in_the_queue(store: StateStore) -> None:
    again = store.submit("again", {"day": "mon"}, priority=7)
    lost = store.submit("lost", {"day": "tue"}, priority=3)
    waiting = store.submit("again", {"day": "wed"})
    taken = store.take("dead", jobs=["again", "lost"], limit=2)
    assert {r.id for r in taken} == {again, lost}
    now = datetime.now(UTC)
    assert store.claim("again", None, "submit", "run-1", node="dead", started=now)
    store.take_over("dead", by="n2", requeue=["again"])
    rows = {r.id: r for r in store.queue()}
    assert (rows[again].state, rows[again].node, rows[again].attempt) == ("pending", None, 2)
    assert (rows[lost].state, rows[lost].attempt) == ("failed", 1)
    assert (rows[waiting].state, rows[waiting].attempt) == ("pending", 1)
    # Its place kept: its priority (and age) first.
    [first] = store.take("n2", jobs=["again"], limit=1)
    assert (first.id, first.args, first.priority, first.attempt) == (again, {"day": "mon"}, 7, 2)
    assert first.state == "running" and first.node == "n2"
    # The lost node's finish of its run, after the take-over (a node that was cut off), is
    # refused, and leaves the row (now n2's) alone; a second take-over changes nothing.
    finished = Execution(
        job_name="again",
        run_id="run-1",
        slot=None,
        started=now,
        ended=now,
        event=Event.SUCCESSFUL,
        result=SchedulerResult.NORMAL,
        trigger="submit",
    )
    for claimed in (True, False):  # the finish posted, or waited for (then a record tried)
        write_run(store, finished, node="dead", settle=again, claimed=claimed)
    assert store.history("again")[0].state is RunState.ABANDONED
    assert store.take_over("dead", by="n3", requeue=["again"]) == []
    row = {r.id: r for r in store.queue()}[again]
    assert (row.state, row.node, row.run_id) == ("running", "n2", None)
