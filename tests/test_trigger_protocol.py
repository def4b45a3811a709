"""The `Trigger` protocol (`triggers.base`) and what the engine reads of a job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

import jobscheduler
from jobscheduler.model.job import Dependence, Job
from jobscheduler.triggers.base import IndexedTrigger, Trigger, slots_between
from jobscheduler.triggers.interval import Interval, IntervalTrigger, Unit

T0 = datetime(2024, 1, 31, 2, 30, tzinfo=UTC)


class Stepping:
    """A trigger that only knows `next_after` (as a cron or calendar trigger would)."""

    def __init__(self, inner: IntervalTrigger) -> None:
        self.inner = inner

    def next_after(self, t: datetime) -> datetime | None:
        return self.inner.next_after(t)


def test_the_public_name_is_the_protocol() -> None:
    assert jobscheduler.Trigger is Trigger
    trigger = IntervalTrigger(T0, Interval(1, Unit.DAY), UTC)
    assert isinstance(trigger, Trigger) and isinstance(trigger, IndexedTrigger)
    assert isinstance(Stepping(trigger), Trigger)
    assert not isinstance(Stepping(trigger), IndexedTrigger)
    job = Job("j", command="true", start=T0, interval="1 day", timezone="UTC")
    assert isinstance(job, Trigger)  # what the engine asks: job.next_after(t)


_ROUGHLY = {"1 second": 1, "7 minutes": 420, "1 day": 86_400, "1 month": 2_600_000}


@given(
    st.sampled_from(sorted(_ROUGHLY)),
    st.integers(-100, 10_000),
    st.integers(0, 60),
    st.integers(-3_600, 3_600),
)
def test_slots_between_counts_the_same_by_index_and_by_steps(
    every: str, start: int, steps: int, jitter: int
) -> None:
    interval = Interval.parse(every)
    trigger = IntervalTrigger(T0, interval, ZoneInfo("Europe/Berlin"))
    after = T0 + timedelta(seconds=start * _ROUGHLY[every] + jitter)
    until = after + timedelta(seconds=steps * _ROUGHLY[every])
    by_index = slots_between(trigger, after, until)
    by_steps = slots_between(Stepping(trigger), after, until, limit=10**9)
    assert by_index == by_steps
    assert slots_between(Stepping(trigger), after, until, limit=3) == min(by_steps, 3)


def test_the_engine_reads_a_jobs_zone_and_end_through_public_views() -> None:
    berlin = Job(
        "b", command="true", start=T0, stop=datetime(2024, 3, 1), interval="1 day",
        timezone="Europe/Berlin",
    )  # fmt: skip
    assert berlin.zone is ZoneInfo("Europe/Berlin")
    assert berlin.stop_utc == datetime(2024, 2, 29, 23, 0, tzinfo=UTC)
    assert berlin.stop_utc is not None and berlin.stop_utc.tzinfo is UTC
    dependent = Job("d", command="true", dependence=Dependence("b"), timezone="UTC")
    assert dependent.zone is UTC and dependent.stop_utc is None
    open_ended = berlin.with_changes(stop=None)
    assert open_ended.stop_utc is None
    assert berlin.same_schedule(berlin.with_changes(command="false", priority=3))
    assert not berlin.same_schedule(open_ended)
    assert not berlin.same_schedule(berlin.with_changes(timezone="UTC"))
