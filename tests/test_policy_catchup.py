"""`catch_up:` none, latest, all, catch_up_window — across a restart on a shared store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import policy_jobs as pj
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobscheduler import FakeClock, Job, JobType
from jobscheduler.policies.catchup import missed_slots
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import MemoryStateStore

T0 = datetime(2024, 1, 1, tzinfo=UTC)
WAIT = 60.0  # seconds: reached only when a test fails, even on a loaded machine
MINUTE = timedelta(minutes=1)


def job(name: str, key: str, **fields: Any) -> Job:
    return Job(
        name,
        type=JobType.INTERNAL,
        command=f"{pj.__name__}:ok",
        args={"key": key},
        start=T0 + MINUTE,
        interval="1 minute",
        timezone="UTC",
        **fields,
    )


def step(s: Scheduler, clock: FakeClock, delta: timedelta = MINUTE) -> None:
    clock.advance(delta)
    s._processor.run_due(clock.now())
    assert s.wait_idle(WAIT)


def run_then_restart(clock: FakeClock, definition: Job, down: timedelta) -> list[dict[str, Any]]:
    """Two slots run, the node is down for `down`, a new node starts on the same store; the
    runs of the new node's start (before any slot of its own)."""
    key = definition.args["key"]
    store = MemoryStateStore()
    with Scheduler(clock=clock, state=store) as first:
        first.add_job(definition)
        step(first, clock)
        step(first, clock)
    before = len(pj.calls(key))
    assert before == 2
    clock.advance(down)
    with Scheduler(clock=clock, state=store) as second:
        second.add_job(definition)
        second.stop()
        second.start()  # the start that looks at the missed slots
        assert second.wait_idle(WAIT)
    return pj.calls(key)[before:]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def test_none_is_the_default_and_makes_nothing_up(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    assert run_then_restart(clock, job("j", request.node.nodeid), 10 * MINUTE) == []


def test_latest_runs_once_for_the_last_missed_slot(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    made_up = run_then_restart(clock, job("j", request.node.nodeid, catch_up="latest"), 10 * MINUTE)
    # slots 1 and 2 ran; down from minute 2 to 12: slots 3..12 missed (12 is now)
    assert [(r["trigger"], r["slot"]) for r in made_up] == [("catch_up", T0 + 12 * MINUTE)]


def test_all_runs_each_missed_slot_within_the_window(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    definition = job("j", request.node.nodeid, catch_up="all", catch_up_window=timedelta(minutes=4))
    made_up = run_then_restart(clock, definition, 10 * MINUTE)
    assert sorted(r["slot"] for r in made_up) == [T0 + n * MINUTE for n in (8, 9, 10, 11, 12)]
    assert {r["trigger"] for r in made_up} == {"catch_up"}


def test_all_runs_one_after_another_oldest_first_within_max_instances(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    definition = job(
        "j",
        request.node.nodeid,
        catch_up="all",
        catch_up_window=timedelta(minutes=3),
        max_instances=1,
    )
    made_up = run_then_restart(clock, definition, 10 * MINUTE)
    assert [r["slot"] for r in made_up] == [T0 + n * MINUTE for n in (9, 10, 11, 12)]


def test_the_window_bounds_latest_too(clock: FakeClock, request: pytest.FixtureRequest) -> None:
    definition = job(
        "j", request.node.nodeid, catch_up="latest", catch_up_window=timedelta(seconds=30)
    )
    assert run_then_restart(clock, definition, 10 * MINUTE + timedelta(seconds=45)) == []


def test_a_job_without_a_mark_has_missed_nothing(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    s = Scheduler(clock=clock)
    try:
        s.add_job(job("j", key, catch_up="all"))
        clock.advance(10 * MINUTE)  # not started: no run, so no mark
        s.start()
        assert s.wait_idle(WAIT)
        mark = s.state_store.mark("j")  # from this start on, a downtime would be missed
        assert mark is not None and mark.last_slot == clock.now()
    finally:
        s.shutdown()
    assert pj.calls(key) == []


@given(
    after=st.integers(0, 500),
    length=st.integers(0, 500),
    window=st.none() | st.integers(1, 600),
    limit=st.integers(1, 50),
)
def test_missed_slots_are_after_the_mark_up_to_now_within_the_window(
    after: int, length: int, window: int | None, limit: int
) -> None:
    definition = Job("j", command="true", start=T0, interval="7 seconds", timezone="UTC")
    mark = T0 + timedelta(seconds=after)
    now = mark + timedelta(seconds=length)
    span = None if window is None else timedelta(seconds=window)
    found = missed_slots(definition, mark, now, window=span, limit=limit)
    every = [T0 + timedelta(seconds=7 * k) for k in range(200)]
    expected = [t for t in every if mark < t <= now and (span is None or t >= now - span)][-limit:]
    assert found == expected
