"""`overlap:` skip, queue, replace — through a real Scheduler on a FakeClock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import policy_jobs as pj
import pytest
from policy_support import T0, WAIT, Recorder, internal_job

from jobscheduler import Event, FakeClock, Job
from jobscheduler.policies.overlap import SKIPPED
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import RunState


def holding(name: str, key: str, **fields: Any) -> Job:
    return internal_job(name, "Holds", key, "60 seconds", **fields)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def tick(s: Scheduler, clock: FakeClock, seconds: float = 60) -> None:
    clock.advance(timedelta(seconds=seconds))
    s._processor.run_due(clock.now())  # the loop body, at the clock's time


def wait_runs(key: str, count: int) -> None:
    pj.wait_calls(key, count, WAIT)


def states(s: Scheduler, name: str) -> list[tuple[RunState, str | None]]:
    return [(r.state, r.reason) for r in reversed(s.history(name))]


def test_skip_records_each_busy_slot_without_an_event(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    recorder = Recorder()
    scheduler.add_job(holding("slow", key, overlap="skip"))
    scheduler.add_handler("slow", recorder)
    scheduler.start()
    tick(scheduler, clock)
    wait_runs(key, 1)
    tick(scheduler, clock)
    tick(scheduler, clock)
    pj.gate(key).set()
    assert scheduler.wait_idle(WAIT)
    assert len(pj.calls(key)) == 1
    recorded = states(scheduler, "slow")
    assert recorded.count((RunState.SKIPPED, SKIPPED)) == 2
    assert (RunState.SUCCEEDED, None) in recorded
    skipped = [r for r in scheduler.history("slow") if r.state is RunState.SKIPPED]
    assert sorted(r.slot for r in skipped) == [
        T0 + timedelta(seconds=120),
        T0 + timedelta(seconds=180),
    ]
    assert [e for e, _ in recorder.seen] == [Event.SUCCESSFUL]  # no event for a skipped slot


def test_queue_keeps_one_waiting_run_and_skips_the_rest(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    scheduler.add_job(holding("slow", key, overlap="queue"))
    scheduler.start()
    tick(scheduler, clock)
    wait_runs(key, 1)
    tick(scheduler, clock)  # held: the first slot that found it busy
    tick(scheduler, clock)  # skipped
    assert len(pj.calls(key)) == 1
    pj.gate(key).set()  # the first run ends: the held one starts (the gate stays open)
    wait_runs(key, 2)
    assert scheduler.wait_idle(WAIT)
    runs = pj.calls(key)
    assert [r["slot"] for r in runs] == [T0 + timedelta(seconds=60), T0 + timedelta(seconds=120)]
    assert all(r["trigger"] == "schedule" for r in runs)
    skipped = [r.slot for r in scheduler.history("slow") if r.state is RunState.SKIPPED]
    assert skipped == [T0 + timedelta(seconds=180)]


def test_replace_stops_the_running_run_and_starts_the_new_one(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    recorder = Recorder()
    scheduler.add_job(holding("slow", key, overlap="replace"))
    scheduler.add_handler("slow", recorder)
    scheduler.start()
    tick(scheduler, clock)
    wait_runs(key, 1)
    tick(scheduler, clock)  # replaces the first run
    wait_runs(key, 2)
    pj.gate(key).set()
    assert scheduler.wait_idle(WAIT)
    assert [r["slot"] for r in pj.calls(key)] == [
        T0 + timedelta(seconds=60),
        T0 + timedelta(seconds=120),
    ]
    events = sorted((e.value, x.reason) for e, x in recorder.seen)
    assert events == sorted([(Event.FAILED.value, "replaced"), (Event.SUCCESSFUL.value, None)])


def test_the_instance_limit_counts_for_busy(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    scheduler.add_job(holding("slow", key, overlap="skip", max_instances=2))
    scheduler.start()
    tick(scheduler, clock)
    wait_runs(key, 1)
    tick(scheduler, clock)
    wait_runs(key, 2)  # two may run side by side
    tick(scheduler, clock)  # the third is skipped, not NOT_STARTED "already running"
    pj.gate(key).set()
    assert scheduler.wait_idle(WAIT)
    recorded = [state for state, _ in states(scheduler, "slow")]
    assert recorded.count(RunState.SKIPPED) == 1
    assert RunState.NOT_STARTED not in recorded


def test_allow_is_the_default_and_runs_overlap(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    scheduler.add_job(holding("slow", key))
    scheduler.start()
    tick(scheduler, clock)
    wait_runs(key, 1)
    tick(scheduler, clock)
    wait_runs(key, 2)
    pj.gate(key).set()
    assert scheduler.wait_idle(WAIT)
    assert RunState.SKIPPED not in [state for state, _ in states(scheduler, "slow")]


def test_a_held_run_ends_not_started_when_the_scheduler_stops(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    recorder = Recorder()
    scheduler.add_job(holding("slow", key, overlap="queue"))
    scheduler.add_handler("slow", recorder)
    scheduler.start()
    tick(scheduler, clock)
    wait_runs(key, 1)
    tick(scheduler, clock)  # held
    scheduler.stop()
    pj.gate(key).set()
    assert scheduler.wait_idle(WAIT)
    assert len(pj.calls(key)) == 1
    assert (Event.NOT_STARTED, "scheduler stopped") in [(e, x.reason) for e, x in recorder.seen]


def test_replace_stops_an_external_command(
    scheduler: Scheduler, clock: FakeClock, tmp_path: Any
) -> None:
    marker = tmp_path / "runs"
    command = ["sh", "-c", f'echo run >> "{marker}"; exec sleep 30']
    recorder = Recorder()
    scheduler.add_job(
        Job(
            "sleeper",
            command=command,
            start=T0 + timedelta(seconds=60),
            interval="60 seconds",
            timezone="UTC",
            overlap="replace",
        )
    )
    scheduler.add_handler("sleeper", recorder)
    scheduler.start()
    tick(scheduler, clock)
    for _ in range(1000):
        if scheduler.executing and marker.exists():
            break
        pj.gate("unused").wait(0.01)
    tick(scheduler, clock)  # SIGTERM to the first run's process group
    for _ in range(1000):
        if marker.exists() and marker.read_text().count("run") == 2:
            break
        pj.gate("unused").wait(0.01)
    assert marker.read_text().count("run") == 2
    assert scheduler.stop_job("sleeper") == 1
    assert scheduler.wait_idle(WAIT)
    reasons = sorted(str(x.reason) for e, x in recorder.seen if e is Event.FAILED)
    assert reasons == ["replaced", "stopped"]
