"""`calendar:` against the real ``systemd-analyze calendar`` (systemd 252 here): the same
expressions accepted and refused, the same normalised form, the same elapses, DST included.

Expressions come from hypothesis strategies (valid ones mostly, some out of range or
malformed) and from a hand-written list (every shorthand, ``~``, fractions, zones, and the
DST days of Europe/Berlin and America/New_York). Each hypothesis example asks
``systemd-analyze`` once for a batch of expressions, so the test stays quick: a few hundred
expressions in a few seconds.

Base times are kept out of a repeated (fall-back) hour: asked from there, systemd's first
answer depends on the offset glibc's ``mktime`` used in an earlier call of the process (see
`calendar_eval`), which is no property of the expression.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from systemd_calendar import STUCK, ours, systemd

from jobscheduler.triggers.zones import resolve_zone

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
ITERATIONS = 12

# Just before the transitions of 2026: Berlin 29 March and 25 October (01:00 UTC), New York
# 8 March (07:00 UTC) and 1 November (06:00 UTC).
DST_BASES = {
    "Europe/Berlin": [
        int(datetime(2026, 3, 28, 22, 0, tzinfo=UTC).timestamp()),
        int(datetime(2026, 10, 24, 22, 0, tzinfo=UTC).timestamp()),
    ],
    "America/New_York": [
        int(datetime(2026, 3, 8, 4, 0, tzinfo=UTC).timestamp()),
        int(datetime(2026, 11, 1, 3, 0, tzinfo=UTC).timestamp()),
    ],
}

HAND_WRITTEN = [
    "Mon..Fri 09:00",
    "*-*-01 00:00",
    "*:0/15",
    "minutely",
    "hourly",
    "daily",
    "weekly",
    "monthly",
    "quarterly",
    "semiannually",
    "semi-annually",
    "biannually",
    "yearly",
    "annually",
    "anually",
    "DAILY",
    "*-02-30",
    "*-02-29",
    "*-02-29 Mon",
    "Sat,Sun *-*-1..7 12:00",
    "Mon-Wed,Fri 9..17/2:30",
    "Monday..Friday 08:30:15",
    "*-*~01",
    "*-02~03",
    "*-*~1..3 23:59",
    "*-*~07/2 06:00",
    "*:*:0/7.5",
    "*:*:1.5",
    "*:*:59.999999",
    "*:*:00.0000005",
    "*-*-* 02:30",
    "*-*-* 02:00..03:00/10",
    "*-*-* 1..3:*:0/20",
    "*-*-* 2:*",
    "*-*-* 01:30",
    "*-*-* 0..3:00/20",
    "Sun *-11-1..7 1:*:0",
    "2026..2030-*-* 12:00",
    "26-03-29 02:30",
    "2199-12-31 23:59:59",
    "1970-01-01",
    "@1800000000",
    "@0",
    "daily UTC",
    "daily utc",
    "*:0/30 America/New_York",
    "Mon 09:00 Europe/Berlin",
    "*-*-* 02:30 Europe/Berlin",
    "12:00 Asia/Kolkata",
    "*-*-* 10..11/5:00",
    "*-1,4,7,10-1",
    "*-*-* 00/6:00",
    "Fri *-*-13",
    "Mon,Mon,Mon 1,1,1:2,2",
    "mon,",
    # a zone's own abbreviations force standard or summer time (zone-dependent)
    "daily CET",
    "12:00 CEST",
    "12:00 cest",
    "Mon 12:00 CET",
    "12:00 EDT",
    "12:00 EST",
    "12:00 IST",
    "*:0/30 +11",
    "12:00 +1030",
    # refused
    "",
    " daily",
    "daily ",
    "bogus",
    "Mon..",
    "Fri..Mon",
    "Mon..Wed..Fri",
    "*-*-* 24:00",
    "*-*-* 00:60",
    "*-*-* 00:00:60",
    "*-13-01",
    "*-00-01",
    "*-*-32",
    "*-*-0",
    "*-*~29",
    "*-*~0",
    "2200-01-01",
    "1969-12-31",
    "*:0/0",
    "*:*:00.5..01",
    "*-*-* 5..3:00",
    "*-*-*-*",
    "12",
    "12:",
    ":00",
    "Mon 12:00:00:00",
    "UTC",
    "Europe/Berlin",
    "@",
    "1..2/100:00",
    "*-*-* 00:00 Mars/Olympus",
]


def _out_of_fold(base: int, zones: list[str]) -> int:
    """`base`, moved forward while it lies in a repeated hour of any of `zones`."""
    for _ in range(4):
        t = datetime.fromtimestamp(base, UTC)
        if all(
            (
                t.astimezone(resolve_zone(z))
                .replace(tzinfo=None, fold=1)
                .replace(tzinfo=resolve_zone(z))
                .utcoffset()
            )
            == t.astimezone(resolve_zone(z)).replace(fold=0).utcoffset()
            for z in zones
        ):
            return base
        base += 2 * 3600
    return base


def _compare(expressions: list[str], zone: str, base: int) -> None:
    unique = list(dict.fromkeys(expressions))
    theirs = systemd(unique, zone, base, ITERATIONS)
    wrong = []
    for expression in unique:
        mine, expected = ours(expression, zone, base, ITERATIONS), theirs[expression]
        if expected.normalized == STUCK and not mine.refused and mine.normalized:
            mine.normalized = STUCK  # not shown by systemd: compare the rest
        if mine != expected:
            wrong.append((expression, mine, expected))
    assert not wrong, f"zone {zone}, base @{base}: {len(wrong)} differ, first: {wrong[:3]}"


@pytest.mark.parametrize("zone", ZONES)
def test_hand_written_expressions_equal_systemd(zone: str) -> None:
    base = int(datetime(2026, 11, 23, 15, 40, 5, tzinfo=UTC).timestamp())
    _compare(HAND_WRITTEN, zone, base)


@pytest.mark.parametrize(
    ("zone", "base"), [(zone, base) for zone, bases in DST_BASES.items() for base in bases]
)
def test_dst_days_equal_systemd(zone: str, base: int) -> None:
    _compare(HAND_WRITTEN, zone, base)


# -- generated expressions -----------------------------------------------------------------


def _value(low: int, high: int) -> st.SearchStrategy[int]:
    # Mostly in range; now and then just outside it, which systemd refuses.
    return st.one_of(st.integers(low, high), st.integers(low, high), st.sampled_from([high + 1]))


def _item(low: int, high: int, width: int) -> st.SearchStrategy[str]:
    def fmt(v: int) -> str:
        return f"{v:0{width}d}" if width else str(v)

    value = _value(low, high)
    repeat = st.integers(1, max(1, high - low))
    return st.one_of(
        value.map(fmt),
        st.tuples(value, value).map(lambda p: f"{fmt(min(p))}..{fmt(max(p))}"),
        st.tuples(value, repeat).map(lambda p: f"{fmt(p[0])}/{p[1]}"),
        st.tuples(value, value, repeat).map(
            lambda p: f"{fmt(min(p[0], p[1]))}..{fmt(max(p[0], p[1]))}/{p[2]}"
        ),
    )


def _chain(low: int, high: int, width: int = 0) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just("*"),
        st.lists(_item(low, high, width), min_size=1, max_size=3).map(",".join),
    )


def _seconds() -> st.SearchStrategy[str]:
    fraction = st.sampled_from(["", "", ".5", ".25", ".125", ".000001", ".75"])
    plain = st.tuples(st.integers(0, 59), fraction).map(lambda p: f"{p[0]:02d}{p[1]}")
    step = st.tuples(st.integers(0, 59), st.integers(1, 30), fraction).map(
        lambda p: f"{p[0]:02d}/{p[1]}{p[2]}"
    )
    return st.one_of(st.just("*"), plain, step, _chain(0, 59, 2))


_WEEKDAY = st.sampled_from(["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", "monday", "FRI"])
_WEEKDAYS = st.one_of(
    _WEEKDAY,
    st.tuples(_WEEKDAY, _WEEKDAY).map(lambda p: f"{p[0]}..{p[1]}"),
    st.lists(_WEEKDAY, min_size=2, max_size=3).map(",".join),
    st.tuples(_WEEKDAY, _WEEKDAY).map(lambda p: f"{p[0]}-{p[1]}"),
)
_YEARS = st.one_of(
    st.just("*"),
    st.sampled_from(["2026", "2027", "2026..2028", "26", "2026/2", "2030"]),
)


@st.composite
def expressions(draw: st.DrawFn, abbreviations: bool = True) -> str:
    """An expression; with `abbreviations`, its suffix may be a zone's abbreviation (see
    the DST-day test for why not always)."""
    parts: list[str] = []
    if draw(st.booleans()):
        parts.append(draw(_WEEKDAYS))
    if draw(st.booleans()):
        month, day = draw(_chain(1, 12)), draw(_chain(1, 31))
        sep = draw(st.sampled_from(["-", "-", "~"]))
        if sep == "~":
            day = draw(_chain(1, 28))
        date = f"{month}{sep}{day}"
        if draw(st.booleans()):
            date = f"{draw(_YEARS)}-{date}"
        parts.append(date)
    if draw(st.booleans()) or not parts:
        time = f"{draw(_chain(0, 23, 2))}:{draw(_chain(0, 59, 2))}"
        if draw(st.booleans()):
            time += f":{draw(_seconds())}"
        parts.append(time)
    if draw(st.integers(0, 5)) == 0:
        parts.append(
            draw(
                st.sampled_from(
                    ["UTC", "Europe/Berlin", "America/New_York"]
                    + (["CET", "CEST", "EDT"] if abbreviations else [])
                )
            )
        )
    return " ".join(parts)


_BASE = st.integers(
    int(datetime(2025, 1, 1, tzinfo=UTC).timestamp()),
    int(datetime(2031, 1, 1, tzinfo=UTC).timestamp()),
)


# No shrinking: a batch that fails is reported whole (its differing expressions first), and
# shrinking a batch of 40 through systemd-analyze calls takes minutes.
_NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]


# Derandomized: the same batches every run, so a run of `make test` says the same thing twice
# (CALENDAR_EXAMPLES=150 widens the search by hand). A wider search found one difference,
# written down in docs/semantics.md: `monday,monday *-17/9` in Australia/Lord_Howe from
# @1924992000, where systemd stops at its safety valve and we find the Mondays.
@settings(
    max_examples=int(os.environ.get("CALENDAR_EXAMPLES", "12")),
    derandomize=True,
    deadline=None,
    phases=_NO_SHRINK,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    batch=st.lists(expressions(), min_size=25, max_size=40),
    zone=st.sampled_from(ZONES),
    base=_BASE,
)
def test_generated_expressions_equal_systemd(batch: list[str], zone: str, base: int) -> None:
    base = _out_of_fold(base, [zone, "Europe/Berlin", "America/New_York"])
    _compare(batch, zone, base)


@settings(
    max_examples=6,
    derandomize=True,
    deadline=None,
    phases=_NO_SHRINK,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    batch=st.lists(expressions(abbreviations=False), min_size=25, max_size=40),
    zone=st.sampled_from(["Europe/Berlin", "America/New_York"]),
    offset=st.integers(-3 * 3600, 3 * 3600),
    which=st.integers(0, 1),
)
def test_generated_expressions_on_dst_days_equal_systemd(
    batch: list[str], zone: str, offset: int, which: int
) -> None:
    """Without the zone's abbreviations as suffixes: in the hours around a change, glibc's
    mktime with a forced summer/standard flag is not reproduced exactly (``*:09 EDT`` from
    01:09 EDT on New York's fall-back night: systemd says 01:09 EST, we find none). Known,
    written down in docs/semantics.md; the hand-written ones with abbreviations pass on the
    DST bases above."""
    zones = [zone, "Europe/Berlin", "America/New_York"]
    base = _out_of_fold(DST_BASES[zone][which] + offset, zones)
    _compare(batch, zone, base)


def test_a_repeated_hour_is_not_run_twice_and_a_gap_is_skipped() -> None:
    """The rules docs/semantics.md states, on Berlin's 2026 DST days."""
    berlin = resolve_zone("Europe/Berlin")
    autumn = int(datetime(2026, 10, 24, 22, 0, tzinfo=UTC).timestamp())
    quarter = ours("*:0/15", "Europe/Berlin", autumn, 16).elapses
    walls = [datetime.fromtimestamp(s, berlin).strftime("%H:%M") for s in quarter]
    assert walls.count("02:15") == 1 and "03:00" in walls
    assert quarter[-1] - quarter[0] < 5 * 3600  # 16 quarters: no hour run twice
    spring = int(datetime(2026, 3, 28, 22, 0, tzinfo=UTC).timestamp())
    at_half_past_two = ours("*-*-* 02:30", "Europe/Berlin", spring, 1).elapses
    assert datetime.fromtimestamp(at_half_past_two[0], UTC) - datetime.fromtimestamp(
        spring, UTC
    ) > timedelta(days=1)  # 29 March has no 02:30: the next one is on the 30th
