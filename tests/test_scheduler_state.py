"""The Scheduler and its state store: ``state=``, `history`, each run recorded, the claim."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import jobs_for_tests as jft
import pytest
from test_scheduler import T0, WAIT, Recorder, failing, internal, key, settle, step

from jobscheduler import Event, Execution, FakeClock, Job, JobActionError, JobType
from jobscheduler.model.runid import is_run_id
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import (
    MemoryStateStore,
    RunRecord,
    RunState,
    StateStore,
    StoreClosedError,
)
from jobscheduler.state.writes import write_run


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def scheduler(clock: FakeClock) -> Iterator[Scheduler]:
    s = Scheduler(clock=clock)
    yield s
    s.shutdown(wait=False)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("sqlite:///no/such/dir/jobs.state.db", "sqlite:///no/such/dir/jobs.state.db"),
        ("redis://app:s3cret@localhost", "redis://app:***@localhost"),
    ],
)
def test_a_store_that_cannot_be_opened_is_refused(url: str, shown: str) -> None:
    with pytest.raises(JobActionError) as caught:
        Scheduler(state=url)
    message = str(caught.value)
    assert shown in message and "s3cret" not in message
    assert "key 'state'" in message and "\n" not in message


def test_a_sqlite_url_opens_a_store_the_scheduler_closes(tmp_path: Path) -> None:
    s = Scheduler(state=f"sqlite:///{tmp_path}/jobs.state.db")
    s.shutdown(wait=False)
    assert (tmp_path / "jobs.state.db").exists()


def test_state_must_be_a_url_or_a_store() -> None:
    with pytest.raises(TypeError, match="state must be"):
        Scheduler(state=42)  # type: ignore[arg-type]


def test_memory_is_the_default_and_history_limit_bounds_it(clock: FakeClock) -> None:
    s = Scheduler(clock=clock, history_limit=7)
    explicit = Scheduler(clock=clock, state="memory")
    try:
        assert isinstance(s.state_store, MemoryStateStore) and s.state_store.limit == 7
        assert isinstance(explicit.state_store, MemoryStateStore)
    finally:
        s.shutdown()
        explicit.shutdown()


def test_every_run_is_recorded_newest_first(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    scheduler.add_jobs([internal("ok", key(request)), failing("bad")])
    scheduler.start()
    step(scheduler, clock, 60)
    step(scheduler, clock, 60)
    scheduler.run_now("ok")
    settle(scheduler)
    records = scheduler.history()
    assert len(records) == 5
    assert [r.started for r in records] == sorted((r.started for r in records), reverse=True)
    [now, second, first] = scheduler.history("ok")
    assert (now.trigger, now.slot, now.state) == ("run_now", None, RunState.SUCCEEDED)
    assert (second.slot, first.slot) == (T0 + timedelta(seconds=120), T0 + timedelta(seconds=60))
    [bad, _] = scheduler.history("bad")
    assert bad.state is RunState.FAILED and (bad.reason or "").startswith("raised ")
    assert [bad.node] == [node.name for node in scheduler.nodes] and bad.attempt == 1
    assert is_run_id(bad.run_id)
    assert [r.run_id for r in scheduler.history(since=T0 + timedelta(seconds=120))] == [
        r.run_id for r in records[:3]
    ]


def test_a_store_given_is_used_and_left_open(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    store = MemoryStateStore(50)
    s = Scheduler(clock=clock, state=store)
    s.add_job(internal("j", key(request)))
    s.start()
    step(s, clock, 60)
    s.shutdown()
    assert [r.job for r in store.history()] == ["j"]
    later = T0 + timedelta(minutes=5)
    assert store.claim("j", None, "run_now", "after", node="n", started=later)  # still open
    assert s.history()[0].run_id == "after"


def test_the_store_it_opened_is_closed_at_shutdown_and_still_read(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    with Scheduler(clock=clock) as s:
        s.add_job(internal("j", key(request)))
        step(s, clock, 60)
    assert [r.state for r in s.history("j")] == [RunState.SUCCEEDED]
    with pytest.raises(StoreClosedError):
        s.state_store.claim("j", None, "run_now", "x", node="n", started=T0)


class FailingStore(MemoryStateStore):
    """A memory store whose disk, say, is full: every write fails."""

    def claim(self, *args: object, **kwargs: object) -> bool:  # type: ignore[override]
        raise OSError("no space left on device")

    def finish(self, *args: object, **kwargs: object) -> bool:  # type: ignore[override]
        raise OSError("no space left on device")

    def record(self, *args: object, **kwargs: object) -> bool:  # type: ignore[override]
        raise OSError("no space left on device")


def test_a_failing_store_starts_nothing_and_says_so(
    clock: FakeClock, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    s = Scheduler(clock=clock, state=FailingStore())
    recorder = Recorder()
    try:
        s.add_job(internal("j", key(request)))
        s.add_handler("j", recorder)
        s.start()
        with caplog.at_level(logging.ERROR, logger="jobscheduler"):
            step(s, clock, 60)
            step(s, clock, 60)
        # No store: nothing starts unrecorded, and each refused run is an event with its reason.
        assert recorder.events() == [("j", Event.NOT_STARTED)] * 2
        assert s.history() == []
        assert "claim raised" in caplog.text
        assert "in the state store failed" in caplog.text  # its record could not be written
        # The claim raised the store's own error, which is the refused run's reason.
        assert {execution.reason for _, _, execution in recorder.seen} == {
            "claim failed: OSError: no space left on device"
        }
    finally:
        s.shutdown(wait=False)


# -- the claim the engine makes through the scheduler ------------------------------------------
# (The store's side of each claim, key by key, is in test_state_store.py.)


T = TypeVar("T")


def eventually(check: Callable[[], T]) -> T:
    """`check()`'s first truthy answer, asked until it comes (at most `WAIT` seconds)."""
    pause = threading.Event()
    for _ in range(int(WAIT / 0.01)):
        answer = check()
        if answer:
            return answer
        pause.wait(0.01)  # the condition is the store's: nothing to be woken by
    raise AssertionError(f"not true within {WAIT} s")


def blocking(name: str, key: str, **fields: Any) -> Job:
    """A scheduled internal job whose runs block until the test sets ``jft.event(key)``."""
    return Job(
        name,
        type=JobType.INTERNAL,
        command=f"{jft.__name__}:wait_for",
        args={"key": key},
        timezone="UTC",
        start=T0 + timedelta(seconds=60),
        interval="60 seconds",
        **fields,
    )


def started(key: str) -> None:
    """Wait until a run of a `blocking` job with `key` has started."""
    assert jft.event(key + ":started").wait(WAIT)


def test_a_run_is_claimed_as_it_starts_and_its_finish_completes_it(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    name = key(request)
    scheduler = Scheduler(clock=clock, node="node-a")
    try:
        scheduler.add_job(blocking("j", name, max_instances=1))
        scheduler.start()
        slot = T0 + timedelta(seconds=60)
        clock.set(slot)
        started(name)
        [running] = scheduler.history("j")
        assert is_run_id(running.run_id)
        assert (running.state, running.slot) == (RunState.RUNNING, slot)
        assert (running.node, running.started) == ("node-a", slot)
        # A run refused before its claim (the job runs already) is recorded as it ended.
        scheduler.run_now("j")
        refused = eventually(lambda: [r for r in scheduler.history("j") if r.trigger == "run_now"])
        assert [(r.state, r.reason) for r in refused] == [(RunState.NOT_STARTED, "already running")]
        clock.advance(timedelta(seconds=1))
        jft.event(name).set()
        settle(scheduler)
        done = next(r for r in scheduler.history("j") if r.trigger == "schedule")
        assert (done.run_id, done.state) == (running.run_id, RunState.SUCCEEDED)
        assert (done.started, done.ended) == (slot, slot + timedelta(seconds=1))
        assert len(scheduler.history("j")) == 2
    finally:
        jft.event(name).set()
        scheduler.shutdown(wait=False)


def test_claims_of_run_now_never_collide(clock: FakeClock, request: pytest.FixtureRequest) -> None:
    """Runs outside the schedule are keyed by their run id: ten at one instant all run."""
    name = key(request)
    scheduler = Scheduler(clock=clock, max_workers=10)
    try:
        scheduler.add_job(blocking("j", name, enabled=False))
        scheduler.start()
        for _ in range(10):
            scheduler.run_now("j")

        def all_started() -> list[RunRecord]:
            runs = scheduler.history("j")
            return runs if len(runs) == 10 else []

        running = eventually(all_started)
        assert {r.state for r in running} == {RunState.RUNNING}
        assert len({r.run_id for r in running}) == 10
        assert {r.started for r in running} == {T0}
    finally:
        jft.event(name).set()
        scheduler.shutdown()


def test_schedulers_sharing_a_store_claim_each_slot_once(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    """What the durable stores give across processes, shown with two schedulers and one
    store in one process: each slot runs once, on one of them."""
    store: StateStore = MemoryStateStore()
    first = Scheduler(clock=clock, state=store, node="first")
    second = Scheduler(clock=clock, state=store, node="second")
    try:
        for s in (first, second):
            s.add_job(internal("j", key(request)))
            s.start()
        for _ in range(5):
            step(first, clock, 60)
            settle(second)
        slots = [T0 + timedelta(minutes=n) for n in range(1, 6)]
        runs = store.history()
        assert sorted(r.slot for r in runs if r.slot is not None) == slots
        assert len(runs) == 5
        assert {r.state for r in runs} == {RunState.SUCCEEDED}
        assert {r.node for r in runs} <= {"first", "second"}
    finally:
        first.shutdown()
        second.shutdown()


def test_write_run_refuses_a_run_that_has_not_ended() -> None:
    store = MemoryStateStore()
    running = Execution(job_name="j", run_id=1, slot=None, started=T0, trigger="run_now")
    with pytest.raises(ValueError, match="has not ended"):
        write_run(store, running, node="n")
    assert store.history() == []
