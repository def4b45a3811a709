"""`missed_slots`: the slots of a schedule in an open stretch of time, checked against plain
stepping (hypothesis) and at its edges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobscheduler import Job
from jobscheduler.triggers.missed import MissedRange, missed_slots

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def every(seconds: int, stop: datetime | None = None) -> Job:
    return Job("j", command=["true"], start=T0, interval=f"{seconds} seconds", stop=stop)


def stepped(job: Job, after: datetime, before: datetime) -> list[datetime]:
    slots = []
    slot = job.next_after(after)
    while slot is not None and slot < before:
        slots.append(slot)
        slot = job.next_after(slot)
    return slots


@settings(deadline=None)  # a loaded machine must not fail it
@given(
    st.integers(1, 3600),
    st.integers(-10_000, 100_000),
    st.integers(0, 100_000),
    st.integers(1, 500),
)
def test_the_range_is_the_slots_strictly_between(
    step: int, after_s: int, length_s: int, limit: int
) -> None:
    job = every(step)
    after = T0 + timedelta(seconds=after_s)
    before = after + timedelta(seconds=length_s)
    slots = stepped(job, after, before)
    found = missed_slots(job, after, before, limit)
    if not slots:
        assert found is None
        return
    assert found is not None
    assert found.first == slots[0]
    if len(slots) <= limit:
        assert (found.last, found.count, found.complete) == (slots[-1], len(slots), True)
    else:
        assert (found.last, found.count, found.complete) == (slots[limit - 1], limit, False)


def test_edges() -> None:
    job = every(60)
    # a slot equal to `before` is due now, not missed; one equal to `after` was handled
    assert missed_slots(job, T0, T0 + timedelta(minutes=1)) is None
    assert missed_slots(job, T0, T0 + timedelta(minutes=1, seconds=1)) == MissedRange(
        T0 + timedelta(minutes=1), T0 + timedelta(minutes=1), 1
    )
    assert missed_slots(job, T0 + timedelta(hours=1), T0) is None
    stopped = every(60, stop=T0 + timedelta(minutes=3))
    found = missed_slots(stopped, T0, T0 + timedelta(days=1))
    assert found is not None and (found.count, found.last) == (3, T0 + timedelta(minutes=3))
    assert found.describe() == "3 slots missed"
    assert MissedRange(T0, T0, 1).describe() == "1 slot missed"
    assert MissedRange(T0, T0, 5, complete=False).describe() == "at least 5 slots missed"
    with pytest.raises(ValueError, match="limit"):
        missed_slots(job, T0, T0, 0)
