"""Dependences (spec 1.3.6): triggers, delays, mismatches, chains, fan-out, reload, shutdown."""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from test_scheduler import T0, Recorder, failing, internal, settle, step

from jobscheduler import Dependence, Event, FakeClock, Job, SchedulerResult
from jobscheduler.clock import SystemClock
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import RunState

NOT_MET = "dependence not met"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def states_of(s: Scheduler, name: str) -> list[RunState]:
    """The states of job `name`'s runs, oldest first."""
    return [r.state for r in reversed(s.history(name))]


def test_success_starts_dependent_after_its_delay(scheduler: Scheduler, clock: FakeClock) -> None:
    scheduler.add_jobs(
        [
            internal("a", "dep-a"),
            internal(
                "b", "dep-b", dependence=Dependence("a", Event.SUCCESSFUL, timedelta(seconds=10))
            ),
        ]
    )
    scheduler.start()
    step(scheduler, clock, 60)
    assert states_of(scheduler, "a") == [RunState.SUCCEEDED]
    assert states_of(scheduler, "b") == []
    step(scheduler, clock, 9)
    assert states_of(scheduler, "b") == []
    step(scheduler, clock, 1)
    [run] = scheduler.history("b")
    assert run.state is RunState.SUCCEEDED
    assert run.trigger == "dependence"
    assert run.started == T0 + timedelta(seconds=70)


def test_mismatch_fires_not_started(scheduler: Scheduler, clock: FakeClock) -> None:
    recorder = Recorder()
    scheduler.add_jobs(
        [failing("a"), internal("b", "mm-b", dependence=Dependence("a", Event.SUCCESSFUL))]
    )
    scheduler.add_handler("b", recorder)
    scheduler.start()
    step(scheduler, clock, 60)
    [run] = scheduler.history("b")
    assert run.state is RunState.NOT_STARTED
    assert run.reason is not None and run.reason.startswith(NOT_MET)
    assert recorder.events() == [("b", Event.NOT_STARTED)]
    assert recorder.seen[0][2].result is SchedulerResult.ABNORMAL


@pytest.mark.parametrize(
    ("wanted", "parent_fails", "runs"),
    [
        (Event.SUCCESSFUL, False, True),
        (Event.SUCCESSFUL, True, False),
        (Event.FAILED, True, True),
        (Event.FAILED, False, False),
        (Event.BOTH, False, True),
        (Event.BOTH, True, True),
    ],
)
def test_each_status_rule(
    scheduler: Scheduler, clock: FakeClock, wanted: Event, parent_fails: bool, runs: bool
) -> None:
    parent = failing("a") if parent_fails else internal("a", "rule-a")
    scheduler.add_jobs([parent, internal("b", "rule-b", dependence=Dependence("a", wanted))])
    scheduler.start()
    step(scheduler, clock, 60)
    expected = RunState.SUCCEEDED if runs else RunState.NOT_STARTED
    assert states_of(scheduler, "b") == [expected]


def test_parent_not_started_starts_no_dependent_but_reports_them(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    missing = Job(
        "a",
        type="internal",
        command="no_such_module_xyz:f",
        start=T0 + timedelta(60),
        interval="1 day",
        timezone="UTC",
    )
    scheduler.add_jobs([missing, internal("b", "ns-b", dependence=Dependence("a", Event.BOTH))])
    scheduler.run_now("a")
    scheduler.start()
    settle(scheduler)
    assert states_of(scheduler, "a") == [RunState.NOT_STARTED]
    [run] = scheduler.history("b")
    assert run.state is RunState.NOT_STARTED
    assert "a did not start" in (run.reason or "")


def test_chain_and_fan_out(scheduler: Scheduler, clock: FakeClock) -> None:
    scheduler.add_jobs(
        [
            internal("a", "ch-a"),
            internal("b", "ch-b", dependence=Dependence("a")),
            internal("c", "ch-c", dependence=Dependence("b", delay=timedelta(seconds=5))),
            internal("d", "ch-d", dependence=Dependence("a", Event.BOTH)),
            internal("e", "ch-e", dependence=Dependence("a", Event.FAILED)),
        ]
    )
    scheduler.start()
    step(scheduler, clock, 60)
    assert states_of(scheduler, "b") == [RunState.SUCCEEDED]
    assert states_of(scheduler, "d") == [RunState.SUCCEEDED]
    assert states_of(scheduler, "e") == [RunState.NOT_STARTED]
    assert states_of(scheduler, "c") == []
    step(scheduler, clock, 5)
    assert states_of(scheduler, "c") == [RunState.SUCCEEDED]


def test_a_failed_link_reports_the_rest_of_the_chain(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    scheduler.add_jobs(
        [
            failing("a"),
            internal("b", "fl-b", dependence=Dependence("a")),
            internal("c", "fl-c", dependence=Dependence("b")),
        ]
    )
    scheduler.start()
    step(scheduler, clock, 60)
    assert states_of(scheduler, "b") == [RunState.NOT_STARTED]
    assert states_of(scheduler, "c") == [RunState.NOT_STARTED]


def test_one_run_per_matching_parent_event(scheduler: Scheduler, clock: FakeClock) -> None:
    scheduler.add_jobs(
        [internal("a", "once-a"), internal("b", "once-b", dependence=Dependence("a"))]
    )
    scheduler.start()
    for _ in range(3):
        step(scheduler, clock, 60)
    assert states_of(scheduler, "b") == [RunState.SUCCEEDED] * 3


def test_run_now_of_a_parent_triggers_dependents(scheduler: Scheduler) -> None:
    scheduler.add_jobs([internal("a", "rn-a"), internal("b", "rn-b", dependence=Dependence("a"))])
    scheduler.start()
    scheduler.run_now("a")
    settle(scheduler)
    assert states_of(scheduler, "b") == [RunState.SUCCEEDED]


def test_pending_start_survives_unchanged_reload_and_drops_on_removal(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "jobs.yaml"
    s = Scheduler(path, clock=clock)
    try:
        delay = Dependence("a", delay=timedelta(seconds=30))
        s.add_jobs([internal("a", "rl-a"), internal("b", "rl-b", dependence=delay)])
        s.start()
        step(s, clock, 60)
        s.reload()  # nothing changed: the pending start of b stays
        step(s, clock, 30)
        assert states_of(s, "b") == [RunState.SUCCEEDED]
        step(s, clock, 30)  # a runs again at 120: b pending until 150
        Scheduler(path, clock=clock).remove_job("b")
        s.reload()
        step(s, clock, 60)
        b_runs = [r for r in reversed(s.history()) if r.job == "b"]  # oldest first
        assert b_runs[0].state is RunState.SUCCEEDED
        # the pending start was dropped: it never ran (it may be reported NOT_STARTED)
        assert [r.state for r in b_runs[1:]] in ([], [RunState.NOT_STARTED])
    finally:
        s.shutdown(wait=False)


def test_shutdown_without_waiting_drops_pending_starts(clock: FakeClock) -> None:
    s = Scheduler(clock=clock)
    delay = Dependence("a", delay=timedelta(seconds=30))
    s.add_jobs([internal("a", "sd-a"), internal("b", "sd-b", dependence=delay)])
    s.start()
    step(s, clock, 60)
    s.shutdown(wait=False)
    clock.advance(timedelta(seconds=60))
    assert all(r.state is not RunState.SUCCEEDED for r in s.history("b"))


def test_paused_dependent_is_not_started(scheduler: Scheduler, clock: FakeClock) -> None:
    scheduler.add_jobs(
        [internal("a", "pd-a"), internal("b", "pd-b", dependence=Dependence("a"), enabled=False)]
    )
    scheduler.start()
    step(scheduler, clock, 60)
    [run] = scheduler.history("b")
    assert run.state is RunState.NOT_STARTED
    assert "paused" in (run.reason or "")


def test_a_dependent_paused_in_the_store_is_not_started(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    scheduler.add_jobs([internal("a", "ps-a"), internal("b", "ps-b", dependence=Dependence("a"))])
    scheduler.pause_job("b", note="not now")
    scheduler.start()
    step(scheduler, clock, 60)
    [run] = scheduler.history("b")
    assert run.state is RunState.NOT_STARTED
    assert run.reason == "dependence met but the job is paused"


def test_real_processes_chain() -> None:
    """A -> B (on failure) -> C (on success), with real commands and real time."""
    s = Scheduler(clock=SystemClock(), max_workers=2)
    try:
        s.add_jobs(
            [
                Job(
                    "a",
                    command=[sys.executable, "-c", "raise SystemExit(3)"],
                    start=T0,
                    interval="1 day",
                    timezone="UTC",
                ),
                Job(
                    "b",
                    command=["sh", "-c", "echo b-ran"],
                    dependence=Dependence("a", Event.FAILED, timedelta(seconds=0.2)),
                ),
                Job("c", command="true", dependence=Dependence("b", Event.SUCCESSFUL)),
            ]
        )
        s.start()
        s.run_now("a")
        deadline = time.monotonic() + 60
        # Three runs, all ended (a run shows in the history from its claim, running).
        while time.monotonic() < deadline and (
            len(s.history()) < 3 or any(r.state is RunState.RUNNING for r in s.history())
        ):
            time.sleep(0.02)  # real processes, real time: this is the point of the test
        a, b, c = (s.history(n)[0] for n in "abc")
        assert (a.state, a.exit_code) == (RunState.FAILED, 3)
        assert b.state is RunState.SUCCEEDED and "b-ran" in b.output_tail
        assert a.ended is not None and b.started - a.ended >= timedelta(seconds=0.2)
        assert c.state is RunState.SUCCEEDED
    finally:
        s.shutdown()


def test_pausing_a_dependent_cancels_its_pending_start(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    delay = Dependence("a", delay=timedelta(seconds=30))
    scheduler.add_jobs([internal("a", "pp-a"), internal("b", "pp-b", dependence=delay)])
    scheduler.start()
    step(scheduler, clock, 60)
    scheduler.pause_job("b")
    step(scheduler, clock, 30)
    assert RunState.SUCCEEDED not in states_of(scheduler, "b")


def test_modifying_a_dependent_keeps_its_pending_start(
    scheduler: Scheduler, clock: FakeClock
) -> None:
    delay = Dependence("a", delay=timedelta(seconds=30))
    scheduler.add_jobs([internal("a", "mk-a"), internal("b", "mk-b", dependence=delay)])
    scheduler.start()
    step(scheduler, clock, 60)
    scheduler.modify_job(internal("b", "mk-b", dependence=delay, priority=5))
    step(scheduler, clock, 30)
    assert states_of(scheduler, "b") == [RunState.SUCCEEDED]
