"""One-off jobs (`start` alone: one run) and on-demand jobs (``on_demand=True``: run only
when asked), through a real Scheduler on a FakeClock (issue 18)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jobs_for_tests as jft
import pytest

from jobscheduler import Dependence, Event, FakeClock, InvalidJobError, Job, JobType
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import RunState

T0 = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
WAIT = 60.0  # seconds: reached only when a test fails, even on a loaded machine


def internal(name: str, key: str, **fields: Any) -> Job:
    return Job(
        name,
        type=JobType.INTERNAL,
        command=f"{jft.__name__}:add",
        args={"key": key},
        **fields,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def step(s: Scheduler, clock: FakeClock, delta: timedelta) -> None:
    clock.advance(delta)
    assert s.wait_idle(WAIT)


def key(request: pytest.FixtureRequest) -> str:
    return request.node.nodeid


def test_a_one_off_runs_once_at_start_then_has_no_next_run(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    k = key(request)
    at = T0 + timedelta(hours=2)
    scheduler.add_job(internal("once", k, start=at, timezone="UTC"))
    assert scheduler.get_job("once").schedule_kind == "once"
    assert scheduler.next_run("once") == at
    scheduler.start()
    step(scheduler, clock, timedelta(hours=2) - timedelta(seconds=1))
    assert jft.calls(k) == []
    step(scheduler, clock, timedelta(seconds=1))
    assert len(jft.calls(k)) == 1
    assert scheduler.next_run("once") is None
    step(scheduler, clock, timedelta(days=400))
    assert len(jft.calls(k)) == 1  # once only
    [run] = scheduler.history("once")
    assert run.slot == at and run.trigger == "schedule" and run.state is RunState.SUCCEEDED
    assert "once" in [j.name for j in scheduler.jobs]  # still defined


def test_moving_start_schedules_a_one_off_again(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    k = key(request)
    scheduler.add_job(internal("once", k, start=T0 + timedelta(minutes=5), timezone="UTC"))
    scheduler.start()
    step(scheduler, clock, timedelta(minutes=5))
    assert len(jft.calls(k)) == 1 and scheduler.next_run("once") is None
    later = clock.now() + timedelta(hours=1)
    scheduler.modify_job(scheduler.get_job("once").with_changes(start=later))
    assert scheduler.next_run("once") == later
    step(scheduler, clock, timedelta(hours=1))
    assert len(jft.calls(k)) == 2


def test_a_one_off_in_the_spring_gap_runs_at_the_gaps_end(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    """02:30 on 29 March 2026 does not exist in Berlin: the run is at 03:00 CEST (01:00
    UTC), the rule of any slot; across the change, on a FakeClock."""
    k = key(request)
    job = internal("gap", k, start=datetime(2026, 3, 29, 2, 30), timezone="Europe/Berlin")
    assert job.next_after(T0) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    scheduler.add_job(job)
    scheduler.start()
    step(scheduler, clock, datetime(2026, 3, 29, 0, 59, 59, tzinfo=UTC) - T0)
    assert jft.calls(k) == []
    step(scheduler, clock, timedelta(seconds=1))
    assert len(jft.calls(k)) == 1
    step(scheduler, clock, timedelta(days=2))
    assert len(jft.calls(k)) == 1


def test_a_one_off_in_the_repeated_hour_runs_once_at_its_first_occurrence() -> None:
    job = Job("fold", command="true", start=datetime(2026, 10, 25, 2, 30), timezone="Europe/Berlin")
    first = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST
    slot = job.next_after(first - timedelta(seconds=1))
    # In UTC: PEP 495 makes an ambiguous wall time unequal to any instant of another zone.
    assert slot is not None and slot.astimezone(UTC) == first
    assert job.next_after(first) is None
    assert job.next_after(first + timedelta(hours=1)) is None  # not again at 02:30 CET
    assert job.stop_utc == first  # its one slot is its last


def test_a_one_off_whose_start_has_passed_does_not_run(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    k = key(request)
    scheduler.add_job(internal("past", k, start=T0 - timedelta(hours=1), timezone="UTC"))
    assert scheduler.next_run("past") is None
    scheduler.start()
    step(scheduler, clock, timedelta(days=1))
    assert jft.calls(k) == []


def test_a_one_off_that_ran_is_not_run_again_after_a_restart(
    tmp_path: Path, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    k = key(request)
    path = tmp_path / "jobs.yaml"
    s = Scheduler(path, clock=clock)
    try:
        s.add_job(internal("once", k, start=T0 + timedelta(minutes=1), timezone="UTC"))
        s.start()
        step(s, clock, timedelta(minutes=1))
        assert len(jft.calls(k)) == 1
    finally:
        s.shutdown()
    again = Scheduler(path, clock=clock)
    try:
        again.start()
        step(again, clock, timedelta(days=1))
        assert len(jft.calls(k)) == 1
        assert again.next_run("once") is None
    finally:
        again.shutdown()


def test_an_on_demand_job_runs_only_when_asked_and_starts_its_dependents(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    k = key(request)
    scheduler.add_job(internal("ask", k + "ask", on_demand=True))
    scheduler.add_job(
        internal("after", k + "after", dependence=Dependence("ask", Event.SUCCESSFUL))
    )
    assert scheduler.get_job("ask").schedule_kind == "on_demand"
    assert scheduler.next_run("ask") is None
    scheduler.start()
    step(scheduler, clock, timedelta(days=30))
    assert jft.calls(k + "ask") == []
    scheduler.run_now("ask")
    step(scheduler, clock, timedelta(seconds=1))
    assert len(jft.calls(k + "ask")) == 1
    assert len(jft.calls(k + "after")) == 1  # as the parent of a dependence
    [run] = scheduler.history("ask")
    assert run.trigger == "run_now" and run.slot is None


def test_an_on_demand_job_may_be_paused(scheduler: Scheduler) -> None:
    scheduler.add_job(Job("ask", command="true", on_demand=True))
    scheduler.pause_job("ask")
    assert scheduler.pause_of("ask") is not None
    assert scheduler.next_run("ask") is None
    scheduler.resume_job("ask")
    assert scheduler.pause_of("ask") is None


@pytest.mark.parametrize(
    ("fields", "key", "words"),
    [
        ({"on_demand": True, "start": T0}, "on_demand", "an on-demand job has no schedule"),
        (
            {"on_demand": True, "cron": "0 3 * * *"},
            "on_demand",
            "not both cron and on_demand",
        ),
        (
            {"on_demand": True, "dependence": Dependence("p")},
            "on_demand",
            "not both dependence and on_demand",
        ),
        ({"on_demand": 1}, "on_demand", "on_demand must be true or false"),
        ({"start": T0, "stop": T0}, "stop", "a one-off job (start alone) runs once"),
        ({}, "dependence", "a job needs a schedule"),
        ({"stop": T0}, "dependence", "a job needs a schedule"),
    ],
)
def test_the_exactly_one_rule_names_job_and_key(
    fields: dict[str, Any], key: str, words: str
) -> None:
    with pytest.raises(InvalidJobError) as caught:
        Job("j", command="true", **fields)
    [problem] = caught.value.problems
    assert problem.job == "j" and problem.key == key and words in problem.message
