"""The Scheduler and its state store: ``state=``, `history`, each run recorded, the claim."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from test_scheduler import T0, Recorder, failing, internal, key, settle, step

from jobscheduler import Event, Execution, FakeClock, JobActionError, SchedulerResult
from jobscheduler.model.runid import is_run_id
from jobscheduler.runners.context import RunContext
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import (
    MemoryStateStore,
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
    assert bad.node == scheduler._node and bad.attempt == 1
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
        ctx = RunContext(s.get_job("j"), "r-99", T0, "schedule")
        with pytest.raises(OSError, match="no space left"):
            s._claims.claim(s.get_job("j"), ctx)
    finally:
        s.shutdown(wait=False)


# -- the claim the engine makes through the scheduler ------------------------------------------


def finished(run_id: str, ctx: RunContext, clock: FakeClock) -> Execution:
    return Execution(
        job_name=ctx.job.name,
        run_id=run_id,
        slot=ctx.slot,
        started=clock.now(),
        ended=clock.now() + timedelta(seconds=3),
        event=Event.SUCCESSFUL,
        result=SchedulerResult.NORMAL,
        exit_code=0,
        trigger=ctx.trigger,
    )


def test_claim_takes_the_slot_and_the_finish_completes_it(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    job = internal("j", "claim")
    scheduler.add_job(job)
    slot = T0 + timedelta(seconds=60)
    clock.set(slot)
    ctx = RunContext(job, "7", slot, "schedule")
    assert scheduler._claims.claim(job, ctx)
    [running] = scheduler.history("j")
    assert (running.run_id, running.state, running.slot) == ("7", RunState.RUNNING, slot)
    assert (running.node, running.started) == (scheduler._node, slot)
    # Another run for the same slot (another node's, or a duplicate) is refused.
    assert not scheduler._claims.claim(job, RunContext(job, "8", slot, "schedule"))
    clock.advance(timedelta(seconds=1))
    scheduler._on_finished(job, finished("7", ctx, clock))
    [done] = scheduler.history("j")
    assert (done.run_id, done.state, done.exit_code) == ("7", RunState.SUCCEEDED, 0)
    assert done.started == slot + timedelta(seconds=1)  # the run's own, written by its finish
    # A run never claimed (refused before its claim) is added; one whose key is taken is not.
    scheduler._on_finished(job, finished("8", RunContext(job, "8", slot, "schedule"), clock))
    scheduler._on_finished(job, finished("9", RunContext(job, "9", None, "run_now"), clock))
    assert [r.run_id for r in scheduler.history("j")] == ["9", "7"]


def test_claims_of_run_now_never_collide(scheduler: Scheduler) -> None:
    job = internal("j", "claim-now")
    scheduler.add_job(job)
    assert all(
        scheduler._claims.claim(job, RunContext(job, f"run-{n}", None, "run_now"))
        for n in range(10)
    )
    assert not scheduler._claims.claim(job, RunContext(job, "run-3", None, "run_now"))
    assert {r.state for r in scheduler.history("j")} == {RunState.RUNNING}


def test_schedulers_sharing_a_store_claim_each_slot_once(clock: FakeClock) -> None:
    """What the durable stores give across processes, shown with two schedulers and one
    store in one process: the second claim of a slot is refused."""
    store: StateStore = MemoryStateStore()
    first, second = Scheduler(clock=clock, state=store), Scheduler(clock=clock, state=store)
    try:
        job = internal("j", "shared")
        slots = [T0 + timedelta(minutes=n) for n in range(1, 6)]
        wins = [
            [
                s._claims.claim(job, RunContext(job, f"run-{n}", slot, "schedule"))
                for s in (first, second)
            ]
            for n, slot in enumerate(slots)
        ]
        assert wins == [[True, False]] * 5
        assert len(store.history()) == 5
    finally:
        first.shutdown()
        second.shutdown()


def test_write_run_refuses_a_run_that_has_not_ended() -> None:
    store = MemoryStateStore()
    running = Execution(job_name="j", run_id=1, slot=None, started=T0, trigger="run_now")
    with pytest.raises(ValueError, match="has not ended"):
        write_run(store, running, node="n")
    assert store.history() == []
