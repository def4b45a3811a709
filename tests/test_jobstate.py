"""Timeline keys: one int that sorts as (instant, -priority, sequence) and names its state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from jobscheduler.engine.keys import (
    INDEX_MASK,
    ONE_OFF,
    SEQ_MASK,
    due_bound,
    index_of,
    instant,
    micros,
    off_timeline,
    seq_of,
    successor_key,
    time_of,
    timeline_key,
)

_US = st.integers(-62_135_596_800_000_000, 253_402_300_799_999_999)  # years 1 to 9999
_PRIORITY = st.integers(-(2**40), 2**40)
_SEQ = st.integers(0, SEQ_MASK)
_INDEX = st.integers(0, INDEX_MASK)
_ENTRY = st.tuples(_US, _PRIORITY, _SEQ, _INDEX, st.sampled_from([0, ONE_OFF]))


def _clamp(priority: int) -> int:
    return max(-(2**31), min(priority, 2**31 - 1))


@given(st.lists(_ENTRY, min_size=2, max_size=30, unique_by=lambda e: e[2]))
def test_keys_sort_by_instant_then_priority_then_sequence(entries: list[tuple[int, ...]]) -> None:
    by_key = sorted(entries, key=lambda e: timeline_key(*e))
    expected = sorted(entries, key=lambda e: (e[0], -_clamp(e[1]), e[2]))
    assert by_key == expected


@given(_ENTRY)
def test_a_key_gives_back_its_parts(entry: tuple[int, int, int, int, int]) -> None:
    us, priority, seq, index, one_off = entry
    key = timeline_key(us, priority, seq, index, one_off)
    assert time_of(key) == us
    assert (seq_of(key), index_of(key), key & ONE_OFF) == (seq, index, one_off)
    assert key < off_timeline(index)  # every entry sorts before "not on the timeline"
    assert (key < due_bound(us)) and not (key < due_bound(us - 1))  # due at us, not before
    if not one_off:
        following = successor_key(key, us + 1, seq + 1)
        assert following == timeline_key(us + 1, priority, seq + 1, index)


@given(st.datetimes(min_value=datetime(1, 1, 2), timezones=st.just(UTC)))
def test_micros_and_instant_are_exact_inverses(t: datetime) -> None:
    assert instant(micros(t), UTC) == t
    assert micros(t + timedelta(microseconds=1)) == micros(t) + 1


def test_instant_is_in_the_zone_asked_with_the_right_fold() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    first = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST, the first 02:30
    second = first + timedelta(hours=1)  # 02:30 CET, the second
    a, b = instant(micros(first), berlin), instant(micros(second), berlin)
    assert (a.hour, a.minute, a.fold) == (2, 30, 0)
    assert (b.hour, b.minute, b.fold) == (2, 30, 1)
    # (PEP 495: a fold=1 time never equals one in another zone, so compare the instants.)
    assert a.tzinfo is berlin and micros(b) == micros(second) == micros(a) + 3_600_000_000
