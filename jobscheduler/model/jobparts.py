"""The small value objects a job is made of: `JobType`, `Dependence`, `Message`, `JobGroup`.

Each validates itself on construction and raises `InvalidJobError` naming the field at fault.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from types import MappingProxyType
from typing import Any

from ..errors import InvalidJobError, Problem
from ..triggers.zones import localize
from ..valueclass import field, value_class
from .event import Event

__all__ = ["Dependence", "JobGroup", "JobType", "Message"]

DEFAULT_KILL_GRACE = timedelta(seconds=5)
DEFAULT_OUTPUT_LIMIT = 64 * 1024
_REFERENCE_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


EMPTY_MAPPING: Mapping[Any, Any] = MappingProxyType({})
"""The empty read-only mapping every definition without args or messages shares."""


def _empty() -> Mapping[Any, Any]:
    return EMPTY_MAPPING


class JobType(enum.Enum):
    """EXTERNAL: an operating-system command. INTERNAL: a Python callable or class."""

    EXTERNAL = "external"
    INTERNAL = "internal"

    @classmethod
    def parse(cls, text: str) -> JobType:
        member = _JOB_TYPES.get(text.strip().lower()) if isinstance(text, str) else None
        if member is None:
            raise ValueError(f"unknown job type {text!r} (expected 'external' or 'internal')")
        return member

    def __str__(self) -> str:
        return self.value


_JOB_TYPES = {member.value: member for member in JobType}


def _fail(
    message: str, *, job: str | None = None, key: str | None = None, group: str | None = None
) -> InvalidJobError:
    return InvalidJobError(Problem(message, job=job, group=group, key=key))


MAX_DURATION = timedelta(days=3650)
"""The longest timeout, kill_grace or dependence delay: ten years (beyond, it is a typo, and
adding it to a date could leave the range of dates)."""


def _to_timedelta(value: timedelta | float | int, what: str) -> timedelta:
    if not isinstance(value, timedelta):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{what} must be a timedelta or a number of seconds, not {value!r}")
        if value != value or abs(value) > MAX_DURATION.total_seconds():  # NaN, inf, huge
            raise ValueError(f"{what} {value!r} is not a usable number of seconds")
        value = timedelta(seconds=value)
    if abs(value) > MAX_DURATION:
        raise ValueError(f"{what} must be at most ten years, not {_seconds(value)}")
    return value


def _seconds(value: timedelta) -> str:
    """A duration as people read it in a message: ``-5 seconds``, not ``-1 day, 23:59:55``."""
    return f"{value.total_seconds():g} seconds"


def unprintable_problem(name: str) -> str | None:
    """Why `name` (a job's or group's) is refused for holding a character that is not
    printable (a control, format or separator character other than the space: ``\\x00``,
    ``\\x0b``, ``\\x85``, ``\\u2028``, …), or None. Such a name cannot be shown in a log
    line, a mail subject or a header without being mangled, so it is refused at validation."""
    if name.isprintable():
        return None
    bad = next(c for c in name if not c.isprintable())
    return f"name {name!r} holds the character {bad!r}, which is not printable"


def aware_in_range(value: datetime, zone: tzinfo, key: str) -> datetime:
    """`value` made aware (a naive one is a wall time in `zone`), refused (ValueError naming
    `key`) when it or its reading in UTC or in `zone` falls outside the years 1 to 9999:
    the engine compares instants in UTC and steps wall times in the job's zone."""
    try:
        aware = localize(value, zone) if value.tzinfo is None else value
        aware.astimezone(UTC)
        aware.astimezone(zone)
    except OverflowError:
        raise ValueError(
            f"{key} {value.isoformat(sep=' ')} is out of range: in UTC or in the job's time zone "
            "it falls outside the years 1 to 9999"
        ) from None
    return aware


@value_class(frozen=True, init=False)
class Dependence:
    """Run after `job_name` ends with `event` (SUCCESSFUL, FAILED or BOTH), after `delay`.

    `delay` is a timedelta, never negative. A bare number is refused (`InvalidJobError`,
    key ``dependence.delay``): the spec's delays are milliseconds, so neither reading of
    ``10000`` could be trusted (in seconds it would wait 2 h 46 min).
    """

    job_name: str
    event: Event = Event.SUCCESSFUL
    delay: timedelta = timedelta(0)

    def __init__(
        self,
        job_name: str,
        event: Event | str = Event.SUCCESSFUL,
        delay: timedelta = timedelta(0),
    ) -> None:
        object.__setattr__(self, "job_name", job_name)
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "delay", delay)
        self.__post_init__()

    def __post_init__(self) -> None:
        if not isinstance(self.job_name, str) or not self.job_name.strip():
            raise _fail("dependence needs the name of the job it follows", key="dependence.job")
        if (why := unprintable_problem(self.job_name)) is not None:
            raise _fail(f"dependence job {why}", key="dependence.job")
        event = self.event
        if isinstance(event, str):
            try:
                event = Event.parse(event)
            except ValueError as exc:
                raise _fail(str(exc), key="dependence.status") from None
            object.__setattr__(self, "event", event)
        if event not in (Event.SUCCESSFUL, Event.FAILED, Event.BOTH):
            raise _fail(
                f"dependence status must be successful, failed or both, not {event}",
                key="dependence.status",
            )
        delay = self.delay
        if not isinstance(delay, timedelta):
            if isinstance(delay, int | float) and not isinstance(delay, bool):
                raise _fail(
                    f"dependence delay {delay!r} is a bare number: give a timedelta, e.g. "
                    "timedelta(seconds=10); the spec's bare numbers are milliseconds",
                    key="dependence.delay",
                )
            raise _fail(
                f"dependence delay must be a timedelta, e.g. timedelta(seconds=10), not {delay!r}",
                key="dependence.delay",
            )
        if delay > MAX_DURATION:
            raise _fail(
                f"dependence delay must be at most ten years, not {_seconds(delay)}",
                key="dependence.delay",
            )
        if delay < timedelta(0):
            raise _fail(
                f"dependence delay must not be negative ({_seconds(delay)})",
                key="dependence.delay",
            )
        object.__setattr__(self, "delay", delay)


@value_class(frozen=True, init=False)
class Message:
    """An e-mail alert: whom to tell, and with which template (inline text or a file).

    With neither `template` nor `template_file`, the configuration's default template is used.
    """

    recipients: tuple[str, ...]
    template: str | None = None
    template_file: str | None = None

    def __init__(
        self,
        recipients: str | Sequence[str],
        template: str | None = None,
        template_file: str | None = None,
    ) -> None:
        object.__setattr__(self, "recipients", recipients)
        object.__setattr__(self, "template", template)
        object.__setattr__(self, "template_file", template_file)
        self.__post_init__()

    def __post_init__(self) -> None:
        from .addresses import parse_address  # imported by the first alert, not every job

        recipients = self.recipients
        if isinstance(recipients, str):
            recipients = (recipients,)
        recipients = tuple(recipients)
        if not recipients:
            raise ValueError("an alert needs at least one recipient")
        for address in recipients:
            if not isinstance(address, str) or "@" not in address:
                raise ValueError(f"recipient {address!r} is not an e-mail address")
            parse_address(address, "recipient")  # what the e-mail handler accepts, no more
        if self.template is not None and self.template_file is not None:
            raise ValueError("give template or template_file, not both")
        object.__setattr__(self, "recipients", recipients)


def _freeze_messages(
    messages: Mapping[Event, Message] | Mapping[str, Message] | None,
    *,
    job: str | None = None,
    group: str | None = None,
) -> Mapping[Event, Message]:
    if not messages:
        return EMPTY_MAPPING
    frozen: dict[Event, Message] = {}
    for event, message in messages.items():
        try:
            key = Event.parse(event) if isinstance(event, str) else event
        except ValueError as exc:
            raise _fail(str(exc), job=job, group=group, key="messages") from None
        if not isinstance(key, Event):
            raise _fail(
                f"message event must be an Event, not {event!r}",
                job=job,
                group=group,
                key="messages",
            )
        if not isinstance(message, Message):
            raise _fail(
                f"messages.{key} must be a Message", job=job, group=group, key=f"messages.{key}"
            )
        frozen[key] = message
    return MappingProxyType(frozen)


@value_class(frozen=True, init=False)
class JobGroup:
    """A named set of jobs: handlers and alerts of a group see the events of all its jobs.

    A job may be in several groups; a group lists at least one job, each once.
    """

    name: str
    job_names: tuple[str, ...]
    messages: Mapping[Event, Message] = field(default_factory=_empty)

    def __init__(
        self,
        name: str,
        job_names: Sequence[str],
        messages: Mapping[Event, Message] | Mapping[str, Message] | None = None,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "job_names", job_names)
        object.__setattr__(self, "messages", _empty() if messages is None else messages)
        self.__post_init__()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise _fail(f"a group needs a non-empty name, not {self.name!r}", key="name")
        if (why := unprintable_problem(self.name)) is not None:
            raise _fail(f"group {why}", group=self.name, key="name")
        names = self.job_names
        if isinstance(names, str):
            raise _fail(
                "job_names must be a list of job names, not one text", group=self.name, key="jobs"
            )
        names = tuple(names) if isinstance(names, Iterable) else ()
        if not names:
            raise _fail("a group lists at least one job", group=self.name, key="jobs")
        seen: set[str] = set()
        for job_name in names:
            if not isinstance(job_name, str) or not job_name.strip():
                raise _fail(
                    f"job names must be non-empty text, not {job_name!r}",
                    group=self.name,
                    key="jobs",
                )
            if job_name in seen:
                raise _fail(f"job {job_name!r} is listed twice", group=self.name, key="jobs")
            seen.add(job_name)
        object.__setattr__(self, "job_names", names)
        object.__setattr__(self, "messages", _freeze_messages(self.messages, group=self.name))

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt through the constructor, messages as a plain dict: a mappingproxy can be
        # neither pickled nor deep copied.
        return (self.__class__, (self.name, self.job_names, dict(self.messages)))
