"""The parsed form of a systemd `OnCalendar` expression (`calendar_parse` builds it,
`calendar_eval` searches it), and systemd's normalised text of it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["USEC_PER_SEC", "CalendarError", "CalendarSpec", "Chain", "Component"]

USEC_PER_SEC = 1_000_000


class CalendarError(ValueError):
    """An expression systemd refuses."""


@dataclass(frozen=True)
class Component:
    """One element of a field's list: `start`, optionally ``..stop`` (-1: none) and a
    ``/repeat`` (0: none). Seconds are in microseconds."""

    start: int
    stop: int = -1
    repeat: int = 0


Chain = tuple[Component, ...] | None
"""A field: None is ``*`` (any value); else its components, sorted and without duplicates."""


@dataclass(frozen=True)
class CalendarSpec:
    """A parsed and normalised expression (systemd's ``CalendarSpec``)."""

    weekdays: int  # bit 0 Monday … bit 6 Sunday; -1: any day
    year: Chain
    month: Chain
    day: Chain
    hour: Chain
    minute: Chain
    microsecond: Chain
    end_of_month: bool
    utc: bool
    timezone: str | None
    # Standard (0) or summer (1) time forced by the zone's own abbreviation written as the
    # suffix (``12:00 CEST`` for a job in Europe/Berlin); -1: not forced. `dst_name` is that
    # abbreviation, as systemd prints it.
    dst: int = -1
    dst_name: str | None = None

    def __str__(self) -> str:
        """systemd's normalised form (``systemd-analyze calendar``'s "Normalized form")."""
        parts = []
        if self.weekdays != -1:
            parts.append(_format_weekdays(self.weekdays) + " ")
        date = (
            f"{_format_chain(self.year, 4)}-{_format_chain(self.month, 2)}"
            f"{'~' if self.end_of_month else '-'}{_format_chain(self.day, 2)}"
        )
        time = (
            f"{_format_chain(self.hour, 2)}:{_format_chain(self.minute, 2)}:"
            f"{_format_chain(self.microsecond, 2, usec=True)}"
        )
        parts.append(f"{date} {time}")
        if self.utc:
            parts.append(" UTC")
        elif self.timezone is not None:
            parts.append(f" {self.timezone}")
        elif self.dst_name is not None:
            parts.append(f" {self.dst_name}")
        return "".join(parts)


_WEEKDAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _format_weekdays(bits: int) -> str:
    """The weekdays as systemd writes them: runs of three or more days as ``Mon..Wed``."""
    return ",".join(_format_weekday_run(first, last) for first, last in _weekday_runs(bits))


def _weekday_runs(bits: int) -> list[tuple[int, int]]:
    """The runs of consecutive weekdays in `bits` (bit 0 Monday): (first, last)."""
    runs: list[tuple[int, int]] = []
    for day in range(7):
        if bits & (1 << day):
            if runs and runs[-1][1] == day - 1:
                runs[-1] = (runs[-1][0], day)
            else:
                runs.append((day, day))
    return runs


def _format_weekday_run(first: int, last: int) -> str:
    if first == last:
        return _WEEKDAY_NAMES[first]
    between = ".." if last > first + 1 else ","
    return _WEEKDAY_NAMES[first] + between + _WEEKDAY_NAMES[last]


def _format_chain(chain: Chain, width: int, usec: bool = False) -> str:
    if chain is None:
        return "*"
    if usec and len(chain) == 1 and chain[0] == Component(0, -1, USEC_PER_SEC):
        return "*"
    unit = USEC_PER_SEC if usec else 1
    return ",".join(_format_component(c, width, unit) for c in chain)


def _format_component(c: Component, width: int, unit: int) -> str:
    text = _format_value(c.start, width, unit)
    if c.stop > 0:
        text += ".." + _format_value(c.stop, width, unit)
    if c.repeat > 0 and not (c.stop > 0 and c.repeat == unit):  # a range repeats by 1 anyway
        text += "/" + _format_value(c.repeat, 0, unit)
    return text


def _format_value(value: int, width: int, unit: int) -> str:
    """`value` (in `unit`s: seconds are written in µs) zero-padded to `width` digits, with
    its fraction when it has one."""
    whole, fraction = divmod(value, unit)
    return f"{whole:0{width}d}.{fraction:06d}" if fraction else f"{whole:0{width}d}"
