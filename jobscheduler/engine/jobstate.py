"""What the processor knows of one job (`JobState`, `Activity`), and the timeline's keys.

A scheduler with 100,000 jobs holds 100,000 of these, nearly all of them waiting, so a
waiting job costs four slots and one int: its definition, its timeline key (which holds its
next slot), whether it is registered, and an `Activity` made the first time the job has runs,
one-off starts or stops (then kept: a job that ran once will run again).

A *timeline key* is one int ordering the timeline's entries by instant, then priority (higher
first), then sequence (first put, first out); its low bits name the job's state (an index
into the owner's table) and whether the entry is a one-off start:

    µs since 1970 + 2**62 | 2**31 - 1 - priority | sequence | index | one-off

One int of 175 bits (48 bytes) instead of a tuple of five and a float: about 80 bytes less
per job, no object the garbage collector tracks, and one comparison per heap step. The
limits, none of which a real schedule meets: priorities beyond ±2**31 sort as ±2**31, a
sequence wraps after 2**48 entries, and an owner holds at most 2**32 states at once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo

from ..model.job import Job

__all__ = ["Activity", "JobState"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)

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
# The processor's hot paths (`RunQueue.due`, `_dispatch`) do this arithmetic inline with
# these constants rather than through the functions below: on the path of a run that is due,
# each first call of a function costs microseconds in a process that has just started.


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


class Activity:
    """A job's runs and the requests about them (made on the first one, see the module
    notes). `runs` is changed by workers without the lock (one C call each): the ready-queue
    keys (ints) of its queued runs and the ids (texts) of its runs taken and not finished."""

    __slots__ = (
        "pending",
        "runs",
        "scheduled",
        "scheduled_job",
        "scheduled_slot",
        "stop_reason",
        "stops",
    )

    def __init__(self) -> None:
        self.runs: list[int | str] = []
        self.pending: dict[int, tuple[datetime, str, Job]] | None = None  # one-offs by seq
        # The queued run with trigger "schedule", if any: its key, slot and definition.
        self.scheduled: int | None = None
        self.scheduled_slot: datetime | None = None
        self.scheduled_job: Job | None = None
        self.stops = 0  # stop_job calls so far, and the reason of the last one
        self.stop_reason: str | None = None


class JobState:
    """What the processor knows of one job name: its definition, its timeline key (the next
    slot, or `off_timeline`), and its `Activity` once it has had any."""

    __slots__ = ("act", "job", "key", "registered")

    def __init__(self, job: Job, registered: bool, key: int) -> None:
        self.job = job
        self.registered = registered  # False: removed, or only known through run_now/run_at
        self.key = key
        self.act: Activity | None = None

    @property
    def index(self) -> int:
        return index_of(self.key)

    @property
    def on_timeline(self) -> bool:
        return self.key < NEVER

    @property
    def idle(self) -> bool:
        act = self.act
        return act is None or not (act.runs or act.pending)

    def activity(self) -> Activity:
        """The job's `Activity`, made now if it had none (lock held)."""
        act = self.act
        if act is None:
            act = self.act = Activity()
        return act
