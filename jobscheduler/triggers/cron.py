"""`CronTrigger`: cron expressions, evaluated by the `cronsim` package.

Why cronsim: it is maintained, small, pure Python, typed, reads time zones through zoneinfo,
and follows Debian cron's DST rules, which are the ones people expect of cron (croniter runs
``30 2 * * *`` twice every autumn in Europe). We accept exactly what it accepts: 5 fields, or 6
with the seconds first; names (``MON``, ``JAN``), ``L`` (last day, last weekday of a kind:
``5L``), ``LW`` (the month's last weekday), ``#`` (``MON#2``), ranges, lists and steps. It
refuses ``W`` after a day number (``15W``) and ``?``, so do we.

DST, as cronsim (and Debian cron) has it, in the job's zone:

- a 5-field expression with a fixed minute and hour (``30 2 * * *``) is read on the wall
  clock: a slot inside a spring-forward gap runs right after the gap (03:00 in Berlin),
  and a slot inside the repeated hour of a fall-back runs once, at its first occurrence;
- an expression with a wildcard minute or hour (``*/15 * * * *``, ``30 * * * *``), and any
  6-field expression, steps through real time: it runs in both occurrences of the repeated
  hour, and not in the gap (which has no wall time).

`start` and `stop` are inclusive bounds: the first slot is the first one at or after
`start`; a slot equal to `stop` runs.
"""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from typing import Any

from cronsim import CronSim, CronSimError

from .base import bounds_utc
from .zones import localize

__all__ = ["CronTrigger", "check_cron"]

_EPSILON = timedelta(microseconds=1)
_HOUR = timedelta(hours=1)
_MINUTE = timedelta(minutes=1)
_DAYS_32 = timedelta(days=32)
# A parse needs some date; a naive one, so that cronsim sets up no DST handling of its own.
_REFERENCE = datetime(2000, 1, 1)


@lru_cache(maxsize=4096)
def _parsed(expression: str) -> dict[str, Any]:
    """cronsim's parsed state for `expression` (its fields as sets), shared by every trigger
    with that expression: parsing is most of what building a `CronSim` costs (~15 µs)."""
    state = dict(CronSim(expression, _REFERENCE).__dict__)
    state["hours_sorted"] = tuple(sorted(state["hours"]))
    state["minutes_sorted"] = tuple(sorted(state["minutes"]))
    state["month_days"] = {}  # (year, month) → its matching days, filled as asked
    return state


class _Sim(CronSim):
    """cronsim, with its day, hour and minute steps taken in one jump: cronsim ticks one day
    (hour, minute) at a time until the field matches or wraps; the jump lands where those
    ticks would (`_jump` says when it can be sure of it, else cronsim's own ticks run).
    tests/test_cron.py holds the result to cronsim's own on generated expressions."""

    hours_sorted: tuple[int, ...]
    minutes_sorted: tuple[int, ...]
    month_days: dict[tuple[int, int], tuple[int, ...]]

    def advance_day(self) -> bool:
        # cronsim walks day by day, testing each; the days of a month that match are the
        # same every time, so they are found once per month and expression and kept.
        dt = self.dt
        key = (dt.year, dt.month)
        days = self.month_days.get(key)
        if days is None:
            if len(self.month_days) > 4096:
                self.month_days.clear()
            last = calendar.monthrange(dt.year, dt.month)[1]
            days = tuple(d for d in range(1, last + 1) if self.match_day(date(*key, d)))
            self.month_days[key] = days
        if dt.day in days:
            return False
        later = next((d for d in days if d > dt.day), None)
        if later is None:  # cronsim's walk stops on the 1st of the next month
            needle = (dt.date().replace(day=1) + _DAYS_32).replace(day=1)
        else:
            needle = dt.date().replace(day=later)
        self.dt = datetime.combine(needle, time(), tzinfo=dt.tzinfo)
        return True

    def advance_hour(self) -> bool:
        dt = self.dt
        if dt.hour in self.hours:
            return False
        later = next((h for h in self.hours_sorted if h > dt.hour), 24)  # 24: next day 00
        start = dt.replace(minute=0, second=0)
        if self._jump(start, (later - dt.hour) * _HOUR):
            return True
        return super().advance_hour()

    def advance_minute(self) -> bool:
        dt = self.dt
        if dt.minute in self.minutes:
            return False
        later = next((m for m in self.minutes_sorted if m > dt.minute), 60)  # 60: next hour
        start = dt.replace(second=0)
        if self._jump(start, (later - dt.minute) * _MINUTE):
            return True
        return super().advance_minute()

    def _jump(self, start: datetime, by: timedelta) -> bool:
        """Set `dt` to `start` + `by` if that is where cronsim's ticks would end: always on a
        naive or UTC clock; on a zone's clock when the offset is the same at both ends (no
        DST change in between, so the wall clock ran on one field at a time)."""
        zone = start.tzinfo
        if zone is None or zone is UTC:
            self.dt = start + by
            return True
        end = (start.astimezone(UTC) + by).astimezone(zone)
        if end.utcoffset() != start.utcoffset():
            return False
        self.dt = end
        return True


def check_cron(expression: object) -> str:
    """`expression` if cronsim accepts it, else ValueError saying why (cronsim's reason)."""
    if not isinstance(expression, str):
        raise ValueError(f"cron must be a text such as '0 3 * * *', not {expression!r}")
    if not expression.strip():
        raise ValueError("cron must not be empty")
    try:
        _parsed(expression)
    except CronSimError as exc:
        raise ValueError(f"invalid cron expression {expression!r}: {exc}") from None
    except (ValueError, IndexError, TypeError) as exc:  # what slips past cronsim's own checks
        raise ValueError(f"invalid cron expression {expression!r}: {exc}") from None
    return expression


class CronTrigger:
    """The slots of a cron `expression` in `zone`, within the inclusive bounds `start` and
    `stop` (aware instants, or None).

    `next_after(t)` is the first slot strictly after `t`, or None past `stop` or when cronsim
    finds none within 50 years of `t` (``0 0 30 2 *`` never fires). O(fields), ~10 µs.
    """

    __slots__ = ("_five", "_start", "_stop", "_zone", "expression", "start", "stop")

    def __init__(
        self,
        expression: str,
        zone: tzinfo,
        start: datetime | None = None,
        stop: datetime | None = None,
    ) -> None:
        self._start, self._stop = bounds_utc("CronTrigger", start, stop)
        self.expression = check_cron(expression)
        self.start = start
        self.stop = stop
        self._zone = zone
        self._five = len(expression.split()) == 5

    @property
    def zone(self) -> tzinfo:
        return self._zone

    def next_after(self, t: datetime) -> datetime | None:
        """The first slot strictly after the instant `t` (aware; a naive one is read in the
        zone), in the zone; None past `stop` or when there is none."""
        if t.tzinfo is None:
            t = localize(t, self._zone)
        t_utc = t.astimezone(UTC)
        start = self._start
        if start is not None and t_utc < start:
            # `start` is inclusive: look from just before it.
            t_utc = start - _EPSILON
        try:
            slot = self._next(t_utc)
        except (OverflowError, ValueError):
            return None  # past year 9999
        if slot is None or (self._stop is not None and slot.astimezone(UTC) > self._stop):
            return None
        return slot

    def _next(self, t_utc: datetime) -> datetime | None:
        sim: CronSim = _Sim.__new__(_Sim)
        sim.__dict__.update(_parsed(self.expression))
        local = t_utc.astimezone(self._zone)
        sim.skip_initial_tick = False
        sim.dt = local.replace(microsecond=0)
        sim.fixup_tz = None
        if self._five and not sim.parts[1].startswith("*") and not sim.parts[2].startswith("*"):
            # cronsim's own rule (see CronSim.__init__): a fixed minute and hour is stepped on
            # the naive wall clock and read in the zone at the end.
            sim.fixup_tz = self._zone
            sim.dt = sim.dt.replace(tzinfo=None)
        for _ in range(3):
            try:
                slot = next(sim)
            except StopIteration:
                return None
            # On the wall clock, a slot in the repeated hour is its first occurrence, which
            # lies before `t` when `t` is in the second one: that slot has had its turn.
            if slot.astimezone(UTC) > t_utc:
                return slot
        return None

    def __repr__(self) -> str:
        return f"CronTrigger({self.expression!r}, zone={self._zone})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CronTrigger):
            return NotImplemented
        return (self.expression, self._zone, self._start, self._stop) == (
            other.expression,
            other._zone,
            other._start,
            other._stop,
        )

    def __hash__(self) -> int:
        return hash((self.expression, self._start, self._stop))
