"""DST tables: Europe/Berlin, America/New_York and Australia/Lord_Howe (a 30-minute shift),
2023 to 2026.

DAY/WEEK/MONTH/YEAR keep the wall-clock time; HOUR/MINUTE/SECOND are elapsed time. A wall
time inside a spring-forward gap runs at the first instant after the gap, and the next slot is
back at the usual wall time; an ambiguous wall time runs once, at its first occurrence.

Expected values are written out by hand from the zones' published rules (the transition dates
below), never computed by the code under test.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobscheduler import Job


@dataclass(frozen=True)
class Rules:
    zone: str
    standard: str  # UTC offset, as isoformat writes it
    summer: str
    gap: tuple[str, str]  # wall times [first missing, first after the gap)
    fold: tuple[str, str]  # wall times [first repeated, first after the repeat)
    in_gap: str  # a wall time inside the gap
    in_fold: str  # a wall time inside the fold
    spring: dict[int, str]  # the day clocks go forward
    autumn: dict[int, str]  # the day clocks go back


BERLIN = Rules(
    "Europe/Berlin",
    "+01:00",
    "+02:00",
    ("02:00", "03:00"),
    ("02:00", "03:00"),
    "02:30",
    "02:30",
    {
        2022: "2022-03-27",
        2023: "2023-03-26",
        2024: "2024-03-31",
        2025: "2025-03-30",
        2026: "2026-03-29",
        2027: "2027-03-28",
    },
    {
        2022: "2022-10-30",
        2023: "2023-10-29",
        2024: "2024-10-27",
        2025: "2025-10-26",
        2026: "2026-10-25",
        2027: "2027-10-31",
    },
)
NEW_YORK = Rules(
    "America/New_York",
    "-05:00",
    "-04:00",
    ("02:00", "03:00"),
    ("01:00", "02:00"),
    "02:30",
    "01:30",
    {
        2022: "2022-03-13",
        2023: "2023-03-12",
        2024: "2024-03-10",
        2025: "2025-03-09",
        2026: "2026-03-08",
        2027: "2027-03-14",
    },
    {
        2022: "2022-11-06",
        2023: "2023-11-05",
        2024: "2024-11-03",
        2025: "2025-11-02",
        2026: "2026-11-01",
        2027: "2027-11-07",
    },
)
LORD_HOWE = Rules(
    "Australia/Lord_Howe",
    "+10:30",
    "+11:00",
    ("02:00", "02:30"),
    ("01:30", "02:00"),
    "02:15",
    "01:45",
    {
        2022: "2022-10-02",
        2023: "2023-10-01",
        2024: "2024-10-06",
        2025: "2025-10-05",
        2026: "2026-10-04",
        2027: "2027-10-03",
    },
    {
        2022: "2022-04-03",
        2023: "2023-04-02",
        2024: "2024-04-07",
        2025: "2025-04-06",
        2026: "2026-04-05",
        2027: "2027-04-04",
    },
)
ALL = [BERLIN, NEW_YORK, LORD_HOWE]
YEARS = [2023, 2024, 2025, 2026]
CASES = [(rules, year) for rules in ALL for year in YEARS]
IDS = [f"{rules.zone}-{year}" for rules, year in CASES]


def day(text: str, shift: int = 0) -> str:
    return (date.fromisoformat(text) + timedelta(days=shift)).isoformat()


def at(day_text: str, wall: str) -> datetime:
    """A naive wall time: how a user writes it, read in the job's zone."""
    return datetime.fromisoformat(f"{day_text}T{wall}")


def daily(rules: Rules, first_day: str, wall: str, interval: str = "1 day") -> Job:
    return Job(
        "dst",
        command="true",
        start=at(first_day, wall),
        interval=interval,
        timezone=rules.zone,
    )


def iso(slots: list[datetime]) -> list[str]:
    return [s.isoformat(timespec="minutes") for s in slots]


# -- calendar units keep the wall-clock time -----------------------------------------------


@pytest.mark.parametrize(("rules", "year"), CASES, ids=IDS)
def test_daily_in_the_gap_runs_when_it_ends_then_returns(rules: Rules, year: int) -> None:
    d = rules.spring[year]
    j = daily(rules, day(d, -30), rules.in_gap)
    slots = j.slots_after(at(day(d, -2), "12:00"), 4)
    assert iso(slots) == [
        f"{day(d, -1)}T{rules.in_gap}{rules.standard}",
        f"{d}T{rules.gap[1]}{rules.summer}",  # the first instant after the gap
        f"{day(d, 1)}T{rules.in_gap}{rules.summer}",  # back at the usual wall time
        f"{day(d, 2)}T{rules.in_gap}{rules.summer}",
    ]
    # The slot inside the gap is the very transition: one second earlier is the old offset.
    moved = slots[1].astimezone(UTC)
    before = (moved - timedelta(seconds=1)).astimezone(ZoneInfo(rules.zone))
    last_minute = (at(d, rules.gap[0]) - timedelta(minutes=1)).strftime("%H:%M")
    assert before.isoformat(timespec="minutes") == f"{d}T{last_minute}{rules.standard}"


@pytest.mark.parametrize(("rules", "year"), CASES, ids=IDS)
def test_daily_at_the_gaps_edges(rules: Rules, year: int) -> None:
    d = rules.spring[year]
    start_of_gap = daily(rules, day(d, -3), rules.gap[0])
    end_of_gap = daily(rules, day(d, -3), rules.gap[1])
    t = at(day(d, -1), "12:00")
    # The first missing minute runs at the gap's end; the gap's end itself is a real time.
    assert iso(start_of_gap.slots_after(t, 2)) == [
        f"{d}T{rules.gap[1]}{rules.summer}",
        f"{day(d, 1)}T{rules.gap[0]}{rules.summer}",
    ]
    assert iso(end_of_gap.slots_after(t, 2)) == [
        f"{d}T{rules.gap[1]}{rules.summer}",
        f"{day(d, 1)}T{rules.gap[1]}{rules.summer}",
    ]


@pytest.mark.parametrize(("rules", "year"), CASES, ids=IDS)
def test_daily_in_the_fold_runs_once_at_first_occurrence(rules: Rules, year: int) -> None:
    d = rules.autumn[year]
    zone = ZoneInfo(rules.zone)
    j = daily(rules, day(d, -30), rules.in_fold)
    slots = j.slots_after(at(day(d, -2), "12:00"), 3)
    assert iso(slots) == [
        f"{day(d, -1)}T{rules.in_fold}{rules.summer}",
        f"{d}T{rules.in_fold}{rules.summer}",  # first occurrence only
        f"{day(d, 1)}T{rules.in_fold}{rules.standard}",
    ]
    first = slots[1]
    second = datetime.fromisoformat(f"{d}T{rules.in_fold}{rules.standard}")
    # Asked at the first occurrence, or anywhere in the repeated hour, the next run is tomorrow.
    for t in (
        first,
        first.astimezone(UTC),
        second,
        second - timedelta(minutes=1),
        second.astimezone(zone),  # fold=1, in the job's own zone
        datetime.fromisoformat(f"{d}T{rules.fold[0]}{rules.standard}").astimezone(zone),
    ):
        nxt = j.next_after(t)
        assert nxt is not None
        assert nxt.isoformat(timespec="minutes") == f"{day(d, 1)}T{rules.in_fold}{rules.standard}"


@pytest.mark.parametrize(("rules", "year"), CASES, ids=IDS)
def test_daily_before_the_fold_in_its_second_pass(rules: Rules, year: int) -> None:
    """At the second occurrence of the fold's first minute, a later wall time in the fold has
    already run (its first occurrence is past): the next run is tomorrow."""
    d = rules.autumn[year]
    zone = ZoneInfo(rules.zone)
    j = daily(rules, day(d, -7), rules.in_fold)
    repeat_start = datetime.fromisoformat(f"{d}T{rules.fold[0]}{rules.standard}")
    assert repeat_start.astimezone(zone).fold == 1
    nxt = j.next_after(repeat_start.astimezone(zone))
    assert nxt is not None
    assert nxt.isoformat(timespec="minutes") == f"{day(d, 1)}T{rules.in_fold}{rules.standard}"
    # Just before the clocks go back, the first occurrence is still ahead.
    nxt = j.next_after(datetime.fromisoformat(f"{d}T{rules.fold[0]}{rules.summer}"))
    assert nxt is not None
    assert nxt.isoformat(timespec="minutes") == f"{d}T{rules.in_fold}{rules.summer}"


@pytest.mark.parametrize(("rules", "year"), CASES, ids=IDS)
def test_weekly_keeps_wall_time_through_both_changes(rules: Rules, year: int) -> None:
    spring, autumn = rules.spring[year], rules.autumn[year]
    j = daily(rules, day(spring, -14), rules.in_gap, "1 week")
    assert iso(j.slots_after(at(day(spring, -8), "00:00"), 3)) == [
        f"{day(spring, -7)}T{rules.in_gap}{rules.standard}",
        f"{spring}T{rules.gap[1]}{rules.summer}",
        f"{day(spring, 7)}T{rules.in_gap}{rules.summer}",
    ]
    j = daily(rules, day(autumn, -14), rules.in_fold, "1 week")
    assert iso(j.slots_after(at(day(autumn, -8), "00:00"), 3)) == [
        f"{day(autumn, -7)}T{rules.in_fold}{rules.summer}",
        f"{autumn}T{rules.in_fold}{rules.summer}",
        f"{day(autumn, 7)}T{rules.in_fold}{rules.standard}",
    ]


@pytest.mark.parametrize(("rules", "year"), CASES, ids=IDS)
def test_monthly_and_yearly_land_in_the_gap_then_return(rules: Rules, year: int) -> None:
    d = rules.spring[year]
    month_before = date.fromisoformat(d).replace(day=1) - timedelta(days=1)
    # Monthly on the change day's day of month, started a year before.
    j = daily(rules, f"{year - 1}{d[4:]}", rules.in_gap, "1 month")
    slot = j.next_after(at(month_before.isoformat(), "23:00"))
    assert slot is not None
    assert slot.isoformat(timespec="minutes") == f"{d}T{rules.gap[1]}{rules.summer}"
    nxt = j.next_after(slot)
    assert nxt is not None
    assert nxt.strftime("%H:%M") == rules.in_gap
    assert nxt.isoformat(timespec="minutes")[:10] > d
    # Yearly: the same date a year earlier and later is an ordinary day.
    j = daily(rules, f"{year - 1}{d[4:]}", rules.in_gap, "1 year")
    assert iso(j.slots_after(at(f"{year - 1}{d[4:]}", "00:00"), 3)) == [
        f"{year - 1}{d[4:]}T{rules.in_gap}{_offset_on(rules, f'{year - 1}{d[4:]}')}",
        f"{d}T{rules.gap[1]}{rules.summer}",
        f"{year + 1}{d[4:]}T{rules.in_gap}{_offset_on(rules, f'{year + 1}{d[4:]}')}",
    ]


def _offset_on(rules: Rules, day_text: str) -> str:
    """The offset on a day that is no change day, from the table."""
    year = int(day_text[:4])
    spring, autumn = rules.spring[year], rules.autumn[year]
    assert day_text not in (spring, autumn)
    if spring < autumn:  # northern hemisphere: summer between spring and autumn
        return rules.summer if spring < day_text < autumn else rules.standard
    return rules.standard if autumn < day_text < spring else rules.summer


# -- elapsed units -------------------------------------------------------------------------


@pytest.mark.parametrize(("rules", "year"), CASES, ids=IDS)
def test_hourly_is_elapsed_time_across_spring_forward(rules: Rules, year: int) -> None:
    d = rules.spring[year]
    j = Job(
        "h",
        command="true",
        start=at(day(d, -1), "23:00"),
        interval="1 hour",
        timezone=rules.zone,
    )
    slots = j.slots_after(at(day(d, -1), "23:30"), 5)
    gaps = [b.astimezone(UTC) - a.astimezone(UTC) for a, b in itertools.pairwise(slots)]
    assert gaps == [timedelta(hours=1)] * 4
    walls = [s.strftime("%H:%M") for s in slots]
    if rules.zone == "Australia/Lord_Howe":
        # 30-minute shift: from 02:00 the wall clock reads half an hour more.
        assert walls == ["00:00", "01:00", "02:30", "03:30", "04:30"]
    else:
        assert walls == ["00:00", "01:00", "03:00", "04:00", "05:00"]


@pytest.mark.parametrize(("rules", "year"), CASES, ids=IDS)
def test_half_hourly_is_elapsed_time_across_fall_back(rules: Rules, year: int) -> None:
    d = rules.autumn[year]
    j = Job(
        "m",
        command="true",
        start=at(day(d, -1), "22:00"),
        interval="30 minutes",
        timezone=rules.zone,
    )
    begin = datetime.fromisoformat(f"{d}T{rules.fold[0]}{rules.summer}") - timedelta(hours=1)
    slots = j.slots_after(begin - timedelta(seconds=1), 5)
    assert [s.astimezone(UTC) - begin.astimezone(UTC) for s in slots] == [
        timedelta(minutes=30 * i) for i in range(5)
    ]
    # The repeated wall times run twice: elapsed time does not care what the clock shows.
    shown = iso(slots)
    first, second = f"{d}T{rules.fold[0]}{rules.summer}", f"{d}T{rules.fold[0]}{rules.standard}"
    assert first in shown and second in shown


@pytest.mark.parametrize("rules", ALL, ids=[r.zone for r in ALL])
def test_every_20_minutes_through_the_gap(rules: Rules) -> None:
    d = rules.spring[2025]
    j = Job(
        "s",
        command="true",
        start=at(d, "01:00"),
        interval="20 minutes",
        timezone=rules.zone,
    )
    slots = j.slots_after(at(d, "00:59"), 6)
    assert [s.astimezone(UTC) - slots[0].astimezone(UTC) for s in slots] == [
        timedelta(minutes=20 * i) for i in range(6)
    ]
    shift = 30 if rules.zone == "Australia/Lord_Howe" else 60
    gap_start = at(d, rules.gap[0])
    expected = []
    for i in range(6):
        wall = at(d, "01:00") + timedelta(minutes=20 * i)
        expected.append(wall if wall < gap_start else wall + timedelta(minutes=shift))
    assert [s.replace(tzinfo=None) for s in slots] == expected


def test_seconds_job_across_a_transition_counts_real_seconds() -> None:
    j = Job(
        "sec",
        command="true",
        start=datetime(2024, 3, 31, 1, 59, 58),
        interval="1 second",
        timezone="Europe/Berlin",
    )
    assert iso(j.slots_after(datetime(2024, 3, 31, 1, 59, 57), 4)) == [
        "2024-03-31T01:59+01:00",
        "2024-03-31T01:59+01:00",
        "2024-03-31T03:00+02:00",
        "2024-03-31T03:00+02:00",
    ]
    assert [s.second for s in j.slots_after(datetime(2024, 3, 31, 1, 59, 57), 4)] == [58, 59, 0, 1]


# -- naive times and starts near transitions ------------------------------------------------


def test_naive_probe_inside_the_gap_reads_as_the_gaps_end() -> None:
    """02:45 on 31 March 2024 does not exist in Berlin: it reads as 03:00, when the day's
    02:30 slot runs; the next slot strictly after it is the next day's."""
    j = daily(BERLIN, "2024-03-01", "02:30")
    nxt = j.next_after(datetime(2024, 3, 31, 2, 45))
    assert nxt is not None and nxt.isoformat() == "2024-04-01T02:30:00+02:00"
    nxt = j.next_after(datetime(2024, 3, 31, 1, 59))
    assert nxt is not None and nxt.isoformat() == "2024-03-31T03:00:00+02:00"


def test_naive_probe_inside_the_fold_reads_as_its_first_occurrence() -> None:
    j = daily(NEW_YORK, "2024-10-01", "01:45")
    # 01:40 read as its first occurrence (EDT): the 01:45 slot is still ahead.
    nxt = j.next_after(datetime(2024, 11, 3, 1, 40))
    assert nxt is not None and nxt.isoformat() == "2024-11-03T01:45:00-04:00"


def test_naive_start_and_stop_are_read_in_the_jobs_zone() -> None:
    j = Job(
        "n",
        command="true",
        start=datetime(2024, 10, 27, 2, 30),  # ambiguous in Berlin: first occurrence
        stop=datetime(2024, 10, 29, 2, 30),
        interval="1 day",
        timezone="Europe/Berlin",
    )
    assert j.start is not None and j.start.isoformat() == "2024-10-27T02:30:00+02:00"
    assert j.stop is not None and j.stop.isoformat() == "2024-10-29T02:30:00+01:00"
    assert iso(j.slots_after(datetime(2024, 10, 1), 5)) == [
        "2024-10-27T02:30+02:00",
        "2024-10-28T02:30+01:00",
        "2024-10-29T02:30+01:00",  # stop is inclusive
    ]


def test_start_given_as_the_second_occurrence_runs_then_keeps_its_wall_time() -> None:
    zone = ZoneInfo("America/New_York")
    start = datetime(2024, 11, 3, 1, 30, tzinfo=zone, fold=1)  # 06:30 UTC
    j = Job("s2", command="true", start=start, interval="1 day", timezone="America/New_York")
    first_pass = datetime(2024, 11, 3, 1, 40, tzinfo=zone)  # fold=0: before the start
    nxt = j.next_after(first_pass)
    assert nxt is not None and nxt.astimezone(UTC) == datetime(2024, 11, 3, 6, 30, tzinfo=UTC)
    nxt = j.next_after(start)
    assert nxt is not None and nxt.isoformat() == "2024-11-04T01:30:00-05:00"


def test_start_inside_a_gap_runs_at_its_end_and_keeps_that_wall_time() -> None:
    """A start is an instant: 02:30 on a spring-forward day is 03:00, and the job's
    wall-clock anchor is then 03:00 (docs/semantics.md: "Starts inside a gap")."""
    j = daily(BERLIN, "2024-03-31", "02:30")
    assert j.start is not None and j.start.isoformat() == "2024-03-31T03:00:00+02:00"
    assert iso(j.slots_after(datetime(2024, 3, 30), 2)) == [
        "2024-03-31T03:00+02:00",
        "2024-04-01T03:00+02:00",
    ]


def test_lord_howe_monthly_on_the_change_day_over_several_years() -> None:
    """Lord Howe's October change is on the first Sunday: a monthly job on the 6th at 02:15
    meets it in 2024 only."""
    j = daily(LORD_HOWE, "2023-06-06", "02:15", "1 month")
    slots = j.slots_after(datetime(2023, 9, 1), 26)
    october = {s.year: s.isoformat(timespec="minutes") for s in slots if s.month == 10}
    assert october == {
        2023: "2023-10-06T02:15+11:00",
        2024: "2024-10-06T02:30+11:00",
        2025: "2025-10-06T02:15+11:00",
    }
    april = {s.year: s.isoformat(timespec="minutes") for s in slots if s.month == 4}
    assert april == {2024: "2024-04-06T02:15+11:00", 2025: "2025-04-06T02:15+10:30"}
