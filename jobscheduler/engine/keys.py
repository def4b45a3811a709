"""The engine's packed integer keys: every bit of their arithmetic, in one place.

Two heaps order the engine's work by one int each instead of a tuple: an int costs no
object the garbage collector tracks and compares in one step (a tuple of five: a dozen).

A *timeline key* (`Timeline`'s heap) orders entries by instant, then priority (higher first),
then sequence (first put, first out); its low bits name the job's state (an index into the
owner's table) and whether the entry is a one-off start:

    µs since 1970 + 2**62 | 2**31 - 1 - priority | sequence | index | one-off

One int of 175 bits (48 bytes) instead of a tuple of five and a float: about 80 bytes less
per job. The limits, none of which a real schedule meets: priorities beyond ±2**31 sort as
±2**31, a sequence wraps after 2**48 entries, and an owner holds at most 2**32 states at once.

A *run key* (`ReadyRuns`'s heap) orders due runs by priority (higher first), then due
instant (older first), then sequence: ``(-priority, due µs, sequence)`` as one int.

Instants are exact microseconds since 1970 (`micros`, `instant`): no float in between.

The engine's hot paths (`Timeline.due`, `_dispatch` and `_admit`) do the arithmetic inline
with the constants below rather than through these functions: on the path of a run that is
due, each first call of a function costs microseconds in a process that has just started.
The constants are exported for that, and for nothing else.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo

__all__ = [
    "DUE_OFFSET",
    "DUE_SPAN",
    "EPOCH",
    "INDEX_FIELD",
    "INDEX_MASK",
    "INDEX_SHIFT",
    "MICROSECOND",
    "NEVER",
    "ONE_OFF",
    "RUN_SEQ_SHIFT",
    "SEQ_MASK",
    "SEQ_SHIFT",
    "SUCCESSOR_KEEPS",
    "TIME_OFFSET",
    "TIME_SHIFT",
    "due_bound",
    "index_of",
    "instant",
    "micros",
    "off_timeline",
    "run_key",
    "seq_of",
    "successor_key",
    "time_of",
    "timeline_key",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)

# -- timeline keys ------------------------------------------------------------------------------

INDEX_BITS = 32
SEQ_BITS = 48
PRIORITY_BITS = 32
INDEX_SHIFT = 1
SEQ_SHIFT = INDEX_SHIFT + INDEX_BITS
_PRIORITY_SHIFT = SEQ_SHIFT + SEQ_BITS
TIME_SHIFT = _PRIORITY_SHIFT + PRIORITY_BITS
INDEX_MASK = (1 << INDEX_BITS) - 1
SEQ_MASK = (1 << SEQ_BITS) - 1
_PRIORITY_TOP = (1 << (PRIORITY_BITS - 1)) - 1
_PRIORITY_BOTTOM = -(1 << (PRIORITY_BITS - 1))
INDEX_FIELD = INDEX_MASK << INDEX_SHIFT
# What a successor keeps of its predecessor's key: priority and index (one-off bit clear).
SUCCESSOR_KEEPS = (((1 << PRIORITY_BITS) - 1) << _PRIORITY_SHIFT) | INDEX_FIELD
TIME_OFFSET = 1 << 62  # instants from year 1 (about -2**56 µs) to 9999 (2**58) are positive
NEVER = (1 << 63) << TIME_SHIFT  # the time field of a state not on the timeline: after all
ONE_OFF = 1


def micros(instant: datetime) -> int:
    """An aware instant as whole microseconds since 1970 (exact: no float in between)."""
    return (instant - EPOCH) // MICROSECOND


def instant(us: int, zone: tzinfo) -> datetime:
    """The instant `us` microseconds after 1970, aware in `zone` (the inverse of `micros`).
    Through ``fromtimestamp`` of whole seconds (exact, and sets `fold`; zone transitions fall
    on whole seconds), which is faster than adding a timedelta and converting."""
    seconds, fraction = divmod(us, 1_000_000)
    moment = datetime.fromtimestamp(seconds, zone)
    return moment.replace(microsecond=fraction) if fraction else moment


def timeline_key(us: int, priority: int, seq: int, index: int, one_off: int = 0) -> int:
    """The timeline key of an entry (see the module notes)."""
    if priority > _PRIORITY_TOP:
        priority = _PRIORITY_TOP
    elif priority < _PRIORITY_BOTTOM:
        priority = _PRIORITY_BOTTOM
    return (
        ((us + TIME_OFFSET) << TIME_SHIFT)
        | ((_PRIORITY_TOP - priority) << _PRIORITY_SHIFT)
        | ((seq & SEQ_MASK) << SEQ_SHIFT)
        | (index << INDEX_SHIFT)
        | one_off
    )


def successor_key(key: int, us: int, seq: int) -> int:
    """The key of a scheduled entry's next slot: `key`'s priority and index, at `us`."""
    return (
        ((us + TIME_OFFSET) << TIME_SHIFT)
        | (key & SUCCESSOR_KEEPS)
        | ((seq & SEQ_MASK) << SEQ_SHIFT)
    )


def time_of(key: int) -> int:
    """A key's instant in µs since 1970."""
    return (key >> TIME_SHIFT) - TIME_OFFSET


def due_bound(now_us: int) -> int:
    """The keys of the entries due at `now_us` (at or before it) are those below this one."""
    return (now_us + 1 + TIME_OFFSET) << TIME_SHIFT


def off_timeline(index: int) -> int:
    """The key of a state that has no live timeline entry (it equals no entry's key)."""
    return NEVER | (index << INDEX_SHIFT)


def index_of(key: int) -> int:
    return (key >> INDEX_SHIFT) & INDEX_MASK


def seq_of(key: int) -> int:
    return (key >> SEQ_SHIFT) & SEQ_MASK


# -- run keys -----------------------------------------------------------------------------------

DUE_SPAN = 1 << 63  # due instants in µs, offset by half of it (years 1 to 9999 fit)
DUE_OFFSET = 1 << 62
RUN_SEQ_SHIFT = 64


def run_key(priority: int, due_us: int, seq: int) -> int:
    """The ready runs's order as one int: higher `priority` first, then earlier `due_us`
    (microseconds since 1970), then lower `seq`."""
    return ((-priority * DUE_SPAN + due_us + DUE_OFFSET) << RUN_SEQ_SHIFT) + seq
