"""`CalendarTrigger`: systemd `OnCalendar` expressions (``Mon..Fri 09:00``, ``*:0/15``,
``quarterly``, ``*-*~01 23:00 Europe/Berlin``).

`calendar_parse` reads an expression as systemd 252 does (and refuses what it refuses);
`calendar_eval` finds its elapses as systemd does, DST days included: the slots equal
``systemd-analyze calendar --iterations=N --base-time=…`` run with ``TZ`` set to the job's
zone (tests/test_calendar_systemd.py checks it against the real thing). Why our own code:
the `oncalendar` package on PyPI (1.1, March 2024) steps field by field as cronsim does:
it refuses fractional seconds (``*:*:0/7.5``) and never-firing dates (``*-02-30``) that
systemd accepts, and runs the repeated hour of a fall-back twice where systemd does not.

A zone written in the expression wins over the job's `timezone`. `start` and `stop` are
inclusive bounds. An expression that never fires (``*-02-30``) is valid and has no slot.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo

from .base import bounds_utc
from .calendar_eval import next_elapse
from .calendar_parse import parse_calendar
from .calendar_spec import USEC_PER_SEC, CalendarError, CalendarSpec
from .zones import localize

__all__ = ["CalendarError", "CalendarTrigger", "check_calendar"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def check_calendar(expression: object, zone: tzinfo | None = None) -> str:
    """`expression` if systemd accepts it (run with ``TZ`` set to `zone`), else
    `CalendarError` (a ValueError) saying why."""
    if not isinstance(expression, str):
        raise CalendarError(f"calendar must be a text such as 'Mon..Fri 09:00', not {expression!r}")
    parse_calendar(expression, _key(zone))
    return expression


def _key(zone: tzinfo | None) -> str | None:
    key = getattr(zone, "key", None)
    return key if isinstance(key, str) else ("UTC" if zone is UTC else None)


def _usec(t: datetime) -> int:
    delta = t - _EPOCH
    return (delta.days * 86400 + delta.seconds) * USEC_PER_SEC + delta.microseconds


class CalendarTrigger:
    """The elapses of a calendar `expression` in `zone` (unless the expression names its own
    zone), within the inclusive bounds `start` and `stop` (aware instants, or None).

    `next_after(t)` is the first slot strictly after `t`, or None past `stop`, past 2199 or
    for an expression that never fires."""

    __slots__ = ("_spec", "_start", "_stop", "_zone", "expression", "start", "stop")

    def __init__(
        self,
        expression: str,
        zone: tzinfo,
        start: datetime | None = None,
        stop: datetime | None = None,
    ) -> None:
        start_utc, stop_utc = bounds_utc("CalendarTrigger", start, stop)
        self.expression = check_calendar(expression, zone)
        self._spec: CalendarSpec = parse_calendar(expression, _key(zone))
        self.start = start
        self.stop = stop
        self._zone = zone
        self._start = None if start_utc is None else _usec(start_utc)
        self._stop = None if stop_utc is None else _usec(stop_utc)

    @property
    def zone(self) -> tzinfo:
        return self._zone

    @property
    def normalized(self) -> str:
        """systemd's normalised form of the expression (``Mon..Fri *-*-* 09:00:00``)."""
        return str(self._spec)

    def next_after(self, t: datetime) -> datetime | None:
        """The first slot strictly after the instant `t` (aware; a naive one is read in the
        job's zone), in the job's zone; None when there is none."""
        if t.tzinfo is None:
            t = localize(t, self._zone)
        after = _usec(t.astimezone(UTC))
        if self._start is not None and after < self._start:
            after = self._start - 1  # `start` is inclusive
        found = next_elapse(self._spec, self._zone, after)
        if found is None or (self._stop is not None and found > self._stop):
            return None
        try:
            return (_EPOCH + timedelta(microseconds=found)).astimezone(self._zone)
        except OverflowError:
            return None

    def __repr__(self) -> str:
        return f"CalendarTrigger({self.expression!r}, zone={self._zone})"
