"""What only `MemoryStateStore` promises: which record goes first, and its memory bound.

The contract every store keeps is tested in ``test_state_store.py``.
"""

from __future__ import annotations

import gc
import sys
import threading
import tracemalloc
from dataclasses import fields
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobscheduler.state import MemoryStateStore, RunRecord, RunState
from jobscheduler.state.memoryrow import FIELDS, Row

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def add(store: MemoryStateStore, run_id: str, job: str, seconds: float = 0, tail: str = "") -> bool:
    """Record a finished run of `job` outside the schedule, started `seconds` after T0."""
    started = T0 + timedelta(seconds=seconds)
    return store.record(
        job,
        None,
        "run_now",
        run_id,
        node="n",
        state=RunState.SUCCEEDED,
        started=started,
        ended=started,
        output_tail=tail,
    )


def kept(store: MemoryStateStore, job: str | None = None) -> list[str]:
    return [r.run_id for r in store.history(job, limit=10**6)]


def test_a_busy_job_does_not_push_a_quiet_jobs_last_runs_out() -> None:
    store = MemoryStateStore(10)
    add(store, "quiet-1", "quiet", 0)
    add(store, "quiet-2", "quiet", 1)
    for n in range(1000):
        add(store, f"busy-{n}", "busy", 2 + n)
    assert kept(store, "quiet") == ["quiet-2", "quiet-1"]
    assert kept(store, "busy") == [f"busy-{n}" for n in range(999, 991, -1)]
    assert len(store) == 10


def test_the_job_holding_most_gives_up_its_oldest() -> None:
    store = MemoryStateStore(6)
    for n in range(4):
        add(store, f"a{n}", "a", n)
    add(store, "b0", "b", 10)
    add(store, "c0", "c", 11)
    add(store, "b1", "b", 12)  # 7 records: a holds most, its oldest goes
    assert kept(store, "a") == ["a3", "a2", "a1"]
    add(store, "b2", "b", 13)  # a and b hold 3 each: a reached 3 first
    assert kept(store, "a") == ["a3", "a2"]
    assert kept(store, "b") == ["b2", "b1", "b0"]
    assert kept(store, "c") == ["c0"]


def test_per_job_bound() -> None:
    store = MemoryStateStore(100, per_job=3)
    for n in range(10):
        add(store, f"a{n}", "a", n)
    add(store, "b0", "b", 20)
    assert kept(store, "a") == ["a9", "a8", "a7"]
    assert kept(store) == ["b0", "a9", "a8", "a7"]
    assert store.per_job == 3 and store.limit == 100


def test_a_forgotten_key_is_free_again() -> None:
    """Documented: the store remembers the keys of the records it keeps, no more."""
    store = MemoryStateStore(1)
    slot = T0 + timedelta(minutes=1)
    assert store.claim("j", slot, "schedule", "1", node="n", started=slot)
    assert store.finish("1", state=RunState.SUCCEEDED, ended=T0)
    assert not store.claim("j", slot, "schedule", "2", node="n", started=slot)
    add(store, "3", "k", 70)  # pushes run 1 out
    assert store.claim("j", slot, "schedule", "2", node="n", started=slot)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"limit": 0}, "limit must be a whole number >= 1, not 0"),
        ({"limit": True}, "limit"),
        ({"per_job": 0}, "per_job must be a whole number >= 1"),
        ({"output_limit": -1}, "output_limit must be a whole number >= 0"),
        ({"output_limit": 1.5}, "output_limit"),
    ],
)
def test_bad_bounds_are_refused(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MemoryStateStore(**arguments)  # type: ignore[arg-type]


def test_output_limit_zero_keeps_no_output() -> None:
    store = MemoryStateStore(output_limit=0)
    add(store, "1", "j", tail="some output")
    assert store.history()[0].output_tail == ""


def test_memory_does_not_grow_with_history() -> None:
    """10 times the runs (over 10,000 jobs, each with 4 KB of output) keep the same memory."""

    def fill(store: MemoryStateStore, runs: int, offset: int) -> None:
        for n in range(offset, offset + runs):
            tail = f"{n:08d}" + "x" * 8000  # a string of its own each, cut to 4,096 by the store
            add(store, f"r{n}", f"job-{n % 10_000}", n, tail)

    store = MemoryStateStore(1000, output_limit=4096)
    tracemalloc.start()
    try:
        fill(store, 2_000, 0)
        gc.collect()
        after_first, _ = tracemalloc.get_traced_memory()
        fill(store, 20_000, 2_000)
        gc.collect()
        after_more, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(store) == 1000
    # 1,000 records of ~4.5 KB each (the tail, the record, its run id and job name).
    assert 4_096_000 < after_first < 6_000_000, after_first
    assert after_more < after_first * 1.1, (after_first, after_more)


# -- a model of the eviction rule, checked against the store on random sequences ---------------


class Model:
    """The rule written plainly: over the bound, the job holding the most records loses its
    oldest; among equals, the one that came to hold that many first."""

    def __init__(self, limit: int, per_job: int) -> None:
        self.limit, self.per_job = limit, per_job
        self.records: dict[str, list[str]] = {}
        self.since: dict[str, int] = {}  # when each job came to hold its current count
        self.clock = 0

    def _changed(self, job: str) -> None:
        self.clock += 1
        self.since[job] = self.clock

    def add(self, job: str, run_id: str) -> None:
        self.records.setdefault(job, []).append(run_id)
        self._changed(job)
        if len(self.records[job]) > self.per_job:
            self._drop(job)
        if sum(len(ids) for ids in self.records.values()) > self.limit:
            most = max(len(ids) for ids in self.records.values())
            largest = [j for j, ids in self.records.items() if len(ids) == most]
            job = min(largest, key=lambda j: self.since[j])
            self._drop(job)

    def _drop(self, job: str) -> None:
        self.records[job].pop(0)
        self._changed(job)
        if not self.records[job]:
            del self.records[job]


@settings(max_examples=200, deadline=None)
@given(
    limit=st.integers(1, 8),
    per_job=st.integers(1, 8),
    jobs=st.lists(st.sampled_from("abcde"), max_size=60),
)
def test_eviction_follows_the_rule(limit: int, per_job: int, jobs: list[str]) -> None:
    store = MemoryStateStore(limit, per_job=per_job)
    model = Model(limit, per_job)
    for n, job in enumerate(jobs):
        assert add(store, str(n), job, n)
        model.add(job, str(n))
        for name in "abcde":
            assert kept(store, name) == list(reversed(model.records.get(name, [])))
    total = sum(len(ids) for ids in model.records.values())
    assert len(store) == total <= limit


def test_the_memory_stores_clock_is_the_one_given() -> None:
    from jobscheduler.clock import FakeClock
    from jobscheduler.state import NodeInfo

    clock = FakeClock(T0)
    store = MemoryStateStore(clock=clock)
    assert store.now() == T0
    lease = timedelta(seconds=30)
    store.join(NodeInfo(name="a", host="h", pid=1, process_started=0.0, started=T0), lease=lease)
    clock.advance(30)
    assert store.heartbeat("a", lease=lease)  # a lease ends after its length, not at it
    clock.advance(31)
    assert [n.name for n in store.expired_nodes(lease=lease)] == ["a"]
    assert not store.heartbeat("a", lease=lease)


def test_the_queue_ages_a_waiting_row_past_newer_higher_ones() -> None:
    from jobscheduler.clock import FakeClock

    clock = FakeClock(T0)
    store = MemoryStateStore(clock=clock)
    old = store.submit("j", priority=0)
    clock.advance(10 * 60)  # ten minutes waited: ten points
    high = store.submit("j", priority=9)
    higher = store.submit("j", priority=11)
    taken = store.take("n", jobs={"j"}, limit=3)
    assert [r.id for r in taken] == [higher, old, high]


def test_lock_free_claims_race_with_every_walk_of_the_runs() -> None:
    """`claim` takes no lock: claims and records of the same slots from several threads,
    while other threads read the history, prune and ask for kills (each walks the kept runs
    while claims add to them), with the GIL switching threads as often as it can. Each key is
    won once (the bound keeps every record: a forgotten key may be claimed again), and
    nothing raises."""
    slots, threads = 400, 6
    store = MemoryStateStore(limit=slots)
    won: list[list[int]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []
    stop = threading.Event()
    barrier = threading.Barrier(threads + 2)

    def contender(n: int) -> None:
        barrier.wait()
        for k in range(slots):
            slot = T0 + timedelta(minutes=k)
            run_id = f"{n}-{k}"
            if n % 2:
                # Left running: a finish would wait for the lock, and the claims are to
                # land while a walker holds it.
                if store.claim("j", slot, "schedule", run_id, node="n", started=slot):
                    won[n].append(k)
            elif store.record(
                "j",
                slot,
                "schedule",
                run_id,
                node="n",
                state=RunState.SUCCEEDED,
                started=slot,
                ended=slot,
            ):
                won[n].append(k)

    def walker(n: int) -> None:
        barrier.wait()
        try:
            while not stop.is_set():
                if n:
                    assert len(store.history(limit=10**6)) <= slots
                    store.request_kill(job="nobody")
                else:
                    assert store.prune(older_than=T0, keep_per_job=slots) == 0
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        workers = [threading.Thread(target=contender, args=(n,)) for n in range(threads)]
        walkers = [threading.Thread(target=walker, args=(n,)) for n in range(2)]
        for thread in [*workers, *walkers]:
            thread.start()
        for worker in workers:
            worker.join()
        stop.set()
        for thread in walkers:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert sorted(k for w in won for k in w) == list(range(slots))
    assert len(store.history(limit=10**6)) == slots


def test_a_claim_landing_in_the_middle_of_a_history_read() -> None:
    """A claim takes no lock, so one may land while `history` walks the runs (here from
    inside the walk itself, deterministically): the walk reads a copy and is not disturbed."""
    store = MemoryStateStore()
    for k in range(3):
        slot = T0 + timedelta(minutes=k)
        assert store.claim("j", slot, "schedule", f"r{k}", node="n", started=slot)

    class Claiming(str):
        """A job name whose comparison claims another run, once."""

        __hash__ = str.__hash__

        def __eq__(self, other: object) -> bool:
            late = T0 + timedelta(hours=1)
            store.claim("j", late, "schedule", "late", node="n", started=late)  # one run: one key
            return str.__eq__(self, other)

    assert [r.run_id for r in store.history(Claiming("j"))] == ["r2", "r1", "r0"]
    assert [r.run_id for r in store.history("j")] == ["late", "r2", "r1", "r0"]


def test_a_row_holds_a_run_records_fields() -> None:
    """The memory store's `Row` has `RunRecord`'s fields in its order, reads and writes them
    by name too, and its record is a copy."""
    assert tuple(f.name for f in fields(RunRecord)) == FIELDS
    assert sorted(Row.__slots__) == sorted(FIELDS)
    row = Row("r1", "j", T0, "schedule", 2, "n", T0)
    assert dict(row) == dict(
        run_id="r1", job="j", slot=T0, trigger="schedule", attempt=2, node="n",
        state=RunState.RUNNING, started=T0, ended=None, exit_code=None, reason=None,
        output_tail="", last_slot=None,
    )  # fmt: skip
    record = row.record()
    row["state"] = RunState.ABANDONED
    assert (row.state, row["state"], record.state) == (
        RunState.ABANDONED,
        RunState.ABANDONED,
        RunState.RUNNING,
    )
    assert Row.of(dict(row)).record() == row.record()


def test_finishes_not_waited_for_are_read_back_and_bounded() -> None:
    store = MemoryStateStore(limit=50)
    assert not store.finish("never", state=RunState.SUCCEEDED, ended=T0, wait=False)

    def worker(n: int) -> None:
        for i in range(200):
            run_id = f"r{n}-{i}"
            started = T0 + timedelta(seconds=i)
            assert store.claim("j", None, "run_now", run_id, node="n", started=started)
            assert store.finish(run_id, state=RunState.SUCCEEDED, ended=started, wait=False)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = store.history("j", limit=1000)
    # Every finish posted is written before a read: 50 kept (the bound), none running.
    assert len(records) == len(store) == 50
    assert {r.state for r in records} == {RunState.SUCCEEDED}
    # A finish already written is not written again (the answer of `wait=True`).
    assert not store.finish(records[0].run_id, state=RunState.FAILED, ended=T0)
