"""What starts a job: the "exactly one of" rule, and the job's trigger.

A job has exactly one of:

- ``interval`` (with ``start``, optional ``stop``): slots ``start + k × interval``;
- ``cron``: a cron expression (`triggers.cron`); ``start``/``stop`` optional inclusive bounds;
- ``calendar``: a systemd ``OnCalendar`` expression (`triggers.calendar`); bounds as cron;
- ``start`` alone: a one-off, one run at ``start`` (no ``stop``);
- ``dependence``: runs after another job (no ``start``/``stop``);
- ``on_demand: true``: runs only when asked (``run_now``, ``submit``, a queue row; no
  ``start``/``stop``).

Anything else is refused, naming the job and the key at fault: two of them (the second key
named), bounds on a dependent or on-demand job, ``stop`` on a one-off, none at all (the
specification's rule g: key ``dependence``, as before).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any, Protocol

from ..triggers.base import Trigger
from ..triggers.calendar import CalendarTrigger
from ..triggers.cron import CronTrigger
from ..triggers.interval import Interval, parse_interval, shared_interval
from .jobparts import Dependence, _fail, aware_in_range


class Job(Protocol):
    """What these checks read of a `Job` (a protocol: `job` imports this module)."""

    @property
    def name(self) -> str: ...
    @property
    def start(self) -> datetime | None: ...
    @property
    def stop(self) -> datetime | None: ...
    @property
    def interval(self) -> Any: ...
    @property
    def cron(self) -> str | None: ...
    @property
    def calendar(self) -> str | None: ...
    @property
    def dependence(self) -> Dependence | None: ...
    @property
    def on_demand(self) -> bool: ...


__all__ = [
    "aware_bound",
    "build_trigger",
    "check_schedule",
    "checked_dependence",
    "checked_interval",
    "describe_schedule",
    "schedule_kind",
]

# In the order they are named when a job has two of them.
_KINDS = ("interval", "cron", "calendar", "dependence", "on_demand")


def checked_interval(value: object) -> Interval | None:
    """`value` as a (shared) `Interval`: an Interval, text such as ``"1 day"``, or None."""
    if value is None:
        return None
    if isinstance(value, Interval):
        return shared_interval(value)
    if isinstance(value, str):
        return parse_interval(value)
    raise ValueError(f"interval must be an Interval or text such as '1 day', not {value!r}")


def aware_bound(value: object, zone: tzinfo, key: str) -> datetime | None:
    """`start` or `stop` made aware (naive: a wall time in `zone`), None kept; ValueError
    naming `key` for what is no date and time or falls outside the years 1 to 9999."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValueError(f"{key} must be a date and time, not {value!r}")
    return aware_in_range(value, zone, key)


def checked_dependence(value: object) -> Dependence | None:
    """A `Dependence`, or a mapping of its fields (accepted, as text is for interval and
    type, so that its problems, such as a negative delay, are reported with the job's name)."""
    if value is None or isinstance(value, Dependence):
        return value
    if isinstance(value, Mapping):
        return Dependence(**value)
    raise ValueError(f"dependence must be a Dependence, not {value!r}")


def _present(job: Job) -> list[str]:
    return [
        key
        for key in _KINDS
        if (job.on_demand is not False if key == "on_demand" else getattr(job, key) is not None)
    ]


def schedule_kind(job: Job) -> str:
    """``interval``, ``cron``, ``calendar``, ``once`` (start alone), ``dependence`` or
    ``on_demand``: what starts `job` (a valid one)."""
    present = _present(job)
    return present[0] if present else "once"


def check_schedule(job: Job) -> None:
    """Refuse (`InvalidJobError` naming the key) a job that breaks the "exactly one of"
    rule (module notes)."""
    if (
        job.interval is not None
        and job.dependence is None
        and job.cron is None
        and job.calendar is None
        and job.on_demand is False
        and job.start is not None
    ):  # the common case, an interval job, without building the list below
        _check_order(job.start, job.stop)
        return
    present = _present(job)
    bounded = job.start is not None or job.stop is not None
    if len(present) > 1:
        raise _fail(
            f"a job has exactly one of interval, cron, calendar, dependence or on_demand, "
            f"not both {present[0]} and {present[1]}",
            key=present[1],
        )
    kind = present[0] if present else None
    if kind == "dependence":
        if not isinstance(job.dependence, Dependence):
            return  # reported by the dependence's own check
        if bounded:
            raise _fail(
                "a job has either a schedule (start, interval, stop) or a dependence, not both",
                key="dependence",
            )
        if job.dependence.job_name == job.name:
            raise _fail("a job cannot depend on itself", key="dependence")
        return
    if kind == "on_demand":
        if bounded:
            raise _fail(
                "an on-demand job has no schedule: it runs only when asked "
                f"(remove {'start' if job.start is not None else 'stop'} or on_demand)",
                key="on_demand",
            )
        return
    if kind is None:
        if job.start is None:
            raise _fail(
                "a job needs a schedule (start and interval, cron, calendar, or start alone "
                "for one run), a dependence, or on_demand: true",
                key="dependence",
            )
        if job.stop is not None:
            raise _fail(
                "a one-off job (start alone) runs once, at start: it has no stop "
                "(add an interval, cron or calendar to repeat it)",
                key="stop",
            )
        return
    if kind == "interval" and job.start is None:
        raise _fail("a scheduled job needs a start date and time", key="start")
    _check_order(job.start, job.stop)


def _check_order(start: datetime | None, stop: datetime | None) -> None:
    if (
        stop is not None
        and isinstance(start, datetime)
        and isinstance(stop, datetime)
        and start.astimezone(UTC) > stop.astimezone(UTC)
    ):
        raise _fail(f"start {start.isoformat()} is after stop {stop.isoformat()}", key="stop")


def build_trigger(job: Job, zone: tzinfo) -> Trigger | None:
    """The cron or calendar trigger of a valid `job` (None for other kinds)."""
    if job.cron is not None:
        return CronTrigger(job.cron, zone, job.start, job.stop)
    if job.calendar is not None:
        return CalendarTrigger(job.calendar, zone, job.start, job.stop)
    return None


def describe_schedule(job: Job) -> str:
    """What starts `job`, in a few words, its kind first (``jobscheduler list``, ``status``,
    the status page): ``every 1 day from …``, ``cron 0 3 * * * from …``, ``calendar Mon..Fri
    09:00``, ``once at …``, ``after JOB successful +10s``, ``on demand``; a `stop` adds
    ``until …``."""
    if job.dependence is not None:
        dep = job.dependence
        delay = f" +{dep.delay.total_seconds():g}s" if dep.delay else ""
        return f"after {dep.job_name} {dep.event.value}{delay}"
    if job.on_demand:
        return "on demand"
    start = job.start.isoformat(timespec="seconds") if job.start else None
    stop = job.stop.isoformat(timespec="seconds") if job.stop else None
    bounds = (f" from {start}" if start else "") + (f" until {stop}" if stop else "")
    if job.cron is not None:
        return f"cron {job.cron}{bounds}"
    if job.calendar is not None:
        return f"calendar {job.calendar}{bounds}"
    if job.interval is None:
        return f"once at {start}"
    return f"every {job.interval}{bounds}"
