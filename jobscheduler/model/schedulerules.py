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

These rules read the values of a job being built (`Job` calls them while it checks itself),
so they take the values, not the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any

from ..triggers.base import Trigger
from ..triggers.interval import Interval, parse_interval, shared_interval
from .jobparts import Dependence, _fail, aware_in_range

__all__ = [
    "Starters",
    "aware_bound",
    "build_trigger",
    "check_schedule",
    "checked_dependence",
    "checked_interval",
]


class Starters:
    """The values of a job that say what starts it (as given: checked or not).

    A plain class, not a NamedTuple: making a NamedTuple compiles its constructor from text,
    a cost at every start of the command line."""

    __slots__ = ("calendar", "cron", "dependence", "interval", "on_demand")

    # The keys in the order they are named when a job has two of them.
    KEYS = ("interval", "cron", "calendar", "dependence", "on_demand")

    def __init__(
        self, interval: Any, cron: Any, calendar: Any, dependence: Any, on_demand: Any
    ) -> None:
        self.interval = interval
        self.cron = cron
        self.calendar = calendar
        self.dependence = dependence
        self.on_demand = on_demand

    def present(self) -> list[str]:
        """The keys set, in the order they are named when a job has two of them."""
        return [
            key
            for key in self.KEYS
            if (
                self.on_demand is not False
                if key == "on_demand"
                else getattr(self, key) is not None
            )
        ]

    def kind(self) -> str:
        """``interval``, ``cron``, ``calendar``, ``once`` (start alone), ``dependence`` or
        ``on_demand`` (for a valid job)."""
        present = self.present()
        return present[0] if present else "once"


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


def check_schedule(name: str, start: Any, stop: Any, starters: Starters) -> None:
    """Refuse (`InvalidJobError` naming the key) a job that breaks the "exactly one of"
    rule (module notes)."""
    present = starters.present()
    bounded = start is not None or stop is not None
    if len(present) > 1:
        raise _fail(
            f"a job has exactly one of interval, cron, calendar, dependence or on_demand, "
            f"not both {present[0]} and {present[1]}",
            key=present[1],
        )
    kind = present[0] if present else None
    if kind == "dependence":
        _check_dependent(name, bounded, starters.dependence)
    elif kind == "on_demand":
        if bounded:
            raise _fail(
                "an on-demand job has no schedule: it runs only when asked "
                f"(remove {'start' if start is not None else 'stop'} or on_demand)",
                key="on_demand",
            )
    elif kind is None:
        _check_one_off(start, stop)
    else:
        if kind == "interval" and start is None:
            raise _fail("a scheduled job needs a start date and time", key="start")
        check_order(start, stop)


def _check_dependent(name: str, bounded: bool, dependence: Any) -> None:
    if not isinstance(dependence, Dependence):
        return  # reported by the dependence's own check
    if bounded:
        raise _fail(
            "a job has either a schedule (start, interval, stop) or a dependence, not both",
            key="dependence",
        )
    if dependence.job_name == name:
        raise _fail("a job cannot depend on itself", key="dependence")


def _check_one_off(start: Any, stop: Any) -> None:
    if start is None:
        raise _fail(
            "a job needs a schedule (start and interval, cron, calendar, or start alone "
            "for one run), a dependence, or on_demand: true",
            key="dependence",
        )
    if stop is not None:
        raise _fail(
            "a one-off job (start alone) runs once, at start: it has no stop "
            "(add an interval, cron or calendar to repeat it)",
            key="stop",
        )


def check_order(start: Any, stop: Any) -> None:
    """Refuse a `stop` before `start` (either may be unchecked yet: then nothing is said)."""
    if (
        stop is not None
        and isinstance(start, datetime)
        and isinstance(stop, datetime)
        and start.astimezone(UTC) > stop.astimezone(UTC)
    ):
        raise _fail(f"start {start.isoformat()} is after stop {stop.isoformat()}", key="stop")


def build_trigger(
    cron: str | None,
    calendar: str | None,
    zone: tzinfo,
    start: datetime | None,
    stop: datetime | None,
) -> Trigger | None:
    """The cron or calendar trigger of a valid job (None for other kinds)."""
    if cron is not None:
        from ..triggers.cron import CronTrigger  # with cronsim: for cron jobs only

        return CronTrigger(cron, zone, start, stop)
    if calendar is not None:
        from ..triggers.calendar import CalendarTrigger  # its first use imports it (see Job)

        return CalendarTrigger(calendar, zone, start, stop)
    return None
