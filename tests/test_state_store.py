"""The `StateStore` contract, run over every store implementation.

`STORES` (in ``state_stores.py``) lists one factory per implementation: a store joins the
suite with one line there; the fixtures `make_store` and `store` (``conftest.py``) run each
test over every one of them. Each factory takes a directory of its own (for a file-backed
store) and the two bounds every store has (how many finished records it keeps, how many
characters of output each keeps).
What only the memory store promises (which record it drops first) is tested in
``test_state_memory.py``.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest
from state_stores import BOUNDED, MakeStore

from jobscheduler.state import (
    RunRecord,
    RunState,
    StateStore,
    StoreClosedError,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
NODE = "node-a"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def claim(
    store: StateStore,
    job: str,
    slot: datetime | None,
    run_id: str,
    *,
    attempt: int = 1,
    trigger: str | None = None,
    started: datetime | None = None,
) -> bool:
    if trigger is None:
        trigger = "schedule" if slot is not None else "run_now"
    return store.claim(
        job,
        slot,
        trigger,
        run_id,
        node=NODE,
        attempt=attempt,
        started=started if started is not None else (slot or T0),
    )


def final(
    run_id: str,
    job: str = "j",
    *,
    slot: datetime | None = None,
    state: RunState = RunState.SUCCEEDED,
    started: datetime = T0,
    ended: datetime | None = None,
    exit_code: int | None = None,
    reason: str | None = None,
    output_tail: str = "",
    attempt: int = 1,
) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        job=job,
        slot=slot,
        trigger="schedule" if slot is not None else "run_now",
        attempt=attempt,
        node=NODE,
        state=state,
        started=started,
        ended=ended if ended is not None else started + timedelta(seconds=1),
        exit_code=exit_code,
        reason=reason,
        output_tail=output_tail,
    )


def ids(records: list[RunRecord]) -> list[str]:
    return [r.run_id for r in records]


def finish_with(store: StateStore, record: RunRecord) -> bool:
    """`store.finish` with the outcome fields of `record`."""
    assert record.ended is not None
    return store.finish(
        record.run_id,
        state=record.state,
        ended=record.ended,
        exit_code=record.exit_code,
        reason=record.reason,
        output_tail=record.output_tail,
    )


def insert(store: StateStore, record: RunRecord) -> bool:
    """`store.record` with every field of `record`."""
    assert record.ended is not None
    return store.record(
        record.job,
        record.slot,
        record.trigger,
        record.run_id,
        node=record.node,
        attempt=record.attempt,
        state=record.state,
        started=record.started,
        ended=record.ended,
        exit_code=record.exit_code,
        reason=record.reason,
        output_tail=record.output_tail,
        last_slot=record.last_slot,
    )


def test_is_a_state_store(store: StateStore) -> None:
    assert isinstance(store, StateStore)


# -- claims ------------------------------------------------------------------------------------


def test_a_slot_is_claimed_once(store: StateStore) -> None:
    assert claim(store, "j", at(60), "1")
    assert not claim(store, "j", at(60), "2")  # the same slot, another run: refused
    assert claim(store, "j", at(120), "3")  # the next slot
    assert claim(store, "k", at(60), "4")  # the same slot of another job
    assert claim(store, "j", at(60), "5", attempt=2, trigger="retry")  # its next attempt
    assert not claim(store, "j", at(60), "6", attempt=2, trigger="retry")
    assert sorted(ids(store.history())) == ["1", "3", "4", "5"]


def test_a_slot_in_another_zone_is_the_same_slot(store: StateStore) -> None:
    berlin = timezone(timedelta(hours=1))
    assert claim(store, "j", at(60), "1")
    assert not claim(store, "j", at(60).astimezone(berlin), "2")
    [record] = store.history()
    assert record.slot == at(60) and record.slot.tzinfo is UTC


def test_runs_outside_the_schedule_are_keyed_by_their_run_id(store: StateStore) -> None:
    for n in range(20):
        assert claim(store, "j", None, f"now-{n}")  # run_now at one instant: never collide
    assert not claim(store, "j", None, "now-3")  # the same run id again
    assert not claim(store, "j", at(60), "now-4")  # a run id is unique whatever its key
    assert claim(store, "j", None, "dep-1", trigger="dependence")
    assert len(store.history(limit=100)) == 21


def test_concurrent_claims_of_one_slot_give_exactly_one_winner(store: StateStore) -> None:
    threads = 16
    barrier = threading.Barrier(threads)
    wins: list[str] = []
    lock = threading.Lock()

    def contender(n: int) -> None:
        barrier.wait()
        if claim(store, "j", at(60), f"run-{n}"):
            with lock:
                wins.append(f"run-{n}")

    workers = [threading.Thread(target=contender, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(wins) == 1
    assert ids(store.history()) == wins


def test_concurrent_claims_of_many_slots_claim_each_once(store: StateStore) -> None:
    threads, slots = 8, 200
    barrier = threading.Barrier(threads)
    won: list[list[int]] = [[] for _ in range(threads)]

    def contender(n: int) -> None:
        barrier.wait()
        for k in range(slots):
            if claim(store, "j", at(k), f"{n}-{k}"):
                won[n].append(k)

    workers = [threading.Thread(target=contender, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(k for w in won for k in w) == list(range(slots))
    assert len(store.history(limit=1000)) == slots


def test_claim_many_answers_in_order(store: StateStore) -> None:
    assert claim(store, "j", at(60), "old")
    answers = store.claim_many(
        [
            ("j", at(0), "schedule", "a", NODE, 1, T0),
            ("j", at(60), "schedule", "b", NODE, 1, T0),  # taken before
            ("j", at(0), "schedule", "c", NODE, 1, T0),  # the key of "a": the first wins
            ("k", None, "run_now", "a", NODE, 1, T0),  # the run id of "a"
            ("k", None, "run_now", "d", NODE, 1, T0),
        ]
    )
    assert answers == [True, False, False, False, True]
    assert store.claim_many([]) == []
    assert sorted(ids(store.history())) == ["a", "d", "old"]


def test_a_claimed_run_shows_as_running(store: StateStore) -> None:
    assert claim(store, "j", at(60), "1", started=at(61))
    [record] = store.history("j")
    assert record.state is RunState.RUNNING
    assert (record.run_id, record.job, record.slot) == ("1", "j", at(60))
    assert (record.trigger, record.node, record.attempt, record.started) == (
        "schedule",
        NODE,
        1,
        at(61),
    )
    assert record.ended is None and record.exit_code is None and record.reason is None
    assert record.output_tail == ""


def test_claim_refuses_bad_values(store: StateStore) -> None:
    with pytest.raises(ValueError, match="aware"):
        store.claim("j", datetime(2024, 1, 1), "schedule", "1", node=NODE, started=T0)
    with pytest.raises(ValueError, match="aware"):
        store.claim("j", None, "run_now", "1", node=NODE, started=datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="trigger"):
        store.claim("j", None, "whenever", "1", node=NODE, started=T0)
    with pytest.raises(ValueError, match="attempt"):
        store.claim("j", at(60), "schedule", "1", node=NODE, attempt=0, started=T0)
    assert store.history() == []


# -- outcomes ----------------------------------------------------------------------------------


def test_finish_writes_the_outcome_and_keeps_the_identity(store: StateStore) -> None:
    assert claim(store, "j", at(60), "1", started=at(60))
    berlin = timezone(timedelta(hours=1))
    assert store.finish(
        "1",
        state=RunState.FAILED,
        ended=at(70).astimezone(berlin),
        exit_code=3,
        reason="exit code 3",
        output_tail="last words\n",
    )
    [record] = store.history()
    assert (record.state, record.ended, record.exit_code) == (RunState.FAILED, at(70), 3)
    assert record.ended is not None and record.ended.tzinfo is UTC
    assert (record.reason, record.output_tail) == ("exit code 3", "last words\n")
    assert (record.node, record.started, record.slot) == (NODE, at(60), at(60))
    assert (record.trigger, record.attempt) == ("schedule", 1)


def test_finish_of_an_unclaimed_or_final_run_changes_nothing(store: StateStore) -> None:
    assert not finish_with(store, final("never-claimed"))
    assert store.history() == []
    assert claim(store, "j", None, "1")
    assert finish_with(store, final("1", reason="first"))
    assert not finish_with(store, final("1", state=RunState.FAILED, reason="second"))
    [record] = store.history()
    assert (record.state, record.reason) == (RunState.SUCCEEDED, "first")


def test_finish_and_record_need_a_final_state(store: StateStore) -> None:
    assert claim(store, "j", None, "1")
    with pytest.raises(ValueError, match="final"):
        store.finish("1", state=RunState.RUNNING, ended=T0)
    with pytest.raises(ValueError, match="final"):
        store.record(
            "j", None, "run_now", "2", node=NODE, state=RunState.RUNNING, started=T0, ended=T0
        )
    with pytest.raises(ValueError, match="aware"):
        store.finish("1", state=RunState.FAILED, ended=datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="aware"):
        store.record(
            "j",
            None,
            "run_now",
            "2",
            node=NODE,
            state=RunState.FAILED,
            started=T0,
            ended=datetime(2024, 1, 1),
        )
    [running] = store.history()
    assert running.state is RunState.RUNNING


def test_record_inserts_runs_that_never_claimed(store: StateStore) -> None:
    refused = final("1", slot=at(60), state=RunState.NOT_STARTED, reason="already running")
    assert insert(store, refused)
    assert not claim(store, "j", at(60), "2")  # the slot is handled
    assert not insert(store, final("3", slot=at(60), state=RunState.SKIPPED))
    assert insert(store, final("4", slot=at(120), state=RunState.SKIPPED, reason="overlap"))
    missed = RunRecord(
        run_id="5",
        job="j",
        slot=at(180),
        last_slot=at(300),
        trigger="schedule",
        attempt=1,
        node=NODE,
        state=RunState.MISSED,
        started=at(400),
        ended=at(400),
        reason="3 slots missed",
    )
    assert insert(store, missed)
    assert not insert(store, final("1", slot=None))  # the same run id again
    by_id = {r.run_id: r for r in store.history()}
    assert sorted(by_id) == ["1", "4", "5"]
    assert by_id["1"] == refused
    assert (by_id["5"].state, by_id["5"].last_slot) == (RunState.MISSED, at(300))


def test_output_tails_are_bounded_keeping_the_end(make_store: MakeStore) -> None:
    store = make_store(output_limit=100)
    text = "".join(f"line {n}\n" for n in range(2000))
    assert claim(store, "j", None, "1")
    assert finish_with(store, final("1", output_tail=text))
    assert insert(store, final("2", output_tail=text))
    assert insert(store, final("3", output_tail="short"))
    tails = {r.run_id: r.output_tail for r in store.history()}
    assert tails == {"1": text[-100:], "2": text[-100:], "3": "short"}


def test_output_is_kept_as_the_run_kept_it_by_default(make_store: MakeStore) -> None:
    store = make_store(output_limit=None)
    text = "x" * 200_000 + "the end\n"
    assert claim(store, "j", None, "1")
    assert finish_with(store, final("1", output_tail=text))
    assert store.history()[0].output_tail == text


def test_the_output_of_a_running_run_is_written_as_it_goes(make_store: MakeStore) -> None:
    store = make_store(output_limit=10)
    assert claim(store, "j", None, "1")
    assert store.set_output("1", "first line\n")
    assert store.history()[0].output_tail == "irst line\n"  # bounded as finish bounds it
    assert store.set_output("1", "second\n")
    running = store.run("1")
    assert running is not None and running.state is RunState.RUNNING
    assert running.output_tail == "second\n"
    assert finish_with(store, final("1", output_tail="done\n"))
    assert not store.set_output("1", "late")  # a final run's output stays as finished
    assert not store.set_output("nobody", "x")
    assert store.run("1") == store.history()[0] and store.run("1").output_tail == "done\n"
    assert store.run("nobody") is None
    with pytest.raises(TypeError, match="output must be a string"):
        store.set_output("1", b"bytes")  # type: ignore[arg-type]


# -- history -----------------------------------------------------------------------------------


def test_history_is_newest_first_and_filtered(store: StateStore) -> None:
    # Written out of order: a long run that started first finishes last.
    assert insert(store, final("b1", "b", started=at(20)))
    assert claim(store, "a", None, "a1", started=at(10))
    assert insert(store, final("a2", "a", started=at(30)))
    assert claim(store, "b", at(40), "b2", started=at(40))
    assert finish_with(store, final("a1", "a", started=at(10), ended=at(50)))
    assert ids(store.history()) == ["b2", "a2", "b1", "a1"]
    assert ids(store.history("a")) == ["a2", "a1"]
    assert ids(store.history("b")) == ["b2", "b1"]
    assert [r.state for r in store.history("b")] == [RunState.RUNNING, RunState.SUCCEEDED]
    assert ids(store.history(limit=2)) == ["b2", "a2"]
    assert ids(store.history("a", limit=1)) == ["a2"]
    assert store.history(limit=0) == []
    assert ids(store.history(since=at(20))) == ["b2", "a2", "b1"]  # inclusive
    assert ids(store.history("a", since=at(20), limit=5)) == ["a2"]
    assert ids(store.history(since=at(20).astimezone(timezone(timedelta(hours=-5))))) == [
        "b2",
        "a2",
        "b1",
    ]
    assert store.history("nobody") == []
    assert store.history(since=at(41)) == []
    assert ids(store.history(state=RunState.RUNNING)) == ["b2"]
    assert ids(store.history("a", state=RunState.SUCCEEDED)) == ["a2", "a1"]
    assert store.history("b", state=RunState.FAILED) == []


def test_runs_started_at_one_instant_are_newest_written_first(store: StateStore) -> None:
    for n in range(5):
        assert insert(store, final(f"r{n}", started=T0))
    assert ids(store.history()) == ["r4", "r3", "r2", "r1", "r0"]


def test_history_refuses_a_naive_since(store: StateStore) -> None:
    with pytest.raises(ValueError, match="aware"):
        store.history(since=datetime(2024, 1, 1))


def bound(make_store: MakeStore, store: StateStore, count: int) -> None:
    """A store bounded by count is bounded as it writes; a SQL store when pruned."""
    if make_store.name not in BOUNDED:
        store.prune(older_than=T0 - timedelta(days=1), keep_per_job=count)


def test_history_is_bounded_and_keeps_the_newest(make_store: MakeStore) -> None:
    store = make_store(limit=10)
    for n in range(50):
        assert insert(store, final(f"r{n}", started=at(n)))
    bound(make_store, store, 10)
    assert ids(store.history(limit=1000)) == [f"r{n}" for n in range(49, 39, -1)]


def test_running_runs_are_kept_beyond_the_bound(make_store: MakeStore) -> None:
    store = make_store(limit=3)
    for n in range(5):
        assert claim(store, "j", None, f"run-{n}", started=at(n))
    for n in range(10):
        assert insert(store, final(f"done-{n}", "k", started=at(10 + n)))
    bound(make_store, store, 3)
    kept = store.history(limit=100)
    assert sorted(r.run_id for r in kept if r.state is RunState.RUNNING) == [
        f"run-{n}" for n in range(5)
    ]
    assert ids([r for r in kept if r.job == "k"]) == ["done-9", "done-8", "done-7"]
    assert finish_with(store, final("run-0", started=at(0)))  # a running run can always finish


def test_history_is_consistent_under_concurrent_writes(make_store: MakeStore) -> None:
    store = make_store(limit=50)
    threads, runs = 6, 300
    limit = 50 if make_store.name in BOUNDED else threads * runs
    barrier = threading.Barrier(threads + 1)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        barrier.wait()
        for k in range(runs):
            run_id = f"{n}-{k}"
            if k % 2:
                assert claim(store, f"job{n}", None, run_id, started=at(k))
                assert finish_with(store, final(run_id, f"job{n}", started=at(k)))
            else:
                assert insert(store, final(run_id, f"job{n}", started=at(k)))

    def reader() -> None:
        barrier.wait()
        try:
            while not stop.is_set():
                kept = store.history(limit=1000)
                assert len(kept) <= limit + threads  # the bound, plus a run each may be running
                started = [r.started for r in kept]
                assert started == sorted(started, reverse=True)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    watcher = threading.Thread(target=reader)
    for thread in [*workers, watcher]:
        thread.start()
    for worker in workers:
        worker.join()
    stop.set()
    watcher.join()
    assert errors == []
    kept = store.history(limit=10_000)
    assert len(kept) == limit
    assert all(r.state is RunState.SUCCEEDED for r in kept)


# -- closing -----------------------------------------------------------------------------------


def test_a_closed_store_refuses_writes_and_still_answers(store: StateStore) -> None:
    assert insert(store, final("1"))
    assert claim(store, "j", None, "2")
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreClosedError):
        claim(store, "j", None, "3")
    with pytest.raises(StoreClosedError):
        finish_with(store, final("2"))
    with pytest.raises(StoreClosedError):
        insert(store, final("4"))
    assert sorted(ids(store.history())) == ["1", "2"]


def test_release_deletes_claims_that_never_started_and_frees_their_keys(
    store: StateStore,
) -> None:
    assert claim(store, "j", at(0), "a")
    assert claim(store, "j", at(60), "b")
    assert claim(store, "k", None, "c", trigger="run_now")
    assert store.finish("b", state=RunState.SUCCEEDED, ended=at(61))
    # "b" is final and "zz" unknown: left alone; "a" and "c" are deleted.
    assert store.release(["a", "b", "zz", "c"]) == 2
    assert store.release([]) == 0
    assert ids(store.history()) == ["b"]
    # The key of "a" is free again: another run of its slot may claim it.
    assert claim(store, "j", at(0), "a2")
    assert store.finish("a", state=RunState.SUCCEEDED, ended=at(1)) is False


def test_finish_writes_the_start_when_given(store: StateStore) -> None:
    """A run claimed ahead of its slot is claimed with the slot as its start; its finish
    writes when it really started. Without `started`, the claim's start stays."""
    assert claim(store, "j", at(60), "ahead", started=at(60))
    assert claim(store, "j", at(120), "plain", started=at(121))
    assert store.finish("ahead", state=RunState.SUCCEEDED, ended=at(62), started=at(60.25))
    assert store.finish("plain", state=RunState.FAILED, ended=at(122), wait=False)
    runs = {r.run_id: r for r in store.history()}
    assert runs["ahead"].started == at(60.25) and runs["ahead"].ended == at(62)
    assert runs["plain"].started == at(121)
