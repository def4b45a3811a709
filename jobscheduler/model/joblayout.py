"""How a `Job` is held in memory: slots for what every job uses, one shared object for the
options most jobs leave at their defaults.

A scheduler holds every job it knows, so a job's size is the library's size: with 100,000 jobs,
each 8-byte slot is 0.8 MB. `Job` stays a frozen dataclass (``dataclasses.fields``,
``replace``, equality and the constructor are unchanged), but its storage is its own:

- the *core* fields (name, type, command, start, interval, dependence, timezone, enabled,
  priority) and the schedule computed from them are slots of `JobSlots`;
- the *options* (stop, timeout, max_instances, shell, cwd, env, args, kill_grace,
  output_limit, messages, description, the run policies of `policies`, on_node_loss, cron,
  calendar, on_demand, warn_after) live in an `Options` object reached through one slot.
  Every job whose options are all at their defaults shares `DEFAULT_OPTIONS`; a job with any
  option set has an `Options` of its own (about 200 bytes more than the shared one).

Reading an option is a property (a C-level attribute getter): about 30 ns more than a slot.
Setting one is possible only through ``object.__setattr__`` (the frozen dataclass refuses
plain assignment), which `Job` uses while it validates itself; the first such write gives the
job its own copy of the options (copy on write), and `settle` shares the default object again
when the values all turn out to be the defaults.

What the engine reads beyond the fields, `zone` and `stop_utc`, are read-only properties over
the schedule's slots (C-level getters, ~30 ns, no memory per job): every job fills those
slots, a dependent job too, so the engine never reads a private field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime, timedelta, tzinfo
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ..triggers.base import Trigger
from ..triggers.interval import SlotArithmetic
from .jobparts import DEFAULT_KILL_GRACE, DEFAULT_OUTPUT_LIMIT, EMPTY_MAPPING

__all__ = ["DEFAULT_OPTIONS", "OPTION_NAMES", "JobSlots", "Options", "lay_out", "settle"]

OPTION_NAMES = (
    "stop",
    "timeout",
    "max_instances",
    "shell",
    "cwd",
    "env",
    "args",
    "kill_grace",
    "output_limit",
    "messages",
    "description",
    "overlap",
    "catch_up",
    "catch_up_window",
    "retry",
    "pause_after_failures",
    "host",
    "on_node_loss",
    "cron",
    "calendar",
    "on_demand",
    "warn_after",
)


class Options:
    """A job's rarely set fields (see the module notes); read-only, but for the job that
    owns it while that job is being built."""

    # `trigger` is no field: the cron or calendar trigger built from `cron` or `calendar`
    # (None for any other job), set once the job is valid. Only such jobs have options of
    # their own, so the shared default object never holds one.
    __slots__ = (*OPTION_NAMES, "trigger")

    stop: datetime | None
    timeout: timedelta | None
    max_instances: int | None
    shell: bool
    cwd: str | None
    env: Mapping[str, str] | None
    args: Mapping[str, Any]
    kill_grace: timedelta
    output_limit: int
    messages: Mapping[Any, Any]
    description: str | None
    overlap: str
    catch_up: str
    catch_up_window: timedelta
    retry: Any
    pause_after_failures: int | None
    host: str | None
    on_node_loss: str
    cron: str | None
    calendar: str | None
    on_demand: bool
    warn_after: timedelta | str | None
    trigger: Trigger | None

    def __init__(self, values: tuple[Any, ...]) -> None:
        for name, value in zip(OPTION_NAMES, values, strict=True):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "trigger", None)

    def __setattr__(self, name: str, value: Any) -> None:
        # Written only through object.__setattr__, by `Job` while it is being built: the
        # default object is shared by every job that sets no option.
        raise AttributeError(f"job options are read-only ({name})")

    def values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in OPTION_NAMES)


_DEFAULT_VALUES: tuple[Any, ...] = (
    None,
    None,
    None,
    False,
    None,
    None,
    EMPTY_MAPPING,
    DEFAULT_KILL_GRACE,
    DEFAULT_OUTPUT_LIMIT,
    EMPTY_MAPPING,
    None,
    "allow",
    "none",
    timedelta(days=1),
    None,
    None,
    None,
    "abandon",
    None,
    None,
    False,
    None,
)
DEFAULT_OPTIONS = Options(_DEFAULT_VALUES)
"""The options of every job that sets none (never written: a write copies it first)."""


def options_of(values: tuple[Any, ...]) -> Options:
    """The shared default options when `values` are the defaults (the very objects, or
    equal values of the same types), else a new `Options`."""
    if all(
        value is default or (value.__class__ is default.__class__ and value == default)
        for value, default in zip(values, _DEFAULT_VALUES, strict=True)
    ):
        return DEFAULT_OPTIONS
    return Options(values)


def settle(job: JobSlots) -> None:
    """Share the default options again if the job's own copy holds only defaults."""
    options = job._options
    if options is not DEFAULT_OPTIONS:
        shared = options_of(options.values())
        if shared is DEFAULT_OPTIONS:
            object.__setattr__(job, "_options", shared)


class JobSlots(SlotArithmetic):
    """The storage of a `Job`: its core fields, its options object and its schedule
    (`SlotArithmetic`'s attributes: set for a scheduled job, left empty for a dependent one)."""

    __slots__ = (
        "_canonical",
        "_options",
        "_start_local",
        "_start_utc",
        "_steps",
        "_stop_utc",
        "_zone",
        "command",
        "dependence",
        "enabled",
        "interval",
        "name",
        "priority",
        "start",
        "timezone",
        "type",
    )
    _options: Options
    # Set for every job (a dependent job too: `Job.__post_init__`), so that these views are
    # plain slot reads through C-level getters: about 30 ns, and no memory per job.
    _zone: tzinfo
    _stop_utc: datetime | None

    if TYPE_CHECKING:  # what the checker sees; below, what runs (the same, but faster)

        @property
        def zone(self) -> tzinfo: ...
        @property
        def stop_utc(self) -> datetime | None: ...

    else:
        zone = property(
            attrgetter("_zone"),
            doc="The job's time zone, resolved (the machine's zone when `timezone` is None): "
            "the zone its slots are given in. Read-only.",
        )
        stop_utc = property(
            attrgetter("_stop_utc"),
            doc="`stop` as an instant in UTC (None: no end). Read-only. The engine compares "
            "a slot with it to know it is the last one without asking for the next.",
        )


def _option_setter(name: str) -> Any:
    def set_option(job: JobSlots, value: Any) -> None:
        options = job._options
        if options is DEFAULT_OPTIONS:  # copy on write: the default object is shared
            options = Options(options.values())
            object.__setattr__(job, "_options", options)
        object.__setattr__(options, name, value)

    return set_option


def lay_out(cls: type[JobSlots]) -> None:
    """Make the dataclass `cls` (a subclass of `JobSlots` with ``__slots__ = ()``) read its
    fields from that storage: each option becomes a property over the options object, and
    each core field's class-level default is removed so that the slot is what is read (the
    defaults stay in ``dataclasses.fields``, which is all the dataclass needs them for)."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    core = set(JobSlots.__slots__)
    if names != core.union(OPTION_NAMES) - {n for n in core if n.startswith("_")}:
        raise TypeError(f"{cls.__name__}'s fields do not match its storage")
    for name in names:
        if name in OPTION_NAMES:
            setattr(cls, name, property(attrgetter(f"_options.{name}"), _option_setter(name)))
        elif name in cls.__dict__:
            delattr(cls, name)
