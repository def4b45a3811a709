"""Schedule arithmetic: intervals, and the slots of an anchored interval schedule.

A scheduled job's runs are ``start + k × interval`` for k = 0, 1, 2, … — never "now + interval",
so a late run shifts nothing. DAY, WEEK, MONTH and YEAR steps are taken on the wall clock of
the job's zone (a daily 02:30 job stays at 02:30 across DST); HOUR, MINUTE and SECOND steps are
elapsed time. MONTH and YEAR steps count from the start, clamping to the month's end (31 Jan
monthly: 28/29 Feb, 31 Mar, 30 Apr), so a short month never drags later slots to the 28th.

`IntervalTrigger.next_after` computes the slot index directly: O(1) whatever the job's age.
"""

from __future__ import annotations

import calendar
import enum
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Protocol, runtime_checkable

from .timezones import localize, wall_time

__all__ = ["Interval", "IntervalTrigger", "Trigger", "Unit"]


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
            raise ValueError(f"unknown interval unit {text!r}{hint}; expected one of: {names}")
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
_INTERVAL_RE = re.compile(r"^\s*(?:every\s+)?([+-]?\d+)\s*([A-Za-z]+)\s*$")


@dataclass(frozen=True)
class Interval:
    """``value`` units: the step between two slots. ``value`` is a whole number above 0."""

    value: int
    unit: Unit

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ValueError(f"interval value must be a whole number, not {self.value!r}")
        if self.value <= 0:
            raise ValueError(f"interval value must be above 0, not {self.value}")
        if not isinstance(self.unit, Unit):
            if isinstance(self.unit, str):
                object.__setattr__(self, "unit", Unit.parse(self.unit))
            else:
                raise ValueError(f"interval unit must be a Unit, not {self.unit!r}")

    @classmethod
    def parse(cls, text: str) -> Interval:
        """Read ``"<n> <unit>"``: ``"90 minutes"``, ``"1 day"``, ``"2 weeks"``, ``"1h"``."""
        if not isinstance(text, str):
            raise ValueError(f"interval must be text such as '1 day', not {text!r}")
        match = _INTERVAL_RE.match(text)
        if match is None:
            raise ValueError(f"interval {text!r} is not '<number> <unit>', e.g. '90 minutes'")
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


@runtime_checkable
class Trigger(Protocol):
    """A schedule: pure, it depends only on its definition and `t`."""

    def next_after(self, t: datetime) -> datetime | None:
        """The first slot strictly after `t` (aware), or None when there is none."""
        ...


def add_months(wall: datetime, months: int, day: int) -> datetime:
    """`wall` moved by `months` calendar months, on `day` clamped to the month's length."""
    index = wall.year * 12 + (wall.month - 1) + months
    year, month = divmod(index, 12)
    month += 1
    last = calendar.monthrange(year, month)[1]
    return wall.replace(year=year, month=month, day=min(day, last))


class IntervalTrigger:
    """The slots ``start + k × interval`` up to an inclusive `stop`, in `zone`.

    `start` and `stop` are aware instants; `zone` is where wall-clock steps are taken.
    """

    __slots__ = ("_anchor", "_elapsed", "_start_wall", "interval", "start", "stop", "zone")

    def __init__(
        self, start: datetime, interval: Interval, zone: tzinfo, stop: datetime | None = None
    ) -> None:
        if start.tzinfo is None:
            raise ValueError("IntervalTrigger needs an aware start")
        self.start = start
        self.interval = interval
        self.zone = zone
        self.stop = stop
        self._start_wall = wall_time(start, zone)
        self._anchor = start.astimezone(UTC)
        self._elapsed = interval.elapsed

    def slot(self, k: int) -> datetime:
        """The k-th slot (k = 0 is `start`), aware in the job's zone, ignoring `stop`."""
        if self._elapsed is not None:
            return (self._anchor + self._elapsed * k).astimezone(self.zone)
        if k == 0:
            return self.start.astimezone(self.zone)
        return localize(self._wall_slot(k), self.zone)

    def _wall_slot(self, k: int) -> datetime:
        months = self.interval.months
        if months:
            return add_months(self._start_wall, months * k, self._start_wall.day)
        return self._start_wall + timedelta(days=self.interval.days * k)

    def _estimate(self, t: datetime) -> int:
        """A slot index near the first slot after `t`, from wall-clock arithmetic."""
        tw = wall_time(t, self.zone)
        sw = self._start_wall
        months = self.interval.months
        if months:
            return ((tw.year - sw.year) * 12 + (tw.month - sw.month)) // months
        return (tw - sw) // timedelta(days=self.interval.days)

    def index_after(self, t: datetime) -> int | None:
        """The index k of the first slot strictly after `t` (None if it would pass year 9999)."""
        try:
            if self._elapsed is not None:
                if t < self._anchor:
                    return 0
                return (t - self._anchor) // self._elapsed + 1
            if t < self.start:
                return 0
            # The estimate is within a step of the answer: DST moves a wall time by hours,
            # never by a whole day. Walk back while the slot before is still after t, then
            # forward while the slot is not yet after t; each loop runs at most twice.
            k = max(0, self._estimate(t) - 1)
            while k > 0 and self.slot(k - 1) > t:
                k -= 1
            while self.slot(k) <= t:
                k += 1
            return k
        except (OverflowError, ValueError):
            return None

    def next_after(self, t: datetime) -> datetime | None:
        if t.tzinfo is None:
            raise ValueError("next_after needs an aware datetime")
        k = self.index_after(t)
        if k is None:
            return None
        try:
            slot = self.slot(k)
        except (OverflowError, ValueError):
            return None
        if self.stop is not None and slot > self.stop:
            return None
        return slot

    def __repr__(self) -> str:
        return (
            f"IntervalTrigger(start={self.start.isoformat()}, interval='{self.interval}', "
            f"stop={None if self.stop is None else self.stop.isoformat()})"
        )
