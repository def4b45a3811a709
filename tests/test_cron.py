"""`cron:` jobs: cronsim's slots, its refusals, its DST rules, and `start`/`stop` as inclusive
bounds (hypothesis against cronsim itself)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from cronsim import CronSim, CronSimError
from hypothesis import given, settings
from hypothesis import strategies as st

from jobscheduler import InvalidJobError, Job
from jobscheduler.triggers.cron import CronTrigger
from jobscheduler.triggers.zones import resolve_zone

BERLIN = resolve_zone("Europe/Berlin")
NEW_YORK = resolve_zone("America/New_York")


def cron(expression: str, zone: str = "Europe/Berlin", **fields: object) -> Job:
    return Job("c", command="true", cron=expression, timezone=zone, **fields)  # type: ignore[arg-type]


def walls(job: Job, after: datetime, count: int) -> list[str]:
    return [s.strftime("%m-%d %H:%M:%S %Z") for s in job.slots_after(after, count)]


def test_five_and_six_fields_names_l_w_and_hash() -> None:
    t = datetime(2026, 5, 3, 10, 17, tzinfo=UTC)
    assert walls(cron("0 3 * * *"), t, 2) == ["05-04 03:00:00 CEST", "05-05 03:00:00 CEST"]
    assert walls(cron("30 0 3 * * *"), t, 1) == ["05-04 03:00:30 CEST"]  # seconds first
    assert walls(cron("0 9 * * MON-FRI"), t, 2) == ["05-04 09:00:00 CEST", "05-05 09:00:00 CEST"]
    assert walls(cron("0 0 L * *"), t, 2) == ["05-31 00:00:00 CEST", "06-30 00:00:00 CEST"]
    assert walls(cron("0 0 LW * *"), t, 1) == ["05-29 00:00:00 CEST"]
    assert walls(cron("0 0 * * MON#2"), t, 1) == ["05-11 00:00:00 CEST"]
    assert walls(cron("0 0 * * 5L"), t, 1) == ["05-29 00:00:00 CEST"]
    assert walls(cron("0 0 1 JAN,jul *"), t, 1) == ["07-01 00:00:00 CEST"]


@pytest.mark.parametrize(
    "expression",
    ["", "0 3 * *", "0 3 * * * * *", "60 * * * *", "0 0 15W * *", "0 0 ? * *", "0 0 30 2 *"],
)
def test_what_cronsim_refuses_is_refused_at_validation(expression: str) -> None:
    with pytest.raises(InvalidJobError) as caught:
        cron(expression)
    [problem] = caught.value.problems
    assert problem.job == "c" and problem.key == "cron"
    if expression:
        with pytest.raises(CronSimError):
            CronSim(expression, datetime(2026, 1, 1))


def test_dst_rules_are_cronsims() -> None:
    """A fixed time in the gap runs right after it; a fixed time in the repeated hour runs
    once; a wildcard hour runs in both occurrences (docs/semantics.md)."""
    spring = datetime(2026, 3, 28, 12, tzinfo=UTC)
    assert walls(cron("30 2 * * *"), spring, 2) == ["03-29 03:00:00 CEST", "03-30 02:30:00 CEST"]
    autumn = datetime(2026, 10, 24, 12, tzinfo=UTC)
    assert walls(cron("30 2 * * *"), autumn, 2) == ["10-25 02:30:00 CEST", "10-26 02:30:00 CET"]
    hourly = [s for s in walls(cron("30 * * * *"), autumn, 16) if s.startswith("10-25 02")]
    assert hourly == ["10-25 02:30:00 CEST", "10-25 02:30:00 CET"]
    ny = datetime(2026, 10, 31, 12, tzinfo=UTC)
    assert walls(cron("30 1 * * *", "America/New_York"), ny, 2) == [
        "11-01 01:30:00 EDT",
        "11-02 01:30:00 EST",
    ]


def test_from_inside_the_repeated_hour_a_fixed_time_is_not_run_again() -> None:
    job = cron("45 2 * * *")
    second_occurrence = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)  # 02:10 CET
    slot = job.next_after(second_occurrence)
    assert slot is not None and slot.astimezone(UTC) == datetime(2026, 10, 26, 1, 45, tzinfo=UTC)


def test_start_and_stop_are_inclusive_bounds() -> None:
    start = datetime(2026, 6, 1, 3, 0)
    stop = datetime(2026, 6, 3, 3, 0)
    job = cron("0 3 * * *", start=start, stop=stop)
    slots = job.slots_after(datetime(2026, 1, 1, tzinfo=UTC), 10)
    assert [s.day for s in slots] == [1, 2, 3]
    assert job.stop_utc == stop.replace(tzinfo=BERLIN).astimezone(UTC)
    with pytest.raises(InvalidJobError) as caught:
        cron("0 3 * * *", start=stop, stop=start)
    assert caught.value.problems[0].key == "stop"


_FIELD = st.one_of(
    st.just("*"),
    st.integers(0, 59).map(str),
    st.tuples(st.integers(0, 29), st.integers(30, 59)).map(lambda p: f"{p[0]}-{p[1]}"),
    st.integers(1, 30).map(lambda n: f"*/{n}"),
)
_EXPRESSIONS = st.tuples(
    _FIELD,
    st.one_of(
        st.just("*"), st.integers(0, 23).map(str), st.integers(1, 12).map(lambda n: f"*/{n}")
    ),
    st.one_of(st.just("*"), st.integers(1, 28).map(str), st.just("L")),
    st.one_of(st.just("*"), st.integers(1, 12).map(str)),
    st.one_of(st.just("*"), st.just("MON-FRI"), st.integers(0, 6).map(str), st.just("SUN#1")),
).map(" ".join)
# DST changes of 2026 in Berlin and New York: instants around them are drawn often.
_TRANSITIONS = [
    datetime(2026, 3, 29, 1, tzinfo=UTC),
    datetime(2026, 10, 25, 1, tzinfo=UTC),
    datetime(2026, 3, 8, 7, tzinfo=UTC),
    datetime(2026, 11, 1, 6, tzinfo=UTC),
]
_INSTANTS = st.one_of(
    st.datetimes(datetime(2020, 1, 1), datetime(2035, 1, 1)).map(lambda d: d.replace(tzinfo=UTC)),
    st.tuples(st.sampled_from(_TRANSITIONS), st.integers(-2 * 86_400, 86_400)).map(
        lambda p: p[0] + timedelta(seconds=p[1])
    ),
)


@settings(max_examples=int(os.environ.get("CRON_EXAMPLES", "150")), deadline=None)
@given(
    expression=_EXPRESSIONS,
    zone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]),
    t=_INSTANTS,
)
def test_next_after_is_cronsims_next_slot_strictly_after(
    expression: str, zone: str, t: datetime
) -> None:
    job = cron(expression, zone)
    slot = job.next_after(t)
    local = t.astimezone(resolve_zone(zone))
    try:
        expected = next(CronSim(expression, local))
    except StopIteration:
        expected = None
    if expected is not None and expected.astimezone(UTC) <= t:
        # cronsim's wall-clock answer from inside a repeated hour: that slot had its turn.
        assert slot is None or slot.astimezone(UTC) > t
        return
    assert (slot is None) == (expected is None)
    if slot is not None and expected is not None:
        assert slot.astimezone(UTC) == expected.astimezone(UTC)
        assert slot.astimezone(UTC) > t


@settings(max_examples=80, deadline=None)
@given(
    expression=_EXPRESSIONS,
    t=_INSTANTS,
    start_after=st.integers(0, 86_400 * 40),
    length=st.integers(0, 86_400 * 60),
)
def test_slots_are_increasing_and_within_the_bounds(
    expression: str, t: datetime, start_after: int, length: int
) -> None:
    start = t + timedelta(seconds=start_after)
    stop = start + timedelta(seconds=length)
    job = cron(expression, "Europe/Berlin", start=start, stop=stop)
    bare = CronTrigger(expression, BERLIN)
    previous = t
    for slot in job.slots_after(t, 20):
        assert previous < slot
        assert start <= slot <= stop
        previous = slot
    first = job.next_after(t)
    expected = bare.next_after(max(t, start - timedelta(microseconds=1)))
    if expected is not None and expected > stop:
        expected = None
    assert first == expected
