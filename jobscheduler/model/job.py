"""`Job`: an immutable job definition that validates itself and computes its slots.

Each field is declared once, as an `Option` (`joboptions`): its default, its check, its form
in the configuration file. The small value objects a job is made of (`JobType`,
`Dependence`, `Message`, `JobGroup`) live in `jobparts` and are re-exported here. All raise
`InvalidJobError` (a `JobActionError`) naming the job and the field at fault.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from os import PathLike
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..errors import InvalidJobError, Problem
from ..triggers.base import Trigger
from ..triggers.interval import Interval, IntervalTrigger
from ..triggers.once import OnceTrigger
from ..triggers.zones import localize, resolve_zone
from ..valueclass import field_names, replaced, value_class
from .event import Event
from .jobchecks import (
    checked_args,
    checked_command,
    checked_cwd,
    checked_env,
    checked_flag,
    checked_int,
    checked_kill_grace,
    checked_max_instances,
    checked_on_node_loss,
    checked_output_limit,
    checked_timeout,
    checked_type,
    checked_warn_after,
)
from .joblayout import (
    JobSlots,
    lay_out,
    set_trigger,
    settle,
    shares_default_options,
    store_fields,
    trigger_of,
)
from .joboptions import Form, Option
from .jobparts import (
    DEFAULT_KILL_GRACE,
    DEFAULT_OUTPUT_LIMIT,
    EMPTY_MAPPING,
    Dependence,
    JobGroup,
    JobType,
    Message,
    _fail,
    _freeze_messages,
    unprintable_problem,
)
from .policies import (
    CATCH_UP_VALUES,
    DEFAULT_CATCH_UP_WINDOW,
    OVERLAP_VALUES,
    PauseAfterFailures,
    Retry,
    checked_catch_up,
    checked_catch_up_window,
    checked_host,
    checked_overlap,
    checked_pause_after_failures,
    checked_retry,
    dependent_job_problems,
)
from .schedulerules import (
    Starters,
    aware_bound,
    build_trigger,
    check_schedule,
    checked_dependence,
    checked_interval,
)

__all__ = [
    "DEFAULT_KILL_GRACE",
    "DEFAULT_OUTPUT_LIMIT",
    "JOB_OPTIONS",
    "Dependence",
    "Job",
    "JobGroup",
    "JobType",
    "Message",
]


# OverflowError: out of the range of datetime or timedelta arithmetic, reported for its key.
_ERRORS = (InvalidJobError, ValueError, TypeError, OverflowError)


def _report(problems: list[Problem], job: str, key: str, exc: Exception) -> None:
    """Record a failed check: an `InvalidJobError`'s problems get the job's name; any other
    error is one problem at `key`."""
    if isinstance(exc, InvalidJobError):
        problems.extend(replaced(p, job=job) for p in exc.problems)
    else:
        problems.append(Problem(str(exc), job=job, key=key))


# -- the checks of fields that need more than their value (`job`: the job being built) ---


def _checked_cron(value: Any) -> str:
    """`check_cron`, its module (and cronsim) imported by the first cron job."""
    from ..triggers.cron import check_cron

    return check_cron(value)


def _checked_calendar(value: Any, zone: tzinfo) -> str:
    """`check_calendar`, its module (systemd's parser and search, the largest of the
    triggers) imported by the first calendar job, not by every program that reads a job."""
    from ..triggers.calendar import check_calendar

    return check_calendar(value, zone)


def _aware(key: str) -> Any:
    def check(value: Any, job: Job) -> datetime | None:
        return aware_bound(value, job.zone, key)

    return check


def _is_aware(value: Any) -> bool:
    # None, or aware already: only within these years can a conversion to another zone
    # overflow.
    return value is None or (
        value.__class__ is datetime and value.tzinfo is not None and 1 < value.year < 9999
    )


def _flag(key: str) -> Any:
    return lambda value, job: checked_flag(key, value)


def _is_flag(value: Any) -> bool:
    return value is True or value is False


if TYPE_CHECKING:  # the checker reads the dataclass's constructor: the fields' given types
    from dataclasses import dataclass as _job_dataclass
else:

    def _job_dataclass(**options: Any) -> Any:
        # Job has a constructor of its own (below); a frozen dataclass to its users, made
        # without compiling methods at every start (`valueclass`).
        return value_class(frozen=True, init=False)


@_job_dataclass(frozen=True, eq=True)  # storage: see joblayout; the constructor: see __init__
class Job(JobSlots):
    """An immutable job definition.

    Exactly one of (see `schedulerules`): `interval` with `start` (optional `stop`); `cron`
    or `calendar` (an expression; `start` and `stop` optional inclusive bounds); `start`
    alone (one run, at `start`); a `dependence`; or ``on_demand=True`` (runs only when
    asked). `command` is an argv list or a string (split like a shell would, unless
    ``shell=True``) for EXTERNAL jobs, and ``"package.module:name"`` for INTERNAL ones, or
    the function or class itself for a job defined in code (`source`). Naive `start` and
    `stop` are read in the job's `timezone` (an IANA name; None: the machine's zone); the
    stored values are aware.

    `timeout` (None: none), `kill_grace` (SIGTERM to SIGKILL), `max_instances` (None:
    unlimited overlapping runs, as the specification allows), `priority` (higher first when
    workers are scarce), `enabled` (False: defined but not scheduled), `on_node_loss`
    (``abandon`` or ``rerun``: what becomes of a run whose node died, docs/state.md),
    `warn_after` (a duration, or ``"auto"``: when a run still going is told OVERDUE). The run
    policies `overlap`, `catch_up`, `catch_up_window`, `retry`, `pause_after_failures` and
    `host` are described in `policies` and docs/config.md.

    Each field below is declared once (`joboptions.Option`): the type held, the type the
    constructor takes, the default, the check (run in this order, every problem reported)
    and the form of its key in the configuration file (written in this order, `description`
    first). Equal intervals and empty mappings are shared between jobs (they are
    immutable), so a job's `interval` may be an equal object rather than the one passed in.
    The options most jobs leave at their defaults are kept in one object that all such jobs
    share: see `joblayout`.
    """

    __slots__ = ()

    name: str
    type: Option[JobType, JobType | str] = Option(
        JobType.EXTERNAL,
        lambda value, job: checked_type(value),
        settled=lambda value: value.__class__ is JobType,
        always_written=True,
    )
    command: Option[
        str | tuple[str, ...] | Callable[..., Any], str | Sequence[str] | Callable[..., Any]
    ] = Option(
        "",
        lambda value, job: checked_command(value, job.type, job.shell),
        form=Form.COMMAND,
        settled=lambda value: False,  # no command is no job
        always_written=True,
    )
    shell: Option[bool, bool] = Option(False, _flag("shell"), form=Form.SCALAR, settled=_is_flag)
    cwd: Option[str | None, str | PathLike[str] | None] = Option(
        None, lambda value, job: checked_cwd(value)
    )
    env: Option[Mapping[str, str] | None, Mapping[str, str] | None] = Option(
        None, lambda value, job: checked_env(value), form=Form.ENV
    )
    args: Option[Mapping[str, Any], Mapping[str, Any] | None] = Option(
        EMPTY_MAPPING, lambda value, job: checked_args(value, job.type), form=Form.DATA
    )
    start: Option[datetime | None, datetime | None] = Option(
        None, _aware("start"), form=Form.DATETIME, settled=_is_aware
    )
    stop: Option[datetime | None, datetime | None] = Option(
        None, _aware("stop"), form=Form.DATETIME, settled=_is_aware
    )
    interval: Option[Interval | None, Interval | str | None] = Option(
        None, lambda value, job: checked_interval(value), form=Form.INTERVAL
    )
    cron: Option[str | None, str | None] = Option(None, lambda value, job: _checked_cron(value))
    calendar: Option[str | None, str | None] = Option(
        None, lambda value, job: _checked_calendar(value, job.zone)
    )
    # Checked first of all (`_resolve_zone`): the other checks need the zone.
    timezone: Option[str | None, str | None] = Option(None)
    dependence: Option[Dependence | None, Dependence | Mapping[str, Any] | None] = Option(
        None,
        lambda value, job: checked_dependence(value),
        form=Form.DEPENDENCE,
        settled=lambda value: value is None or value.__class__ is Dependence,
    )
    on_demand: Option[bool, bool] = Option(
        False, _flag("on_demand"), form=Form.SCALAR, settled=_is_flag
    )
    enabled: Option[bool, bool] = Option(True, _flag("enabled"), form=Form.SCALAR, settled=_is_flag)
    timeout: Option[timedelta | None, timedelta | float | None] = Option(
        None, lambda value, job: checked_timeout(value), form=Form.DURATION
    )
    warn_after: Option[timedelta | str | None, timedelta | float | str | None] = Option(
        None, lambda value, job: checked_warn_after(value), form=Form.DURATION_OR_AUTO
    )
    kill_grace: Option[timedelta, timedelta | float] = Option(
        DEFAULT_KILL_GRACE, lambda value, job: checked_kill_grace(value), form=Form.DURATION
    )
    max_instances: Option[int | None, int | None] = Option(
        None, lambda value, job: checked_max_instances(value), form=Form.SCALAR
    )
    priority: Option[int, int] = Option(
        0,
        lambda value, job: checked_int("priority", value),
        form=Form.SCALAR,
        settled=lambda value: value.__class__ is int,
    )
    output_limit: Option[int, int] = Option(
        DEFAULT_OUTPUT_LIMIT,
        lambda value, job: checked_output_limit(value),
        form=Form.SCALAR,
        settled=lambda value: value.__class__ is int and value >= 0,
    )
    overlap: Option[str, str] = Option(OVERLAP_VALUES[0], lambda value, job: checked_overlap(value))
    catch_up: Option[str, str] = Option(
        CATCH_UP_VALUES[0], lambda value, job: checked_catch_up(value)
    )
    catch_up_window: Option[timedelta, timedelta] = Option(
        DEFAULT_CATCH_UP_WINDOW,
        lambda value, job: checked_catch_up_window(value),
        form=Form.UNIT_DURATION,
        settled=lambda value: value == DEFAULT_CATCH_UP_WINDOW,
    )
    retry: Option[Retry | None, Retry | Mapping[str, Any] | None] = Option(
        None, lambda value, job: checked_retry(value), form=Form.RETRY
    )
    pause_after_failures: Option[
        PauseAfterFailures | None, PauseAfterFailures | int | Mapping[str, Any] | None
    ] = Option(
        None,
        lambda value, job: checked_pause_after_failures(value),
        form=Form.PAUSE_AFTER_FAILURES,
    )
    host: Option[str | None, str | None] = Option(None, lambda value, job: checked_host(value))
    messages: Option[
        Mapping[Event, Message], Mapping[Event, Message] | Mapping[str, Message] | None
    ] = Option(
        EMPTY_MAPPING,
        lambda value, job: _freeze_messages(value, job=job.name),
        form=Form.MESSAGES,
    )
    on_node_loss: Option[str, str] = Option(
        "abandon", lambda value, job: checked_on_node_loss(value)
    )
    description: Option[str | None, str | None] = Option(None)

    if not TYPE_CHECKING:  # the checker reads the dataclass's: the fields' given types

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # Stored as given (a list, "1 day", seconds); __post_init__ checks and
            # normalises them, so the stored values have the fields' types.
            store_fields(self, args, kwargs)
            self.__post_init__()

    def __post_init__(self) -> None:
        # Every check runs and every problem is reported: the name, the zone, each field
        # in order, then the rules spanning fields. A failed check leaves the value as given.
        problems: list[Problem] = []
        self._check_name(problems)
        zone = self._resolve_zone(problems)
        plain = shares_default_options(self)  # every option at its default: valid already
        self._check_fields(problems, _CORE_OPTIONS if plain else JOB_OPTIONS)
        self._check_rules(problems, plain)
        if problems:
            raise InvalidJobError(problems)
        settle(self)
        self._compute_schedule(zone)

    def _check_name(self, problems: list[Problem]) -> None:
        name = self.name
        if not isinstance(name, str) or not name.strip():
            raise _fail(f"a job needs a non-empty name, not {name!r}", key="name")
        if name != name.strip():
            problems.append(
                Problem("job name must not start or end with spaces", job=name, key="name")
            )
        if (why := unprintable_problem(name)) is not None:
            problems.append(Problem(f"job {why}", job=name, key="name"))

    def _resolve_zone(self, problems: list[Problem]) -> tzinfo:
        """The job's zone (UTC, for the other checks, when `timezone` is wrong)."""
        try:
            zone = resolve_zone(self.timezone)
        except _ERRORS as exc:
            zone = UTC
            _report(problems, self.name, "timezone", exc)
        object.__setattr__(self, "_zone", zone)
        return zone

    def _check_fields(self, problems: list[Problem], options: tuple[Option[Any, Any], ...]) -> None:
        put = object.__setattr__
        for option in options:
            key = option.name
            value = getattr(self, key)
            if (
                (value is option.default and option.default_settled)
                or option.check is None
                or option.settled(value)
            ):
                continue
            try:
                put(self, key, option.check(value, self))
            except _ERRORS as exc:
                _report(problems, self.name, key, exc)

    def _check_rules(self, problems: list[Problem], plain: bool) -> None:
        """The rules spanning fields: what starts the job, and which run policies a
        dependent job may have."""
        dependence = self.dependence
        # An interval job with a start and no option set is valid already.
        if not plain or self.interval is None or self.start is None or dependence is not None:
            try:
                check_schedule(self.name, self.start, self.stop, self._starters())
            except _ERRORS as exc:
                _report(problems, self.name, "dependence", exc)
        if not plain and dependence is not None:
            for key, message in dependent_job_problems(self.catch_up, self.overlap):
                problems.append(Problem(message, job=self.name, key=key))

    def _starters(self) -> Starters:
        return Starters(self.interval, self.cron, self.calendar, self.dependence, self.on_demand)

    def _compute_schedule(self, zone: tzinfo) -> None:
        """Fill the schedule's slots: `zone` and `stop_utc` answer for every job (see
        joblayout)."""
        start, stop = self.start, self.stop
        if start is not None and self.interval is not None:
            self._set_schedule(start, self.interval, zone, stop)
            return
        put = object.__setattr__
        if self.cron is not None or self.calendar is not None:
            set_trigger(self, build_trigger(self.cron, self.calendar, zone, start, stop))
        elif start is not None and self.dependence is None:  # a one-off
            stop = start  # its one slot is its last
            put(self, "_start_utc", start.astimezone(UTC))
        put(self, "_stop_utc", None if stop is None else stop.astimezone(UTC))

    def __getstate__(self) -> dict[str, Any]:
        # Read-only mappings as plain dicts: a mappingproxy can be neither pickled nor deep
        # copied. `__setstate__` validates and freezes them again.
        state = {name: getattr(self, name) for name in field_names(Job)}
        for key, value in state.items():
            if isinstance(value, MappingProxyType):
                state[key] = dict(value)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Unpickled or copied: the same checks, and the schedule computed again.
        store_fields(self, (), dict(state))
        self.__post_init__()

    @property
    def has_after_run_policy(self) -> bool:
        """Whether the end of a run may call for a run policy: a `retry`, the failure count
        of `pause_after_failures`, or the mark of `catch_up`. False for most jobs (the engine
        asks at every run's end), answered for them without reading an option."""
        if shares_default_options(self):
            return False
        return (
            self.retry is not None
            or self.pause_after_failures is not None
            or self.catch_up != CATCH_UP_VALUES[0]
        )

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
        return self._starters().kind()

    @property
    def trigger(self) -> Trigger | None:
        """The job's schedule as a `Trigger` (for an interval or a one-off job a new one
        each time; the job computes those slots itself), or None for a dependent or an
        on-demand job."""
        if self.interval is not None:
            assert self.start is not None
            return IntervalTrigger(self.start, self.interval, self._zone, self.stop)
        trigger = trigger_of(self)
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
        trigger = trigger_of(self)
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
        if not isinstance(self.command, str):
            raise TypeError(f"job {self.name!r} runs a Python callable, not a command")
        import shlex  # only for a command given as text: not at every start

        return shlex.split(self.command)

    @property
    def source(self) -> str:
        """Where the job is defined: ``"code"`` for a job holding its function or class
        itself (the ``@scheduler.job`` decorator; never written into the YAML file), else
        ``"file"`` (a definition the definitions store keeps: the YAML file, or memory)."""
        return "file" if isinstance(self.command, (str, tuple)) else "code"

    def with_changes(self, **changes: Any) -> Job:
        """A copy of this job with some fields changed (and validated again)."""
        values = {name: getattr(self, name) for name in field_names(Job)}
        values.update(changes)
        return Job(**values)


JOB_OPTIONS = lay_out(Job)
"""The fields of a `Job` but its name, in order, as declared."""
_CORE_OPTIONS = tuple(o for o in JOB_OPTIONS if o.name in JobSlots.__slots__)
