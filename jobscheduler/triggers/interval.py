"""Schedule arithmetic: intervals, and the slots of an anchored interval schedule.

A scheduled job's runs are ``start + k × interval`` for k = 0, 1, 2, … — never "now + interval",
so a late run shifts nothing. DAY, WEEK, MONTH and YEAR steps are taken on the wall clock of
the job's zone (a daily 02:30 job stays at 02:30 across DST); HOUR, MINUTE and SECOND steps are
elapsed time. MONTH and YEAR steps count from the start, clamping to the month's end (31 Jan
monthly: 28/29 Feb, 31 Mar, 30 Apr), so a short month never drags later slots to the 28th.

`IntervalTrigger` implements the `Trigger` protocol (`triggers.base`; re-exported here) and
`IndexedTrigger`: `next_after` and `index_after` compute the slot index directly, O(1)
whatever the job's age.
"""

from __future__ import annotations

import enum
import re
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache

from ..errors import InvalidJobError, Problem
from ..valueclass import value_class
from .base import Trigger
from .zones import resolve_wall

__all__ = [
    "Interval",
    "IntervalError",
    "IntervalTrigger",
    "SlotArithmetic",
    "Trigger",
    "Unit",
    "parse_interval",
    "shared_interval",
]


class IntervalError(InvalidJobError, ValueError):
    """An interval that is not a whole number above 0 of a known unit.

    An `InvalidJobError` (the specification's invalid job: a value ≤ 0, an unknown unit) with
    key ``interval``, and a `ValueError` too. Raised by `Interval` and `Unit.parse` on their
    own, it cannot name the job; `Job` adds the job's name when it reads the interval.
    """

    def __init__(self, message: str) -> None:
        super().__init__(Problem(message, key="interval"))


class Unit(enum.Enum):
    """The unit of an `Interval` (the specification's java.util.Calendar field)."""

    YEAR = "year"
    MONTH = "month"
    WEEK = "week"
    DAY = "day"
    HOUR = "hour"
    MINUTE = "minute"
    SECOND = "second"

    @property
    def keeps_wall_time(self) -> bool:
        """True for DAY, WEEK, MONTH and YEAR: steps keep the wall-clock time across DST."""
        return self in (Unit.YEAR, Unit.MONTH, Unit.WEEK, Unit.DAY)

    @classmethod
    def parse(cls, text: str) -> Unit:
        """``"day"``, ``"days"``, ``"DAY"``, ``"d"``, ``"h"``, ``"min"``, ``"s"``…

        ``"m"`` is refused: minute or month? Say which.
        """
        key = text.strip().lower()
        unit = _UNIT_ALIASES.get(key)
        if unit is None:
            names = ", ".join(u.value for u in cls)
            hint = " ('m' is ambiguous: write 'minute' or 'month')" if key == "m" else ""
            raise IntervalError(f"unknown interval unit {text!r}{hint}; expected one of: {names}")
        return unit

    def __str__(self) -> str:
        return self.value


_UNIT_ALIASES: dict[str, Unit] = {}
for _unit, _aliases in {
    Unit.YEAR: ("y", "yr", "yrs"),
    Unit.MONTH: ("mo", "mon", "mons"),
    Unit.WEEK: ("w", "wk", "wks"),
    Unit.DAY: ("d",),
    Unit.HOUR: ("h", "hr", "hrs"),
    Unit.MINUTE: ("min", "mins"),
    Unit.SECOND: ("s", "sec", "secs"),
}.items():
    _UNIT_ALIASES[_unit.value] = _unit
    _UNIT_ALIASES[_unit.value + "s"] = _unit
    for _alias in _aliases:
        _UNIT_ALIASES[_alias] = _unit

_ELAPSED = {
    Unit.HOUR: timedelta(hours=1),
    Unit.MINUTE: timedelta(minutes=1),
    Unit.SECOND: timedelta(seconds=1),
}
# The longest step allowed, per unit: 10,000 years, the whole range of `datetime`. A longer
# one could never repeat, and its arithmetic would overflow.
_MAX_VALUE = {
    Unit.YEAR: 10_000,
    Unit.MONTH: 120_000,
    Unit.WEEK: 521_800,
    Unit.DAY: 3_652_500,
    Unit.HOUR: 87_660_000,
    Unit.MINUTE: 5_259_600_000,
    Unit.SECOND: 315_576_000_000,
}
_INTERVAL_RE = re.compile(r"^\s*(?:every\s+)?([+-]?\d+)\s*([A-Za-z]+)\s*$")


@value_class(frozen=True, init=False)
class Interval:
    """``value`` units: the step between two slots. ``value`` is a whole number above 0.

    `unit` may be given as text (``"day"``, ``"hours"``). Raises `IntervalError` otherwise.
    """

    value: int
    unit: Unit

    def __init__(self, value: int, unit: Unit) -> None:
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "unit", unit)
        self.__post_init__()

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise IntervalError(f"interval value must be a whole number, not {self.value!r}")
        if self.value <= 0:
            raise IntervalError(f"interval value must be above 0, not {self.value}")
        if not isinstance(self.unit, Unit):
            if isinstance(self.unit, str):
                object.__setattr__(self, "unit", Unit.parse(self.unit))
            else:
                raise IntervalError(f"interval unit must be a Unit, not {self.unit!r}")
        if self.value > _MAX_VALUE[self.unit]:
            raise IntervalError(
                f"interval {self.value} {self.unit.value}s is longer than 10,000 years, the "
                "whole range of dates: it could never repeat"
            )

    @classmethod
    def parse(cls, text: str) -> Interval:
        """Read ``"<n> <unit>"``: ``"90 minutes"``, ``"1 day"``, ``"2 weeks"``, ``"1h"``,
        ``"every 3 months"``. Case and spaces do not matter; ``str(interval)`` parses back."""
        if not isinstance(text, str):
            raise IntervalError(f"interval must be text such as '1 day', not {text!r}")
        match = _INTERVAL_RE.match(text)
        if match is None:
            raise IntervalError(f"interval {text!r} is not '<number> <unit>', e.g. '90 minutes'")
        return cls(int(match.group(1)), Unit.parse(match.group(2)))

    @property
    def months(self) -> int:
        """The step in months, for MONTH and YEAR (0 for the others)."""
        if self.unit is Unit.YEAR:
            return 12 * self.value
        if self.unit is Unit.MONTH:
            return self.value
        return 0

    @property
    def days(self) -> int:
        """The step in wall-clock days, for DAY and WEEK (0 for the others)."""
        if self.unit is Unit.WEEK:
            return 7 * self.value
        if self.unit is Unit.DAY:
            return self.value
        return 0

    @property
    def elapsed(self) -> timedelta | None:
        """The step as elapsed time, for HOUR, MINUTE and SECOND (None for the others)."""
        base = _ELAPSED.get(self.unit)
        return None if base is None else base * self.value

    def __str__(self) -> str:
        return f"{self.value} {self.unit.value}{'' if self.value == 1 else 's'}"


_SHARED: dict[Interval, Interval] = {}
_SHARED_MAX = 4096  # distinct intervals kept; past that, intervals are simply not shared


def shared_interval(interval: Interval) -> Interval:
    """One shared object for each distinct `Interval` (they are immutable): jobs built with
    equal intervals then hold one object between them, not one each. A subclass instance is
    returned as it is."""
    if interval.__class__ is not Interval:
        return interval
    shared = _SHARED.get(interval)
    if shared is None:
        if len(_SHARED) >= _SHARED_MAX:
            return interval
        shared = _SHARED.setdefault(interval, interval)
    return shared


@lru_cache(maxsize=1024)
def parse_interval(text: str) -> Interval:
    """`Interval.parse`, remembered, and the result shared (`shared_interval`). Raises
    `IntervalError` as `Interval.parse` does (errors are not remembered)."""
    return shared_interval(Interval.parse(text))


@lru_cache(maxsize=1024)
def _steps(interval: Interval) -> tuple[timedelta | None, int, timedelta]:
    """An interval's step as (elapsed time, months, wall-clock days): shared by triggers."""
    return interval.elapsed, interval.months, timedelta(days=interval.days)


_MONTH_DAYS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def days_in_month(year: int, month: int) -> int:
    """The number of days of `month` (1-12) in `year`, Gregorian leap rules."""
    # Not calendar.isleap: importing calendar costs every command that reads a job.
    if month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
        return 29
    return _MONTH_DAYS[month]


def add_months(wall: datetime, months: int, day: int) -> datetime:
    """`wall` moved by `months` calendar months, on `day` clamped to the month's length."""
    year, month0 = divmod(wall.year * 12 + wall.month - 1 + months, 12)
    return wall.replace(year=year, month=month0 + 1, day=min(day, days_in_month(year, month0 + 1)))


class SlotArithmetic:
    """The slots ``start + k × interval`` up to an inclusive `stop`, in a zone, computed from
    six derived values held in the slots of the class that uses it: `IntervalTrigger`, and
    `Job` for its own schedule (so that a job needs no second object). `_set_schedule`
    fills them.

    Slot 0 is `start` itself. For DAY/WEEK/MONTH/YEAR, slot k (k ≥ 1) is the wall time of
    `start` in the zone moved by k steps on the calendar (day of month clamped to the month's
    end), read with `localize` (a gap gives the gap's end, a fold its first occurrence). For
    HOUR/MINUTE/SECOND it is `start` plus k steps of elapsed time.

    The slot index after an instant comes from the calendar (no stepping) and one slot is
    built: a few microseconds whatever the schedule's age. All comparisons between instants
    are made in UTC, because Python compares two datetimes sharing a tzinfo by their wall
    fields, ignoring `fold`.
    """

    __slots__ = ()
    _start_utc: datetime
    _stop_utc: datetime | None
    _start_local: datetime
    _zone: tzinfo
    _steps: tuple[timedelta | None, int, timedelta]
    _canonical: bool

    def _set_schedule(
        self, start: datetime, interval: Interval, zone: tzinfo, stop: datetime | None
    ) -> None:
        put = object.__setattr__  # Job is frozen
        # Objects shared wherever they can be (one schedule per job adds up): astimezone
        # returns `start` itself when it is in UTC already, the steps are per interval.
        start_utc = start.astimezone(UTC)
        put(self, "_start_utc", start_utc)
        put(self, "_stop_utc", None if stop is None else stop.astimezone(UTC))
        put(self, "_zone", zone)
        put(self, "_steps", _steps(interval))
        # The start's wall time, aware in `zone` with fold=0: subtracting or comparing two
        # datetimes of one tzinfo works on wall fields, which is what calendar steps need.
        local = start_utc.astimezone(zone)
        if local.fold:
            start_local = local.replace(fold=0)
        elif start.tzinfo is zone and not start.fold and start == local:  # wall fields equal
            start_local = start  # the job's own start serves: one datetime less per job
        else:
            start_local = local
        put(self, "_start_local", start_local)
        # False when `start` is not what its own wall time reads as (the second occurrence of
        # an ambiguous time): the fast path assumes slot 0 = localize(start's wall time).
        put(self, "_canonical", resolve_wall(start_local).astimezone(UTC) == start_utc)

    def _slot(self, k: int) -> datetime:
        """The k-th slot (k = 0 is `start`), aware in the zone, ignoring `stop`."""
        if k == 0:
            return self._slot0()
        elapsed = self._steps[0]
        if elapsed is not None:
            return (self._start_utc + elapsed * k).astimezone(self._zone)
        return resolve_wall(self._wall_slot(k))

    def _slot0(self) -> datetime:
        # `_start_local` is `start` in the zone unless that is a second occurrence (fold=1):
        # handing it out saves a datetime per waiting job (its next slot is often slot 0).
        if self._canonical:
            return self._start_local
        return self._start_utc.astimezone(self._zone)

    def _wall_slot(self, k: int) -> datetime:
        """Slot k's wall time, aware in the zone with fold=0 (possibly inside a gap)."""
        steps, start = self._steps, self._start_local
        months = steps[1]
        if months:
            year, month0 = divmod(start.year * 12 + start.month - 1 + months * k, 12)
            day = min(start.day, days_in_month(year, month0 + 1))
            return datetime(
                year, month0 + 1, day, start.hour, start.minute, start.second,
                start.microsecond, self._zone,
            )  # fmt: skip
        return start + steps[2] * k

    def _wall_index(self, local: datetime) -> int:
        """The index of the first slot whose wall time is later than `local`'s (≥ 0).

        `local` is aware in the zone. Exact, from calendar arithmetic: for months the slot in
        `local`'s own month (if any) is the only one that needs a comparison.
        """
        _, months, days = self._steps
        start = self._start_local
        if not months:
            return max((local - start) // days + 1, 0)
        elapsed = (local.year - start.year) * 12 + local.month - start.month
        if elapsed < 0:
            return 0
        k, rest = divmod(elapsed, months)
        if rest:
            return k + 1  # slot k lies in an earlier month, slot k + 1 in a later one
        return k + 1 if self._wall_slot(k) <= local else k

    def _index_after(self, t: datetime) -> int | None:
        """The index k of the first slot strictly after `t` (None if it would pass year 9999)."""
        try:
            t_utc = t.astimezone(UTC)
            elapsed = self._steps[0]
            if elapsed is not None:
                if t_utc < self._start_utc:
                    return 0
                return (t_utc - self._start_utc) // elapsed + 1
            return self._index_wall(t_utc)
        except (OverflowError, ValueError):
            return None

    def _index_wall(self, t_utc: datetime) -> int:
        """`_index_after` for calendar units: one calendar computation, plus a step or two
        only when `t` is the second occurrence of an ambiguous wall time."""
        local = t_utc.astimezone(self._zone)
        k = self._wall_index(local)
        if not local.fold and self._canonical:
            # `local` is `t`'s wall time read as its first occurrence, so reading is monotonic:
            # a wall time ≤ t's reads as an instant ≤ t, a later one as an instant > t.
            return k
        # t is a second occurrence (slots of earlier wall times than t's are still ≤ t, but a
        # slot of a later one may be a first occurrence before t), or slot 0 is one itself.
        if t_utc < self._start_utc:
            return 0
        k = max(k, 1)
        while self._slot(k).astimezone(UTC) <= t_utc:
            k += 1
        return k

    def _next_slot(self, t: datetime) -> datetime | None:
        """The first slot strictly after the aware instant `t`, in the zone; None past `stop`
        (inclusive) or past year 9999."""
        try:
            t_utc = t.astimezone(UTC)
            start_utc, stop_utc = self._start_utc, self._stop_utc
            if t_utc < start_utc:
                return None if stop_utc is not None and start_utc > stop_utc else self._slot0()
            elapsed = self._steps[0]
            if elapsed is not None:
                slot_utc = start_utc + elapsed * ((t_utc - start_utc) // elapsed + 1)
                if stop_utc is not None and slot_utc > stop_utc:
                    return None
                return slot_utc.astimezone(self._zone)
            slot = self._slot(self._index_wall(t_utc))
            if stop_utc is not None and slot.astimezone(UTC) > stop_utc:
                return None
        except (OverflowError, ValueError):
            return None
        return slot


class IntervalTrigger(SlotArithmetic):
    """The slots ``start + k × interval`` up to an inclusive `stop`, in `zone`
    (`SlotArithmetic` says how they are computed).

    `start` and `stop` are aware instants; `zone` is where wall-clock steps are taken.
    `next_after` is O(1): a few microseconds whatever the schedule's age.
    """

    __slots__ = (
        "_canonical",
        "_start_local",
        "_start_utc",
        "_steps",
        "_stop_utc",
        "_zone",
        "interval",
        "start",
        "stop",
    )

    def __init__(
        self, start: datetime, interval: Interval, zone: tzinfo, stop: datetime | None = None
    ) -> None:
        if start.tzinfo is None:
            raise ValueError("IntervalTrigger needs an aware start")
        if stop is not None and stop.tzinfo is None:
            raise ValueError("IntervalTrigger needs an aware stop")
        self.start = start
        self.interval = interval
        self.stop = stop
        self._set_schedule(start, interval, zone, stop)

    @property
    def zone(self) -> tzinfo:
        return self._zone

    def slot(self, k: int) -> datetime:
        """The k-th slot (k = 0 is `start`), aware in the job's zone, ignoring `stop`."""
        return self._slot(k)

    def index_after(self, t: datetime) -> int | None:
        """The index k of the first slot strictly after `t` (None if it would pass year 9999)."""
        return self._index_after(t)

    def next_after(self, t: datetime) -> datetime | None:
        """The first slot strictly after the instant `t` (aware, any zone), in the job's zone;
        None past `stop` (inclusive) or past year 9999. Raises ValueError for a naive `t`."""
        if t.tzinfo is None:
            raise ValueError("next_after needs an aware datetime")
        return self._next_slot(t)

    def __repr__(self) -> str:
        return (
            f"IntervalTrigger(start={self.start.isoformat()}, interval='{self.interval}', "
            f"stop={None if self.stop is None else self.stop.isoformat()})"
        )
