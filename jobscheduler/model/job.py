"""`Job`: an immutable job definition that validates itself and computes its slots.

The small value objects it is made of (`JobType`, `Dependence`, `Message`, `JobGroup`) live in
`jobparts` and are re-exported here. All raise `InvalidJobError` (a `JobActionError`) naming
the job and the field at fault.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta, tzinfo
from types import MappingProxyType
from typing import Any

from ..errors import InvalidJobError, Problem
from ..triggers.base import Trigger
from ..triggers.calendar import check_calendar
from ..triggers.cron import check_cron
from ..triggers.interval import Interval, IntervalTrigger
from ..triggers.once import OnceTrigger
from ..triggers.zones import localize, resolve_zone
from .event import Event
from .jobchecks import (
    check_int,
    check_max_instances,
    check_output_limit,
    checked_args,
    checked_command,
    checked_env,
    checked_warn_after,
)
from .joblayout import DEFAULT_OPTIONS, JobSlots, lay_out, options_of, settle
from .jobparts import (
    DEFAULT_KILL_GRACE,
    DEFAULT_OUTPUT_LIMIT,
    EMPTY_MAPPING,
    Dependence,
    JobGroup,
    JobType,
    Message,
    _empty,
    _fail,
    _freeze_messages,
    _seconds,
    _to_timedelta,
    unprintable_problem,
)
from .jobschedule import (
    aware_bound,
    build_trigger,
    check_schedule,
    checked_dependence,
    checked_interval,
    schedule_kind,
)
from .policies import DEFAULT_CATCH_UP_WINDOW, Retry, check_policies

__all__ = [
    "DEFAULT_KILL_GRACE",
    "DEFAULT_OUTPUT_LIMIT",
    "Dependence",
    "Job",
    "JobGroup",
    "JobType",
    "Message",
]


# What `on_node_loss` accepts: a run lost with its node (killed, cut off) is recorded
# abandoned; "rerun" also runs it again on the node that took over (docs/state.md).
ON_NODE_LOSS = ("abandon", "rerun")

# OverflowError: out of the range of datetime or timedelta arithmetic, reported for its key.
_ERRORS = (InvalidJobError, ValueError, TypeError, OverflowError)


def _report(problems: list[Problem], job: str, key: str, exc: Exception) -> None:
    """Record a failed check: an `InvalidJobError`'s problems get the job's name; any other
    error is one problem at `key`."""
    if isinstance(exc, InvalidJobError):
        problems.extend(replace(p, job=job) for p in exc.problems)
    else:
        problems.append(Problem(str(exc), job=job, key=key))


@dataclass(frozen=True, eq=True, init=False)  # storage: see joblayout
class Job(JobSlots):
    """An immutable job definition.

    Exactly one of (see `jobschedule`): `interval` with `start` (optional `stop`); `cron` or
    `calendar` (an expression; `start` and `stop` optional inclusive bounds); `start` alone
    (one run, at `start`); a `dependence`; or ``on_demand=True`` (runs only when asked).
    `command` is an argv list or a string (split like a shell would, unless ``shell=True``)
    for EXTERNAL jobs, and ``"package.module:name"`` for INTERNAL ones. Naive `start` and
    `stop` are read in the job's `timezone` (an IANA name; None: the machine's zone); the
    stored values are aware.

    `timeout` (None: none), `kill_grace` (SIGTERM to SIGKILL), `max_instances` (None:
    unlimited overlapping runs, as the specification allows), `priority` (higher first when
    workers are scarce), `enabled` (False: defined but not scheduled), `on_node_loss`
    (``abandon`` or ``rerun``: what becomes of a run whose node died, docs/state.md),
    `warn_after` (a duration, or ``"auto"``: when a run still going is told OVERDUE). The run
    policies `overlap`, `catch_up`, `catch_up_window`, `retry`, `pause_after_failures` and
    `host` are described in `policies` and docs/config.md.

    Equal intervals and empty mappings are shared between jobs (they are immutable), so a
    job's `interval` may be an equal object rather than the one passed in. The options most
    jobs leave at their defaults (`stop`, `timeout`, …, `description`) are kept in one object
    that all such jobs share: see `joblayout`.
    """

    __slots__ = ()

    name: str
    type: JobType = JobType.EXTERNAL
    command: str | tuple[str, ...] = ""
    start: datetime | None = None
    stop: datetime | None = None
    interval: Interval | None = None
    dependence: Dependence | None = None
    timezone: str | None = None
    enabled: bool = True
    timeout: timedelta | None = None
    max_instances: int | None = None
    priority: int = 0
    shell: bool = False
    cwd: str | None = None
    env: Mapping[str, str] | None = None
    args: Mapping[str, Any] = field(default_factory=_empty)
    kill_grace: timedelta = DEFAULT_KILL_GRACE
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    messages: Mapping[Event, Message] = field(default_factory=_empty)
    description: str | None = None
    overlap: str = "allow"
    catch_up: str = "none"
    catch_up_window: timedelta = DEFAULT_CATCH_UP_WINDOW
    retry: Retry | None = None
    pause_after_failures: int | None = None
    host: str | None = None
    on_node_loss: str = "abandon"
    cron: str | None = None
    calendar: str | None = None
    on_demand: bool = False
    warn_after: timedelta | str | None = None

    def __init__(
        self,
        name: str,
        type: JobType | str = JobType.EXTERNAL,
        command: str | Sequence[str] = "",
        start: datetime | None = None,
        stop: datetime | None = None,
        interval: Interval | str | None = None,
        dependence: Dependence | Mapping[str, Any] | None = None,
        timezone: str | None = None,
        enabled: bool = True,
        timeout: timedelta | float | None = None,
        max_instances: int | None = None,
        priority: int = 0,
        shell: bool = False,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        args: Mapping[str, Any] | None = None,
        kill_grace: timedelta | float = DEFAULT_KILL_GRACE,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        messages: Mapping[Event, Message] | Mapping[str, Message] | None = None,
        description: str | None = None,
        overlap: str = "allow",
        catch_up: str = "none",
        catch_up_window: timedelta = DEFAULT_CATCH_UP_WINDOW,
        retry: Retry | Mapping[str, Any] | None = None,
        pause_after_failures: int | None = None,
        host: str | None = None,
        on_node_loss: str = "abandon",
        cron: str | None = None,
        calendar: str | None = None,
        on_demand: bool = False,
        warn_after: timedelta | float | str | None = None,
    ) -> None:
        # Parameters are wider than the fields (a list, "1 day", seconds): __post_init__
        # validates and normalises them, so the stored values have the fields' types.
        put = object.__setattr__
        put(self, "name", name)
        put(self, "type", type)
        put(self, "command", command)
        put(self, "start", start)
        put(self, "interval", interval)
        put(self, "dependence", dependence)
        put(self, "timezone", timezone)
        put(self, "enabled", enabled)
        put(self, "priority", priority)
        put(self, "_options", options_of((
            stop,
            timeout,
            max_instances,
            shell,
            os.fspath(cwd) if isinstance(cwd, os.PathLike) else cwd,
            env,
            _empty() if args is None else args,
            kill_grace,
            output_limit,
            _empty() if messages is None else messages,
            description,
            overlap,
            catch_up,
            catch_up_window,
            retry,
            pause_after_failures,
            host,
            on_node_loss,
            cron,
            calendar,
            on_demand,
            warn_after,
        )))  # fmt: skip
        self.__post_init__()

    def __post_init__(self) -> None:
        # Every check runs, and every problem is reported, in this order. A value already of
        # its field's type and valid skips its checker (the common case, and what keeps
        # building a job cheap); a failed check leaves the value as given.
        problems: list[Problem] = []
        put = object.__setattr__
        name = self.name
        if not isinstance(name, str) or not name.strip():
            raise _fail(f"a job needs a non-empty name, not {name!r}", key="name")
        if name != name.strip():
            problems.append(
                Problem("job name must not start or end with spaces", job=name, key="name")
            )
        if (why := unprintable_problem(name)) is not None:
            problems.append(Problem(f"job {why}", job=name, key="name"))
        if self.type.__class__ is not JobType:
            try:
                put(self, "type", self._checked_type())
            except _ERRORS as exc:
                _report(problems, name, "type", exc)
        zone: tzinfo | None
        try:
            zone = resolve_zone(self.timezone)
        except _ERRORS as exc:
            zone = None
            _report(problems, name, "timezone", exc)
        try:
            put(self, "command", checked_command(self.command, self.type, self.shell))
        except _ERRORS as exc:
            _report(problems, name, "command", exc)
        if self.interval is not None:
            try:
                put(self, "interval", checked_interval(self.interval))
            except _ERRORS as exc:
                _report(problems, name, "interval", exc)
        # No options of its own (the common case): no cron, calendar, on_demand or stop.
        plain = self._options is DEFAULT_OPTIONS
        if not plain and self.cron is not None:
            try:
                check_cron(self.cron)
            except _ERRORS as exc:
                _report(problems, name, "cron", exc)
        if not plain and self.calendar is not None:
            try:
                check_calendar(self.calendar, zone)
            except _ERRORS as exc:
                _report(problems, name, "calendar", exc)
        if zone is not None:
            for key in ("start", "stop"):
                value = getattr(self, key)
                if value is None or (
                    value.__class__ is datetime
                    and value.tzinfo is not None
                    and 1 < value.year < 9999  # only there can a conversion overflow
                ):
                    continue  # aware already
                try:
                    put(self, key, aware_bound(value, zone, key))
                except _ERRORS as exc:
                    _report(problems, name, key, exc)
        if self.dependence is not None and self.dependence.__class__ is not Dependence:
            try:
                put(self, "dependence", checked_dependence(self.dependence))
            except _ERRORS as exc:
                _report(problems, name, "dependence", exc)
        if not (plain and self.interval is not None and self.start is not None) or (
            self.dependence is not None
        ):
            try:  # (else an interval job without stop, cron, calendar or on_demand: valid)
                check_schedule(self)
            except _ERRORS as exc:
                _report(problems, name, "dependence", exc)
        if self.timeout is not None:
            try:
                put(self, "timeout", self._checked_timeout())
            except _ERRORS as exc:
                _report(problems, name, "timeout", exc)
        if self.kill_grace is not DEFAULT_KILL_GRACE:
            try:
                put(self, "kill_grace", self._checked_kill_grace())
            except _ERRORS as exc:
                _report(problems, name, "kill_grace", exc)
        if self.max_instances is not None:
            try:
                check_max_instances(self.max_instances)
            except _ERRORS as exc:
                _report(problems, name, "max_instances", exc)
        if self.priority.__class__ is not int:
            try:
                check_int("priority", self.priority)
            except _ERRORS as exc:
                _report(problems, name, "priority", exc)
        if self.output_limit.__class__ is not int or self.output_limit < 0:
            try:
                check_output_limit(self.output_limit)
            except _ERRORS as exc:
                _report(problems, name, "output_limit", exc)
        for key in ("enabled", "shell") if plain else ("enabled", "shell", "on_demand"):
            value = getattr(self, key)
            if value is not True and value is not False:
                problems.append(
                    Problem(f"{key} must be true or false, not {value!r}", job=name, key=key)
                )
        if self.env is not None:
            try:
                put(self, "env", checked_env(self.env))
            except _ERRORS as exc:
                _report(problems, name, "env", exc)
        if self.args is not EMPTY_MAPPING:
            try:
                put(self, "args", checked_args(self.args, self.type))
            except _ERRORS as exc:
                _report(problems, name, "args", exc)
        if self.messages is not EMPTY_MAPPING:
            try:
                put(self, "messages", _freeze_messages(self.messages, job=name))
            except _ERRORS as exc:
                _report(problems, name, "messages", exc)
        if self.on_node_loss != "abandon" and self.on_node_loss not in ON_NODE_LOSS:
            problems.append(Problem(
                f"on_node_loss must be abandon or rerun, not {self.on_node_loss!r}",
                job=name, key="on_node_loss",
            ))  # fmt: skip
        if self.warn_after is not None:
            try:
                put(self, "warn_after", checked_warn_after(self.warn_after))
            except _ERRORS as exc:
                _report(problems, name, "warn_after", exc)
        if self.cwd is not None and not isinstance(self.cwd, str):
            problems.append(Problem(f"cwd must be a path, not {self.cwd!r}", job=name, key="cwd"))
        if self._options is not DEFAULT_OPTIONS:  # the run policies: see `policies`
            check_policies(self, problems)
        if problems:
            raise InvalidJobError(problems)
        settle(self)
        if self.start is not None and self.interval is not None and zone is not None:
            self._set_schedule(self.start, self.interval, zone, self.stop)
        else:  # `zone` and `stop_utc` answer for every job (see joblayout)
            assert zone is not None  # else a problem was reported
            put(self, "_zone", zone)
            stop = self.stop
            if self.cron is not None or self.calendar is not None:
                object.__setattr__(self._options, "trigger", build_trigger(self, zone))
            elif self.start is not None and self.dependence is None:  # a one-off
                stop = self.start  # its one slot is its last
                put(self, "_start_utc", self.start.astimezone(UTC))
            put(self, "_stop_utc", None if stop is None else stop.astimezone(UTC))

    def __getstate__(self) -> dict[str, Any]:
        # Read-only mappings as plain dicts: a mappingproxy can be neither pickled nor deep
        # copied. `__setstate__` validates and freezes them again.
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in ("env", "args", "messages"):
            if isinstance(state[key], MappingProxyType):
                state[key] = dict(state[key])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Unpickled or copied: the same checks, and the schedule computed again.
        object.__setattr__(self, "_options", DEFAULT_OPTIONS)  # copied on the first write
        for key, value in state.items():
            object.__setattr__(self, key, value)
        self.__post_init__()

    # -- validation helpers (each returns the normalised value or raises) ------------------

    def _checked_type(self) -> JobType:
        if isinstance(self.type, JobType):
            return self.type
        if isinstance(self.type, str):
            return JobType.parse(self.type)
        raise ValueError(f"unknown job type {self.type!r} (expected 'external' or 'internal')")

    def _checked_timeout(self) -> timedelta | None:
        if self.timeout is None:
            return None
        value = _to_timedelta(self.timeout, "timeout")
        if value <= timedelta(0):
            raise ValueError(f"timeout must be above 0, not {_seconds(value)}")
        return value

    def _checked_kill_grace(self) -> timedelta:
        value = _to_timedelta(self.kill_grace, "kill_grace")
        if value < timedelta(0):
            raise ValueError(f"kill_grace must not be negative ({_seconds(value)})")
        return value

    # -- behaviour ----------------------------------------------------------------------

    def same_schedule(self, other: Job) -> bool:
        """Whether `other` (a definition of the same job) has the same slots as this one: the
        engine then keeps the job's next slot across an update."""
        return (
            self.start == other.start
            and self.interval == other.interval
            and self.stop == other.stop
            and self.timezone == other.timezone
            and self.dependence == other.dependence
            and self.cron == other.cron
            and self.calendar == other.calendar
            and self.on_demand == other.on_demand
        )

    @property
    def is_dependent(self) -> bool:
        """True for a job started by a `Dependence` instead of a schedule."""
        return self.dependence is not None

    @property
    def schedule_kind(self) -> str:
        """What starts the job: ``interval``, ``cron``, ``calendar``, ``once`` (`start`
        alone), ``dependence`` or ``on_demand``."""
        return schedule_kind(self)

    @property
    def trigger(self) -> Trigger | None:
        """The job's schedule as a `Trigger` (for an interval or a one-off job a new one
        each time; the job computes those slots itself), or None for a dependent or an
        on-demand job."""
        if self.interval is not None:
            assert self.start is not None
            return IntervalTrigger(self.start, self.interval, self._zone, self.stop)
        trigger = self._options.trigger
        if trigger is None and self.start is not None:
            return OnceTrigger(self.start, self._zone)
        return trigger

    def next_after(self, t: datetime) -> datetime | None:
        """The first slot strictly after `t`; None past `stop`, after a one-off's run, and
        for a dependent or an on-demand job.

        Interval slots are ``start + k × interval``, anchored at `start` (stop inclusive),
        O(1) whatever the job's age; cron and calendar slots are their expression's within
        the inclusive bounds `start` and `stop`; a one-off's one slot is `start`. A naive
        `t` is read in the job's zone; the result is aware, in the job's zone. `enabled` is
        not consulted: a paused job still has slots.
        """
        if self.interval is None:
            return self._next_other(t)
        if t.tzinfo is None:
            t = localize(t, self._zone)
        return self._next_slot(t)

    def _next_other(self, t: datetime) -> datetime | None:
        trigger = self._options.trigger
        if trigger is not None:  # cron, calendar
            return trigger.next_after(t)
        if self.start is None:
            return None  # dependent, on demand
        if t.tzinfo is None:  # a one-off: one slot, its start
            t = localize(t, self._zone)
        if t.astimezone(UTC) < self._start_utc:
            return self._start_utc.astimezone(self._zone)
        return None

    def slots_after(self, t: datetime, count: int) -> list[datetime]:
        """The next `count` slots after `t` (fewer when the schedule ends)."""
        slots: list[datetime] = []
        current: datetime | None = t
        while current is not None and len(slots) < count:
            current = self.next_after(current)
            if current is not None:
                slots.append(current)
        return slots

    @property
    def argv(self) -> list[str]:
        """The external command as an argv list (a string is split like a shell would)."""
        if isinstance(self.command, tuple):
            return list(self.command)
        return shlex.split(self.command)

    def with_changes(self, **changes: Any) -> Job:
        """A copy of this job with some fields changed (and validated again)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return Job(**values)


lay_out(Job)
