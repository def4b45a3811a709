"""A job's schedule in words, for people (the job page): ``At 02:30 AM (Europe/Berlin)``.

`describe_schedule` (`jobschedule`) stays the short form that tools read (``cron 30 2 * * *
from …``); this is the sentence a page shows. Cron expressions are read by `cron-descriptor`
(a dependency of the ``http`` extra, imported when first needed): it covers the whole of
cron as `cronsim` reads it (seconds first in 6 fields, ``L``, ``LW``, ``5L``, ``MON#2``,
names), is kept up, MIT-licensed and pure Python (needing only typing_extensions). Without
it, or for an expression it cannot read, the sentence is ``Cron 30 2 * * *``. Calendar
expressions are put in words as far as their common shapes go (a time each day, every N
minutes, weekdays, a day of the month); any other shape is shown as systemd normalises it
(``Calendar *-*-01/2 04:00:00``). Every sentence ends with the zone its times are in.
"""

from __future__ import annotations

import logging
from datetime import datetime, tzinfo
from functools import lru_cache

from ..triggers.calendar_spec import USEC_PER_SEC, CalendarError, CalendarSpec, Chain, Component
from .event import Event
from .job import Job

__all__ = ["schedule_in_words"]

log = logging.getLogger("jobscheduler.http")

_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
_EVENTS = {
    Event.SUCCESSFUL: "succeeds",
    Event.FAILED: "fails",
    Event.NOT_STARTED: "does not start",
    Event.BOTH: "ends (succeeded or failed)",
}


def schedule_in_words(job: Job) -> str:
    """What starts `job`, as a sentence with its zone: ``At 02:30 AM (Europe/Berlin)``,
    ``Every 90 minutes, from 2024-01-01 00:00 (UTC)``, ``Monday through Friday at 09:00
    (UTC)``, ``Once, at …``, ``When nightly succeeds, 10 seconds later``, ``On demand``."""
    if job.dependence is not None:
        dep = job.dependence
        when = _EVENTS.get(dep.event, f"ends {dep.event.value}")
        later = f", {_amount(dep.delay.total_seconds(), 'second')} later" if dep.delay else ""
        return f"When {dep.job_name} {when}{later}"
    if job.on_demand:
        return "On demand (submitted or run now)"
    zone = job.timezone or _zone_name(job.zone)
    start = f", from {_time(job.start)}" if job.start is not None else ""
    stop = f", until {_time(job.stop)}" if job.stop is not None else ""
    if job.cron is not None:
        return f"{cron_in_words(job.cron)}{start}{stop} ({zone})"
    if job.calendar is not None:
        words, own_zone = _calendar_words(job.calendar, job.timezone)
        return f"{words}{start}{stop} ({own_zone or zone})"
    if job.interval is None:
        return f"Once, at {_time(job.start)} ({zone})"
    interval = job.interval
    every = _amount(interval.value, interval.unit.value, one="")
    return f"Every {every}{start}{stop} ({zone})"


@lru_cache(maxsize=1024)
def cron_in_words(expression: str) -> str:
    """`expression` in words (``At 02:30 AM``); ``Cron EXPRESSION`` when cron-descriptor is
    not installed or cannot read it."""
    try:
        from cron_descriptor import get_description  # lazy: the page's extra
    except ImportError:
        return f"Cron {expression}"
    try:
        return str(get_description(expression))
    except Exception:  # a shape it does not know: the expression itself is still true
        log.debug("cron-descriptor cannot read %r", expression, exc_info=True)
        return f"Cron {expression}"


def _zone_name(zone: tzinfo) -> str:
    """The IANA name of the job's zone (the machine's, for a job without `timezone`)."""
    return str(getattr(zone, "key", None) or zone.tzname(None) or "UTC")


def _time(moment: datetime | None) -> str:
    return "" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S").removesuffix(":00")


def _amount(value: float, unit: str, one: str = "1 ") -> str:
    """``1 day`` (or ``day`` with `one` empty), ``90 minutes``."""
    if value == 1:
        return f"{one}{unit}"
    return f"{value:g} {unit}s"


def _calendar_words(expression: str, zone_key: str | None) -> tuple[str, str | None]:
    """The calendar expression in words, and the zone it names itself (None: the job's)."""
    from ..triggers.calendar_parse import parse_calendar

    try:
        spec = parse_calendar(expression, zone_key)
    except CalendarError:
        return f"Calendar {expression}", None
    own_zone = "UTC" if spec.utc else spec.timezone
    time = _clock_words(spec)
    date = _date_words(spec)
    if time is None or date is None:
        return f"Calendar {spec}", own_zone
    days = _weekday_words(spec.weekdays)
    parts = [p for p in (days, date) if p]
    if not parts:
        every_day = "every day " if time.startswith("at ") else ""
        text = f"{every_day}{time}"
        return text[0].upper() + text[1:], own_zone
    when = ", ".join(parts)
    return f"{when[0].upper()}{when[1:]} {time}", own_zone


def _single(chain: Chain) -> int | None:
    """The one value of a field that holds one (None otherwise)."""
    if chain is not None and len(chain) == 1 and chain[0].stop == -1 and not chain[0].repeat:
        return chain[0].start
    return None


def _every(chain: Chain) -> int | None:
    """N for a field that is ``0/N`` (every N from 0), else None."""
    if chain is not None and len(chain) == 1:
        c = chain[0]
        if c.start == 0 and c.stop == -1 and c.repeat > 0:
            return c.repeat
    return None


def _clock_words(spec: CalendarSpec) -> str | None:
    """``at 09:00``, ``every 15 minutes``, ``every minute``, ``every hour at minute 5``;
    None for other shapes."""
    seconds = spec.microsecond
    whole = _single(seconds)
    if whole is None or whole % USEC_PER_SEC:
        if seconds == (Component(0, -1, USEC_PER_SEC),) and spec.hour is None:
            return "every second" if spec.minute is None else None
        return None
    second = whole // USEC_PER_SEC
    hour, minute = _single(spec.hour), _single(spec.minute)
    if hour is not None and minute is not None:
        return f"at {hour:02}:{minute:02}" + (f":{second:02}" if second else "")
    if second:
        return None
    if spec.hour is None and spec.minute is None:
        return "every minute"
    if spec.hour is None and (step := _every(spec.minute)) is not None:
        return f"every {_amount(step, 'minute', one='')}"
    if spec.hour is None and minute is not None:
        return f"every hour at minute {minute}"
    if (step := _every(spec.hour)) is not None and minute is not None:
        return f"every {_amount(step, 'hour', one='')} at minute {minute}"
    return None


def _date_words(spec: CalendarSpec) -> str | None:
    """``""`` (every day), ``on day 1 of the month``, ``on the last day of the month``,
    ``on January 1``; None for other shapes."""
    if spec.year is not None:
        return None
    day, month = _single(spec.day), _single(spec.month)
    if spec.day is None and spec.month is None:
        return ""
    if spec.end_of_month:
        if day is None or spec.month is not None:
            return None
        last = "last" if day == 1 else f"{_ordinal(day)} last"
        return f"on the {last} day of the month"
    if spec.month is None and day is not None:
        return f"on day {day} of the month"
    if month is not None and day is not None:
        return f"on {_MONTHS[month - 1]} {day}"
    return None


def _ordinal(number: int) -> str:
    """``2nd``, ``3rd``, ``11th``, ``21st``."""
    if 10 <= number % 100 <= 20:
        return f"{number}th"
    return f"{number}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(number % 10, 'th') }"


def _weekday_words(bits: int) -> str:
    """``""`` (any day), ``Monday through Friday``, ``on Monday and Thursday``."""
    if bits == -1 or bits == 0b1111111:
        return ""
    days = [day for day in range(7) if bits & (1 << day)]
    if len(days) >= 3 and days == list(range(days[0], days[-1] + 1)):
        return f"{_DAYS[days[0]]} through {_DAYS[days[-1]]}"
    names = [_DAYS[d] for d in days]
    return "on " + (names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1])
