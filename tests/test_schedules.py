"""Schedule arithmetic: intervals, anchored slots, month ends, stop, and properties.

The DST tables are in test_dst.py; the properties here cover DST zones too, against a slow
reference that steps slot by slot and reads wall times by brute force.
"""

from __future__ import annotations

import calendar
import itertools
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jobscheduler import Interval, Job, JobActionError, Unit
from jobscheduler.triggers.interval import IntervalError, IntervalTrigger, add_months, days_in_month
from jobscheduler.triggers.zones import localize, wall_time

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def job(
    start: datetime,
    interval: str,
    *,
    stop: datetime | None = None,
    timezone: str = "UTC",
) -> Job:
    return Job("j", command="true", start=start, stop=stop, interval=interval, timezone=timezone)


def utc(dt: datetime | None) -> datetime | None:
    """An instant in UTC, for comparing: Python never finds a datetime inside a fold equal to
    one in another zone, and compares two of one zone by their wall fields alone."""
    return None if dt is None else dt.astimezone(UTC)


def naive(slots: list[datetime]) -> list[datetime]:
    """Slots as wall times (the tests' tables are written in the job's zone)."""
    return [s.replace(tzinfo=None) for s in slots]


# -- Interval ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90 minutes", Interval(90, Unit.MINUTE)),
        ("1 minute", Interval(1, Unit.MINUTE)),
        ("1 day", Interval(1, Unit.DAY)),
        ("2 days", Interval(2, Unit.DAY)),
        ("2 weeks", Interval(2, Unit.WEEK)),
        ("1 week", Interval(1, Unit.WEEK)),
        ("3 months", Interval(3, Unit.MONTH)),
        ("1 year", Interval(1, Unit.YEAR)),
        ("10 years", Interval(10, Unit.YEAR)),
        ("12 hours", Interval(12, Unit.HOUR)),
        ("1 second", Interval(1, Unit.SECOND)),
        ("1h", Interval(1, Unit.HOUR)),
        ("30s", Interval(30, Unit.SECOND)),
        ("5 min", Interval(5, Unit.MINUTE)),
        ("  4   DAYS ", Interval(4, Unit.DAY)),
        ("every 3 months", Interval(3, Unit.MONTH)),
        ("1 mo", Interval(1, Unit.MONTH)),
    ],
)
def test_interval_parse(text: str, expected: Interval) -> None:
    assert Interval.parse(text) == expected


@pytest.mark.parametrize(
    ("interval", "text"),
    [
        (Interval(1, Unit.DAY), "1 day"),
        (Interval(2, Unit.WEEK), "2 weeks"),
        (Interval(90, Unit.MINUTE), "90 minutes"),
        (Interval(1, Unit.YEAR), "1 year"),
    ],
)
def test_interval_string_form(interval: Interval, text: str) -> None:
    assert str(interval) == text


def test_interval_unit_given_as_text() -> None:
    assert Interval(2, "hours") == Interval(2, Unit.HOUR)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0 days", "interval value must be above 0, not 0"),
        ("-1 day", "interval value must be above 0, not -1"),
        ("3 fortnights", "unknown interval unit 'fortnights'"),
        ("3 m", "'m' is ambiguous"),
        ("day", "is not '<number> <unit>'"),
        ("1.5 days", "is not '<number> <unit>'"),
        ("", "is not '<number> <unit>'"),
    ],
)
def test_interval_parse_refuses(text: str, message: str) -> None:
    with pytest.raises(IntervalError) as caught:
        Interval.parse(text)
    assert message in caught.value.problem.message
    assert caught.value.problem.key == "interval"
    # Both a JobActionError (the specification's invalid job) and a ValueError.
    assert isinstance(caught.value, JobActionError)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("value", "unit", "message"),
    [
        (0, Unit.DAY, "interval value must be above 0, not 0"),
        (-5, Unit.SECOND, "interval value must be above 0, not -5"),
        (1.5, Unit.DAY, "interval value must be a whole number, not 1.5"),
        (True, Unit.DAY, "interval value must be a whole number, not True"),
        (1, "weekday", "unknown interval unit 'weekday'"),
        (1, 7, "interval unit must be a Unit, not 7"),
    ],
)
def test_interval_refuses(value: object, unit: object, message: str) -> None:
    with pytest.raises(IntervalError) as caught:
        Interval(value, unit)  # type: ignore[arg-type]
    assert message in caught.value.problem.message


@given(st.integers(1, 10_000), st.sampled_from(list(Unit)))
@PROPERTY
def test_interval_round_trip(value: int, unit: Unit) -> None:
    interval = Interval(value, unit)
    assert Interval.parse(str(interval)) == interval
    assert Interval.parse(str(interval).upper()) == interval


@pytest.mark.parametrize(
    ("value", "unit"),
    [(10_001, Unit.YEAR), (120_001, Unit.MONTH), (10**22, Unit.SECOND), (99999999999, Unit.YEAR)],
)
def test_an_interval_longer_than_the_range_of_dates_is_refused(value: int, unit: Unit) -> None:
    with pytest.raises(IntervalError, match="longer than 10,000 years"):
        Interval(value, unit)
    assert Interval(10_000, Unit.YEAR).months == 120_000  # the longest one is fine


# -- the specification's examples -------------------------------------------------------


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/New_York"])
def test_spec_job_a_next_run_after_start_up(zone: str) -> None:
    """§1.3.2 Job A: hourly from 01 March 01:00; started 03 March 03:05 → 04:00."""
    a = job(datetime(2003, 3, 1, 1, 0), "1 hour", timezone=zone)
    assert naive([a.next_after(datetime(2003, 3, 3, 3, 5))]) == [  # type: ignore[list-item]
        datetime(2003, 3, 3, 4, 0)
    ]
    # It runs for a day: 04:00 on 03 March to 04:00 on 04 March, hour by hour.
    day = a.slots_after(datetime(2003, 3, 3, 3, 5), 25)
    assert naive(day) == [datetime(2003, 3, 3, 4) + timedelta(hours=h) for h in range(25)]
    # Shut down at 04:05 on 04 March, restarted at 07:30: 05:00, 06:00, 07:00 are not made up.
    assert a.next_after(datetime(2003, 3, 4, 7, 30)) == a.next_after(
        datetime(2003, 3, 4, 7, 59, 59, 999999)
    )
    nxt = a.next_after(datetime(2003, 3, 4, 7, 30))
    assert nxt is not None and nxt.replace(tzinfo=None) == datetime(2003, 3, 4, 8, 0)


def test_spec_job_b_recomputed_from_definition_not_log() -> None:
    """§1.3.2 Job B: every 30 minutes from 01 March 02:00, last launched 03 March 03:30;
    changed offline to 1 hour and restarted at 03:45 → 04:00 (not 03:30 + 1 h = 04:30)."""
    b = job(datetime(2003, 3, 1, 2, 0), "30 minutes")
    last_logged = datetime(2003, 3, 3, 3, 30, tzinfo=UTC)
    assert b.next_after(last_logged - timedelta(seconds=1)) == last_logged
    changed = b.with_changes(interval=Interval(1, Unit.HOUR))
    restart = datetime(2003, 3, 3, 3, 45, tzinfo=UTC)
    assert changed.next_after(restart) == datetime(2003, 3, 3, 4, 0, tzinfo=UTC)
    assert changed.next_after(restart) != last_logged + timedelta(hours=1)


def test_spec_data_item_example_five_runs_up_to_stop() -> None:
    """§1.6.1: start 01 March 03:15, stop 01 March 07:30, every hour → 03:15 … 07:15."""
    j = job(datetime(2003, 3, 1, 3, 15), "1 hour", stop=datetime(2003, 3, 1, 7, 30))
    runs = j.slots_after(datetime(2003, 2, 27), 100)
    assert naive(runs) == [
        datetime(2003, 3, 1, 3, 15),
        datetime(2003, 3, 1, 4, 15),
        datetime(2003, 3, 1, 5, 15),
        datetime(2003, 3, 1, 6, 15),
        datetime(2003, 3, 1, 7, 15),
    ]
    assert j.next_after(datetime(2003, 3, 1, 7, 15)) is None
    assert j.next_after(datetime(2003, 3, 2)) is None


def test_design_example_nightly_cleanup() -> None:
    j = job(
        datetime(2003, 5, 10, 1, 0),
        "1 day",
        stop=datetime(2004, 5, 10, 1, 0),
        timezone="Europe/Berlin",
    )
    assert naive(j.slots_after(datetime(2003, 5, 9), 2)) == [
        datetime(2003, 5, 10, 1),
        datetime(2003, 5, 11, 1),
    ]
    assert naive(j.slots_after(datetime(2004, 5, 9, 1), 5)) == [datetime(2004, 5, 10, 1)]


# -- anchoring and stop ---------------------------------------------------------------


def test_first_slot_is_start_when_asked_before_it() -> None:
    start = datetime(2030, 1, 1, 12, tzinfo=UTC)
    for interval in ("1 second", "1 day", "1 month"):
        j = job(start, interval)
        assert j.next_after(datetime(1999, 1, 1, tzinfo=UTC)) == start
        assert j.next_after(start - timedelta(microseconds=1)) == start


def test_next_after_is_strictly_after() -> None:
    j = job(datetime(2024, 1, 1, tzinfo=UTC), "1 day")
    assert j.next_after(datetime(2024, 1, 1, tzinfo=UTC)) == datetime(2024, 1, 2, tzinfo=UTC)
    just_before = datetime(2024, 1, 1, 23, 59, 59, 999999, tzinfo=UTC)
    assert j.next_after(just_before) == datetime(2024, 1, 2, tzinfo=UTC)


def test_slots_are_anchored_at_start_not_at_now() -> None:
    """Asked at any time, the answer lies on the start's grid: 00:00:07 + k × 90 minutes."""
    j = job(datetime(2024, 1, 1, 0, 0, 7, tzinfo=UTC), "90 minutes")
    for minutes in (1, 89, 91, 1000, 52_560_000):
        t = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes, seconds=13)
        slot = j.next_after(t)
        assert slot is not None
        _, rest = divmod(slot - datetime(2024, 1, 1, 0, 0, 7, tzinfo=UTC), timedelta(minutes=90))
        assert rest == timedelta(0) and slot > t and slot - t <= timedelta(minutes=90)


def test_stop_is_inclusive() -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    stop = datetime(2024, 1, 5, tzinfo=UTC)
    j = job(start, "1 day", stop=stop)
    assert j.next_after(datetime(2024, 1, 4, 12, tzinfo=UTC)) == stop
    assert j.next_after(stop) is None
    # A stop between two slots: the last slot before it is the last one.
    j = job(start, "1 day", stop=stop - timedelta(seconds=1))
    assert j.next_after(datetime(2024, 1, 3, 12, tzinfo=UTC)) == datetime(2024, 1, 4, tzinfo=UTC)
    assert j.next_after(datetime(2024, 1, 4, tzinfo=UTC)) is None


def test_stop_equal_to_start_runs_once() -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    j = job(start, "1 second", stop=start)
    assert j.slots_after(datetime(2023, 1, 1, tzinfo=UTC), 5) == [start]


def test_stop_compared_as_an_instant_in_any_zone() -> None:
    """A stop given in another zone is the same instant: 07:15 UTC = 08:15 Berlin (winter)."""
    j = job(
        datetime(2024, 1, 10, 6, 15),
        "1 hour",
        stop=datetime(2024, 1, 10, 7, 15, tzinfo=UTC),
        timezone="Europe/Berlin",
    )
    assert naive(j.slots_after(datetime(2024, 1, 10), 10)) == [
        datetime(2024, 1, 10, 6, 15),
        datetime(2024, 1, 10, 7, 15),
        datetime(2024, 1, 10, 8, 15),
    ]


def test_dependent_job_has_no_slots() -> None:
    from jobscheduler import Dependence

    j = Job("d", command="true", dependence=Dependence("parent"))
    assert j.next_after(datetime(2024, 1, 1, tzinfo=UTC)) is None
    assert j.trigger is None
    assert j.slots_after(datetime(2024, 1, 1, tzinfo=UTC), 3) == []


def test_disabled_job_still_has_slots() -> None:
    j = job(datetime(2024, 1, 1, tzinfo=UTC), "1 day").with_changes(enabled=False)
    assert j.next_after(datetime(2024, 1, 1, tzinfo=UTC)) == datetime(2024, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize("interval", ["1 second", "1 hour", "1 day", "1 week", "1 month", "1 year"])
def test_no_slot_past_year_9999(interval: str) -> None:
    j = job(datetime(2024, 1, 1), interval, timezone="Europe/Berlin")
    assert j.next_after(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)) is None
    assert j.next_after(datetime(9999, 12, 31, 23, 59, 59)) is None


def test_naive_times_are_read_in_the_jobs_zone_and_results_are_aware() -> None:
    j = job(datetime(2024, 1, 1, 9, 0), "1 day", timezone="America/New_York")
    assert j.start == datetime(2024, 1, 1, 14, 0, tzinfo=UTC)
    slot = j.next_after(datetime(2024, 6, 1, 9, 0))  # 09:00 New York, not 09:00 UTC
    assert slot is not None
    assert slot.tzinfo is not None
    assert slot.tzinfo == ZoneInfo("America/New_York")
    assert slot.isoformat() == "2024-06-02T09:00:00-04:00"
    # The same instant given aware, in any zone, gives the same answer.
    assert j.next_after(datetime(2024, 6, 1, 13, 0, tzinfo=UTC)) == slot
    # 08:59 New York is before that day's slot.
    assert j.next_after(datetime(2024, 6, 1, 8, 59)) == datetime(
        2024, 6, 1, 9, 0, tzinfo=ZoneInfo("America/New_York")
    )


def test_trigger_refuses_naive_times() -> None:
    trigger = IntervalTrigger(datetime(2024, 1, 1, tzinfo=UTC), Interval(1, Unit.DAY), UTC)
    with pytest.raises(ValueError, match="aware"):
        trigger.next_after(datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="aware"):
        IntervalTrigger(datetime(2024, 1, 1), Interval(1, Unit.DAY), UTC)


# -- month ends and leap days ---------------------------------------------------------


def test_monthly_on_the_31st_clamps_without_drifting() -> None:
    j = job(datetime(2024, 1, 31, 10, 0), "1 month")
    assert naive(j.slots_after(datetime(2024, 1, 1), 14)) == [
        datetime(2024, 1, 31, 10),
        datetime(2024, 2, 29, 10),
        datetime(2024, 3, 31, 10),
        datetime(2024, 4, 30, 10),
        datetime(2024, 5, 31, 10),
        datetime(2024, 6, 30, 10),
        datetime(2024, 7, 31, 10),
        datetime(2024, 8, 31, 10),
        datetime(2024, 9, 30, 10),
        datetime(2024, 10, 31, 10),
        datetime(2024, 11, 30, 10),
        datetime(2024, 12, 31, 10),
        datetime(2025, 1, 31, 10),
        datetime(2025, 2, 28, 10),
    ]


@pytest.mark.parametrize(
    ("start", "interval", "expected"),
    [
        # 30 January: only February is short.
        (
            datetime(2023, 1, 30),
            "1 month",
            [datetime(2023, 1, 30), datetime(2023, 2, 28), datetime(2023, 3, 30)],
        ),
        # 31 March: April is short, May is not.
        (
            datetime(2025, 3, 31),
            "1 month",
            [datetime(2025, 3, 31), datetime(2025, 4, 30), datetime(2025, 5, 31)],
        ),
        # Quarterly from 31 August: 30 November, 29 February (leap), 31 May.
        (
            datetime(2023, 8, 31),
            "3 months",
            [
                datetime(2023, 8, 31),
                datetime(2023, 11, 30),
                datetime(2024, 2, 29),
                datetime(2024, 5, 31),
                datetime(2024, 8, 31),
            ],
        ),
        # Every 13 months crosses years.
        (
            datetime(2023, 12, 31),
            "13 months",
            [datetime(2023, 12, 31), datetime(2025, 1, 31), datetime(2026, 2, 28)],
        ),
        # 29 February yearly: 28 February in common years, 29 February again in leap years.
        (
            datetime(2024, 2, 29, 6),
            "1 year",
            [
                datetime(2024, 2, 29, 6),
                datetime(2025, 2, 28, 6),
                datetime(2026, 2, 28, 6),
                datetime(2027, 2, 28, 6),
                datetime(2028, 2, 29, 6),
                datetime(2029, 2, 28, 6),
            ],
        ),
        # Century rules: 2100 is not a leap year, 2000 is.
        (
            datetime(2096, 2, 29),
            "4 years",
            [datetime(2096, 2, 29), datetime(2100, 2, 28), datetime(2104, 2, 29)],
        ),
        (
            datetime(1996, 2, 29),
            "2 years",
            [datetime(1996, 2, 29), datetime(1998, 2, 28), datetime(2000, 2, 29)],
        ),
        # 29 February monthly: 29th in every month after, 28th only in common Februaries.
        (
            datetime(2024, 2, 29),
            "12 months",
            [datetime(2024, 2, 29), datetime(2025, 2, 28), datetime(2026, 2, 28)],
        ),
        (
            datetime(2024, 2, 29),
            "1 month",
            [datetime(2024, 2, 29), datetime(2024, 3, 29), datetime(2024, 4, 29)],
        ),
    ],
)
def test_month_end_and_leap_day_table(
    start: datetime, interval: str, expected: list[datetime]
) -> None:
    j = job(start, interval, timezone="Europe/Berlin")
    assert naive(j.slots_after(start - timedelta(seconds=1), len(expected))) == expected


def test_monthly_job_started_in_1900_answers_in_the_right_month() -> None:
    j = job(datetime(1900, 1, 31, 2, 30), "1 month", timezone="Europe/Berlin")
    assert naive(j.slots_after(datetime(2026, 2, 1), 3)) == [
        datetime(2026, 2, 28, 2, 30),
        datetime(2026, 3, 31, 2, 30),
        datetime(2026, 4, 30, 2, 30),
    ]
    # 31 March 2024, 02:30 is inside Berlin's spring-forward gap: the first instant after it.
    slot = j.next_after(datetime(2024, 3, 1))
    assert slot is not None and slot.isoformat() == "2024-03-31T03:00:00+02:00"


def test_add_months_and_days_in_month() -> None:
    assert add_months(datetime(2024, 1, 31, 5), 1, 31) == datetime(2024, 2, 29, 5)
    assert add_months(datetime(2024, 2, 29, 5), 1, 31) == datetime(2024, 3, 31, 5)
    assert add_months(datetime(2024, 1, 15), -2, 31) == datetime(2023, 11, 30)
    assert [days_in_month(2023, m) for m in range(1, 13)] == [
        31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31,
    ]  # fmt: skip
    assert days_in_month(2024, 2) == 29
    assert days_in_month(1900, 2) == 28
    assert days_in_month(2000, 2) == 29


# -- cost: the index is computed, never stepped to ----------------------------------------


def test_next_after_never_steps_one_slot_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """However old the job, next_after evaluates a handful of slots at most."""
    calls = 0
    real_slot = IntervalTrigger.slot

    def counting(self: IntervalTrigger, k: int) -> datetime:
        nonlocal calls
        calls += 1
        return real_slot(self, k)

    monkeypatch.setattr(IntervalTrigger, "slot", counting)
    cases = [
        job(datetime(2003, 5, 10, 1), "1 second", timezone="Europe/Berlin"),
        job(datetime(1900, 1, 31, 2, 30), "1 month", timezone="Europe/Berlin"),
        job(datetime(1900, 1, 1, 2, 30), "1 day", timezone="America/New_York"),
        job(datetime(1904, 2, 29, 1, 45), "1 year", timezone="Australia/Lord_Howe"),
    ]
    probes = [datetime(2026, 11, 21, 23, 22, 37, tzinfo=UTC)]
    # Second occurrences of ambiguous times take the careful path: still a step or two.
    probes.append(datetime(2024, 10, 27, 2, 40, tzinfo=ZoneInfo("Europe/Berlin"), fold=1))
    probes.append(datetime(2024, 11, 3, 1, 40, tzinfo=ZoneInfo("America/New_York"), fold=1))
    probes.append(datetime(2024, 4, 7, 1, 50, tzinfo=ZoneInfo("Australia/Lord_Howe"), fold=1))
    for j in cases:
        for t in probes:
            calls = 0
            assert j.next_after(t) is not None
            assert calls <= 3, (j.interval, t, calls)


# -- properties, against a slow reference -------------------------------------------------

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",  # DST at midnight until 2019: the gap swallows 00:00
    "Pacific/Chatham",  # +12:45 / +13:45
    "Asia/Kolkata",
]


def _transitions(zone: tzinfo, first_year: int, last_year: int) -> list[datetime]:
    """The UTC instants at which `zone` changes offset, found by scanning and bisection."""
    found: list[datetime] = []
    t = datetime(first_year, 1, 1, tzinfo=UTC)
    end = datetime(last_year + 1, 1, 1, tzinfo=UTC)
    step = timedelta(hours=12)
    while t < end:
        if t.astimezone(zone).utcoffset() != (t + step).astimezone(zone).utcoffset():
            lo, hi = t, t + step
            while hi - lo > timedelta(seconds=1):
                mid = lo + (hi - lo) / 2
                mid = mid.replace(microsecond=0)
                if mid.astimezone(zone).utcoffset() == lo.astimezone(zone).utcoffset():
                    lo = mid
                else:
                    hi = mid
            found.append(hi)
        t += step
    return found


TRANSITIONS = {name: _transitions(ZoneInfo(name), 1990, 2030) for name in ZONES}


def _showing(wall: datetime, zone: tzinfo) -> list[datetime]:
    """Every UTC instant at which a clock in `zone` shows `wall`."""
    offsets = {wall.replace(tzinfo=zone, fold=fold).utcoffset() for fold in (0, 1)}
    offsets |= {(wall + timedelta(days=d)).replace(tzinfo=zone).utcoffset() for d in (-2, 2)}
    shown = []
    for offset in offsets:
        assert offset is not None
        instant = (wall - offset).replace(tzinfo=UTC)
        if instant.astimezone(zone).replace(tzinfo=None) == wall:
            shown.append(instant)
    return shown


def ref_localize(wall: datetime, zone: tzinfo) -> datetime:
    """Brute force: the earliest instant showing `wall`, else the first wall time after it
    that exists (whole minutes: every transition of the zones above falls on one)."""
    shown = _showing(wall, zone)
    later = wall.replace(second=0, microsecond=0)
    for _ in range(24 * 60):
        if shown:
            return min(shown)
        later += timedelta(minutes=1)
        shown = _showing(later, zone)
    raise LookupError(wall)


def ref_wall(start_wall: datetime, interval: Interval, k: int) -> datetime:
    """Slot k's wall time, stepping month by month or day by day from the start."""
    if interval.months:
        year, month = start_wall.year, start_wall.month
        for _ in range(k * interval.months):
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        day = min(start_wall.day, calendar.monthrange(year, month)[1])
        return start_wall.replace(year=year, month=month, day=day)
    wall = start_wall
    for _ in range(k):
        wall += timedelta(days=interval.days)
    return wall


def ref_slot(j: Job, k: int) -> datetime:
    """Slot k in UTC, from the definition alone."""
    assert j.start is not None and j.interval is not None
    start = j.start.astimezone(UTC)
    if k == 0:
        return start
    elapsed = j.interval.elapsed
    if elapsed is not None:
        return start + elapsed * k
    start_wall = start.astimezone(j.zone).replace(tzinfo=None)
    return ref_localize(ref_wall(start_wall, j.interval, k), j.zone)


def ref_next_after(j: Job, t: datetime, limit: int = 50_000) -> datetime | None:
    """Step slot by slot until one is after `t`."""
    t = t.astimezone(UTC)
    for k in range(limit):
        slot = ref_slot(j, k)
        if slot > t:
            if j.stop is not None and slot > j.stop.astimezone(UTC):
                return None
            return slot
    raise AssertionError("reference ran out of steps")


UNITS_SMALL = {
    Unit.SECOND: 5000,
    Unit.MINUTE: 3000,
    Unit.HOUR: 200,
    Unit.DAY: 120,
    Unit.WEEK: 40,
    Unit.MONTH: 40,
    Unit.YEAR: 12,
}


# Minutes from a transition: either side of a 30- or 60-minute gap or fold, and its edges.
NEAR_MINUTES = st.one_of(
    st.sampled_from([-90, -61, -60, -59, -45, -31, -30, -29, -15, -1, 0, 1, 15, 29, 30, 31, 59]),
    st.integers(-180, 180),
)


@st.composite
def jobs_and_times(draw: st.DrawFn) -> tuple[Job, datetime]:
    """A job and an instant a few hundred slots at most after its start, often near a DST
    transition (both the start's wall time and the probed instant)."""
    zone_name = draw(st.sampled_from(ZONES))
    zone = ZoneInfo(zone_name)
    unit = draw(st.sampled_from(list(Unit)))
    value = draw(st.integers(1, 3 if unit in (Unit.YEAR, Unit.WEEK) else 7))
    interval = Interval(value, unit)
    transitions = TRANSITIONS[zone_name]
    if transitions and draw(st.booleans()):
        near = draw(st.sampled_from(transitions))
        probe = near + timedelta(minutes=draw(NEAR_MINUTES))
        span = draw(st.integers(0, UNITS_SMALL[unit] // 2))
        # Start some slots before the probe, at a wall time close to the transition's.
        start_wall = wall_time(near, zone) + timedelta(minutes=draw(NEAR_MINUTES))
        if interval.months:
            start_wall = add_months(start_wall, -span * interval.months, start_wall.day)
        elif interval.days:
            start_wall -= timedelta(days=span * interval.days)
        else:
            start_wall -= (interval.elapsed or timedelta(0)) * span
    else:
        start_wall = draw(
            st.datetimes(datetime(1991, 1, 1), datetime(2029, 1, 1)).map(
                lambda d: d.replace(microsecond=0)
            )
        )
        if draw(st.booleans()):
            last = days_in_month(start_wall.year, start_wall.month)
            start_wall = start_wall.replace(day=last)
        probe_offset = draw(st.integers(-3, UNITS_SMALL[unit]))
        base = localize(start_wall, zone).astimezone(UTC)
        if interval.elapsed is not None:
            probe = base + interval.elapsed * probe_offset
        elif interval.months:
            probe = base + timedelta(days=31 * interval.months * max(probe_offset, -1))
        else:
            probe = base + timedelta(days=interval.days * probe_offset)
        probe += timedelta(seconds=draw(st.integers(-7200, 7200)))
    assume(datetime(1990, 1, 1) < start_wall < datetime(2031, 1, 1))
    stop = None
    if draw(st.integers(0, 3)) == 0:
        stop = probe + timedelta(seconds=draw(st.integers(-3600 * 24 * 40, 3600 * 24 * 40)))
        assume(stop > localize(start_wall, zone))
    j = Job("p", command="true", start=start_wall, interval=interval, timezone=zone_name, stop=stop)
    return j, probe


@given(jobs_and_times())
@PROPERTY
def test_next_after_agrees_with_slow_reference(case: tuple[Job, datetime]) -> None:
    j, t = case
    got = j.next_after(t)
    want = ref_next_after(j, t)
    assert (got is None) == (want is None), (got, want)
    if got is not None:
        assert got.astimezone(UTC) == want
        assert got.astimezone(UTC) > t.astimezone(UTC)
        assert got.utcoffset() == got.tzinfo.utcoffset(got)  # type: ignore[union-attr]
        assert got.tzinfo == j.zone


@given(jobs_and_times(), st.sampled_from([0, 1]))
@PROPERTY
def test_probe_in_the_jobs_own_zone_with_either_fold(case: tuple[Job, datetime], fold: int) -> None:
    """Python compares datetimes sharing a tzinfo by wall fields: the second occurrence of an
    ambiguous time must still be treated as the later instant."""
    j, t = case
    local = t.astimezone(j.zone).replace(fold=fold)
    got = j.next_after(local)
    want = ref_next_after(j, local)
    assert utc(got) == want


FALL_BACKS = {
    name: [
        t
        for t in found
        if (t - timedelta(seconds=1)).astimezone(ZoneInfo(name)).utcoffset()
        > t.astimezone(ZoneInfo(name)).utcoffset()  # type: ignore[operator]
    ]
    for name, found in TRANSITIONS.items()
    if found
}


@st.composite
def second_occurrences(draw: st.DrawFn) -> tuple[Job, datetime]:
    """A calendar-unit job whose slot lies in a fold, and an instant in the fold's second pass,
    given in the job's own zone (so Python would compare them by wall fields)."""
    zone_name = draw(st.sampled_from(sorted(FALL_BACKS)))
    zone = ZoneInfo(zone_name)
    end = draw(st.sampled_from(FALL_BACKS[zone_name]))  # first instant of the second pass
    before = (end - timedelta(seconds=1)).astimezone(zone).utcoffset()
    after = end.astimezone(zone).utcoffset()
    assert before is not None and after is not None
    fold = int((before - after).total_seconds()) // 60
    t = (end + timedelta(minutes=draw(st.integers(0, fold - 1)))).astimezone(zone)
    assert t.fold == 1
    interval = Interval(draw(st.integers(1, 2)), draw(st.sampled_from([Unit.DAY, Unit.WEEK])))
    if draw(st.booleans()):
        interval = Interval(draw(st.sampled_from([1, 12])), Unit.MONTH)
    wall = wall_time(end, zone) + timedelta(minutes=draw(st.integers(-5, fold + 5)))
    back = draw(st.integers(0, 3))
    if interval.months:
        start_wall = add_months(wall, -back * interval.months, wall.day)
    else:
        start_wall = wall - timedelta(days=back * interval.days)
    j = Job("f", command="true", start=start_wall, interval=interval, timezone=zone_name)
    return j, t


@given(second_occurrences())
@PROPERTY
def test_second_occurrence_in_the_jobs_zone_agrees_with_reference(
    case: tuple[Job, datetime],
) -> None:
    j, t = case
    got = j.next_after(t)
    assert utc(got) == ref_next_after(j, t)
    assert utc(got) > utc(t)  # type: ignore[operator]


@given(jobs_and_times())
@PROPERTY
def test_slots_are_start_plus_k_intervals_in_the_right_clock(case: tuple[Job, datetime]) -> None:
    j, _ = case
    trigger = j.trigger
    assert trigger is not None and j.start is not None and j.interval is not None
    start_utc = j.start.astimezone(UTC)
    start_wall = start_utc.astimezone(j.zone).replace(tzinfo=None)
    previous = None
    for k in range(6):
        slot = trigger.slot(k)
        slot_utc = slot.astimezone(UTC)
        if j.interval.elapsed is not None:
            # Elapsed time: exactly k intervals after start, whatever the wall clock did.
            assert slot_utc - start_utc == j.interval.elapsed * k
        elif k > 0:
            wall = ref_wall(start_wall, j.interval, k)
            local = slot_utc.astimezone(j.zone)
            assert local.fold == 0  # an ambiguous wall time: its first occurrence
            if local.replace(tzinfo=None) != wall:
                # Only a wall time that does not exist moves: to the first instant after it.
                assert local.replace(tzinfo=None) > wall
                before = (slot_utc - timedelta(seconds=1)).astimezone(j.zone)
                assert before.replace(tzinfo=None) < wall
                assert local.utcoffset() != before.utcoffset()
        if previous is not None:
            assert slot_utc > previous
        previous = slot_utc


@given(jobs_and_times())
@PROPERTY
def test_consecutive_slots_strictly_increase(case: tuple[Job, datetime]) -> None:
    j, t = case
    slots = [s.astimezone(UTC) for s in j.slots_after(t, 8)]
    assert all(a < b for a, b in itertools.pairwise(slots))
    assert all(s > t for s in slots)
    # Each answer is the next slot: asking just before it gives it back.
    for s in slots:
        assert utc(j.next_after(s - timedelta(microseconds=1))) == s


@given(jobs_and_times(), st.integers(1, 6))
@PROPERTY
def test_stop_on_a_slot_is_inclusive(case: tuple[Job, datetime], k: int) -> None:
    j, _ = case
    trigger = j.trigger
    assert trigger is not None
    last = trigger.slot(k)
    bounded = j.with_changes(stop=last)
    assert utc(bounded.next_after(trigger.slot(k - 1))) == utc(last)
    assert bounded.next_after(last) is None
    assert utc(bounded.next_after(utc(last) - timedelta(microseconds=1))) == utc(last)


@st.composite
def zones_and_walls(draw: st.DrawFn) -> tuple[str, datetime]:
    """A zone and a wall time, often within 90 minutes of one of its transitions."""
    zone_name = draw(st.sampled_from(ZONES))
    transitions = TRANSITIONS[zone_name]
    if transitions and draw(st.booleans()):
        near = wall_time(draw(st.sampled_from(transitions)), ZoneInfo(zone_name))
        return zone_name, near + timedelta(minutes=draw(st.integers(-90, 90)))
    wall = draw(st.datetimes(datetime(1971, 1, 1), datetime(2037, 1, 1)))
    return zone_name, wall.replace(second=0, microsecond=0)


@given(zones_and_walls(), st.sampled_from([0, 1]))
@PROPERTY
def test_localize_matches_brute_force(case: tuple[str, datetime], fold: int) -> None:
    zone_name, wall = case
    zone = ZoneInfo(zone_name)
    got = localize(wall.replace(fold=fold), zone)
    assert got.tzinfo is zone
    assert got.astimezone(UTC) == ref_localize(wall, zone)
