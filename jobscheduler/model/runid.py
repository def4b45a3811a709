"""Run ids: UUIDv7 (RFC 9562) in canonical text form, unique across processes, sorted by time.

A run id looks like ``019ab0f2-7c40-7a1b-8c3d-1e2f3a4b5c6d``: the first 48 bits are the
instant it was made, in milliseconds since 1970 (UTC), so ids sort by time, as text and as
numbers alike (lower-case hex, fixed width). After the version (``7``) and the variant bits:

- a 42-bit counter shared by every `RunIds` of the process, started at a random value: ids of
  one process are unique whatever their instants, and ids of one process made in the same
  millisecond are ordered by when they were made (RFC 9562's "fixed bit-length dedicated
  counter", method 1, except that the counter is not re-seeded every millisecond: it would
  need a lock, and run ids are made without one);
- 32 random bits drawn once per process (from `os.urandom`), drawn again in a forked child
  along with a new counter start, so two processes' ids differ even when their clocks and
  counters meet.

The time comes from the instant the generator is given (the engine's clock), never from the
wall clock read here: under a `FakeClock`, ids carry the fake time. From one thread, ids
strictly increase even when that clock steps back: an instant earlier than the last one used
counts as the last one (RFC 9562 §6.2). Across threads the millisecond of two ids made at the
same moment may come out in either order; they are still unique. Instants before 1970 count
as 1970 (a UUIDv7 cannot say earlier).

Making one costs about 0.15 µs besides reading the clock: the text of the millisecond and
of the counter's high bits is kept from one id to the next, so most ids add only the counter's
low 16 bits, from a table.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

__all__ = ["RunIds", "is_run_id", "run_id_instant"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_COUNTER_BITS = 42
_COUNTER_MASK = (1 << _COUNTER_BITS) - 1
_LOW = 0xFFFF  # the counter's bits in the last group (the rest sit before it)
_MAX_MS = (1 << 48) - 1
_LATEST = datetime.max.replace(tzinfo=UTC)
_HEX = frozenset("0123456789abcdef")
# The text of each byte: two look-ups format the counter's low 16 bits three times faster
# than a format specification does.
_HEX2 = tuple(f"{byte:02x}" for byte in range(256))


def _reseed() -> None:
    """A new counter start and tag: at import, and in the child after a fork."""
    global _counter, _tag
    # Started in the lower half: 2**41 ids before the counter could wrap.
    _counter = itertools.count(int.from_bytes(os.urandom(8)) & (_COUNTER_MASK >> 1))
    _tag = os.urandom(4).hex()


_counter: Iterator[int]
_tag: str
_reseed()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed)


class RunIds:
    """Makes run ids: ``next(ids)`` at the instant ``now()``, or ``ids.new(instant)``.

    Thread-safe without a lock (see the module notes); `now` is a clock's ``now``, returning
    an aware datetime.
    """

    __slots__ = ("_cache", "_last_ms", "_now")

    def __init__(self, now: Callable[[], datetime]) -> None:
        self._now = now
        self._last_ms = 0
        # (first instant of the next millisecond, counter >> 16, text up to the counter's low
        # 16 bits) of the last id: one tuple, read and replaced whole, so threads never see
        # half of it.
        self._cache: tuple[datetime, int, str] = (_EPOCH, -1, "")

    def __iter__(self) -> RunIds:
        return self

    def __next__(self) -> str:
        # `new` written out again: one Python call less on the path of every run.
        instant = self._now()
        count = next(_counter)  # one C call: unique across threads
        high, block, head = self._cache
        # An instant before the cached millisecond is one the clock stepped back to: it
        # counts as that millisecond (see the module notes), so one comparison is enough.
        if instant < high and count >> 16 == block:
            hex2 = _HEX2
            return f"{head}{hex2[(count >> 8) & 255]}{hex2[count & 255]}{_tag}"
        return self._slow(instant, count)

    def new(self, instant: datetime) -> str:
        """A fresh run id whose time is `instant` (an aware datetime; see the module notes)."""
        count = next(_counter)
        high, block, head = self._cache
        if instant < high and count >> 16 == block:
            hex2 = _HEX2
            return f"{head}{hex2[(count >> 8) & 255]}{hex2[count & 255]}{_tag}"
        return self._slow(instant, count)

    def _slow(self, instant: datetime, count: int) -> str:
        count &= _COUNTER_MASK
        ms = (instant - _EPOCH) // _MS
        last = self._last_ms
        if ms < last:
            ms = last  # the clock stepped back: keep ids increasing
        ms = min(max(ms, 0), _MAX_MS)
        self._last_ms = ms
        block = count >> 16
        head = (
            f"{ms >> 16:08x}-{ms & 0xFFFF:04x}-7{block >> 14:03x}-{0x8000 | (block & 0x3FFF):04x}-"
        )
        try:
            high = _EPOCH + (ms + 1) * _MS
        except OverflowError:  # the last millisecond of year 9999
            high = _LATEST
        self._cache = (high, block, head)
        return f"{head}{count & _LOW:04x}{_tag}"


def is_run_id(text: object) -> bool:
    """Whether `text` is a run id as `RunIds` makes them: a lower-case canonical UUIDv7."""
    if not isinstance(text, str) or len(text) != 36:
        return False
    parts = text.split("-")
    if [len(part) for part in parts] != [8, 4, 4, 4, 12]:
        return False
    if not set("".join(parts)) <= _HEX:
        return False
    return parts[2][0] == "7" and parts[3][0] in "89ab"


def run_id_instant(run_id: str) -> datetime:
    """The instant (to the millisecond, aware UTC) a run id carries; ValueError if `run_id`
    is not one (see `is_run_id`)."""
    if not is_run_id(run_id):
        raise ValueError(f"not a run id: {run_id!r}")
    ms = int(run_id[:8] + run_id[9:13], 16)
    return _EPOCH + ms * _MS
