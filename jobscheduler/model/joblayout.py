"""How a `Job` is held in memory: slots for what every job uses, one shared object for the
options most jobs leave at their defaults.

A scheduler holds every job it knows, so a job's size is the library's size: with 100,000 jobs,
each 8-byte slot is 0.8 MB. `Job` stays a frozen dataclass (``dataclasses.fields``,
``replace``, equality and the constructor are unchanged), but its storage is its own:

- the *core* fields (name, type, command, start, interval, dependence, timezone, enabled,
  priority) and the schedule computed from them are slots of `JobSlots`;
- every other field (an *option*: stop, timeout, …, the run policies, description) lives in
  an `Options` object reached through one slot. Every job whose options are all at their
  defaults shares `DEFAULT_OPTIONS`; a job with any option set has an `Options` of its own
  (about 200 bytes more than the shared one).

Which fields are options follows from `Job`'s declaration (`joboptions`): `lay_out` builds the
`Options` class from it, so a new field needs nothing here.

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

from datetime import datetime, tzinfo
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ..triggers.base import Trigger
from ..triggers.interval import SlotArithmetic
from ..valueclass import value_fields
from .joboptions import Option, option_of

__all__ = [
    "DEFAULT_OPTIONS",
    "OPTION_NAMES",
    "JobSlots",
    "Options",
    "lay_out",
    "set_trigger",
    "settle",
    "shares_default_options",
    "store_fields",
]


class Options:
    """A job's rarely set fields (see the module notes); read-only, but for the job that
    owns it while that job is being built. `lay_out` adds a slot per option."""

    # `trigger` is no field: the cron or calendar trigger built from `cron` or `calendar`
    # (None for any other job), set once the job is valid. Only such jobs have options of
    # their own, so the shared default object never holds one.
    __slots__ = ("trigger",)

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


# Set once, by `lay_out(Job)` when `job` is imported: the options' names and defaults,
# the class that holds them and the object all jobs without options share.
OPTION_NAMES: tuple[str, ...] = ()
_DEFAULT_VALUES: tuple[Any, ...] = ()
_OPTIONS_CLASS: type[Options] = Options
DEFAULT_OPTIONS: Options
"""The options of every job that sets none (never written: a write copies it first)."""
# The constructor's order of positional arguments, and the core fields with their defaults.
_ALL_NAMES: tuple[str, ...] = ()
_CORE_DEFAULTS: tuple[tuple[str, Any], ...] = ()
_OPTION_DEFAULTS: tuple[tuple[str, Any], ...] = ()


def _at_defaults(values: tuple[Any, ...]) -> bool:
    """Whether `values` are the defaults: the very objects, or equal values of their types."""
    return all(
        value is default or (value.__class__ is default.__class__ and value == default)
        for value, default in zip(values, _DEFAULT_VALUES, strict=True)
    )


def options_of(values: tuple[Any, ...]) -> Options:
    """The shared default options when `values` are the defaults, else a new `Options`."""
    return DEFAULT_OPTIONS if _at_defaults(values) else _OPTIONS_CLASS(values)


def settle(job: JobSlots) -> None:
    """Share the default options again if the job's own copy holds only defaults."""
    options = job._options
    if options is not DEFAULT_OPTIONS and _at_defaults(options.values()):
        object.__setattr__(job, "_options", DEFAULT_OPTIONS)


def shares_default_options(job: JobSlots) -> bool:
    """Whether every option of `job` is at its default (it shares `DEFAULT_OPTIONS`)."""
    return job._options is DEFAULT_OPTIONS


def set_trigger(job: JobSlots, trigger: Trigger | None) -> None:
    """Keep the cron or calendar trigger built for `job` (which has options of its own:
    `cron` or `calendar`)."""
    if trigger is not None:
        object.__setattr__(job._options, "trigger", trigger)


def trigger_of(job: JobSlots) -> Trigger | None:
    """The trigger `set_trigger` kept for `job` (None for other jobs)."""
    return job._options.trigger


def store_fields(job: JobSlots, positional: tuple[Any, ...], given: dict[str, Any]) -> None:
    """Put the constructor's arguments in `job`'s storage, as given (`Job` checks them
    next): ``Job(name, type, command, …)`` in field order, or by keyword; a field not given
    gets its default."""
    if positional:
        if len(positional) > len(_ALL_NAMES):
            raise TypeError(f"Job() takes at most {len(_ALL_NAMES)} positional arguments")
        for name, value in zip(_ALL_NAMES, positional, strict=False):
            if name in given:
                raise TypeError(f"Job() got multiple values for argument {name!r}")
            given[name] = value
    if "name" not in given:
        raise TypeError("Job() missing 1 required argument: 'name'")
    put = object.__setattr__
    pop = given.pop
    put(job, "name", pop("name"))
    for name, default in _CORE_DEFAULTS:
        put(job, name, pop(name, default))
    if not given:  # no option given (most jobs): nothing to compare
        put(job, "_options", DEFAULT_OPTIONS)
        return
    values = tuple([pop(name, default) for name, default in _OPTION_DEFAULTS])
    if given:
        raise TypeError(f"Job() got an unexpected keyword argument {next(iter(given))!r}")
    put(job, "_options", options_of(values))


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
            options = _OPTIONS_CLASS(options.values())
            object.__setattr__(job, "_options", options)
        object.__setattr__(options, name, value)

    return set_option


def _declared(cls: type[JobSlots]) -> list[Option[Any, Any]]:
    """The `Option`s of `cls`'s fields, in order; every field but ``name`` has one."""
    declared: list[Option[Any, Any]] = []
    for value_field in value_fields(cls):
        option = option_of(value_field)
        if option is not None:
            declared.append(option)
        elif value_field.name != "name":
            raise TypeError(f"{cls.__name__}.{value_field.name} is not declared by an Option")
    return declared


def lay_out(cls: type[JobSlots]) -> tuple[Option[Any, Any], ...]:
    """Give the value class `cls` (a subclass of `JobSlots` with ``__slots__ = ()``, its
    fields declared by `Option`s but ``name``) that storage: each option becomes a property
    over the options object, each core field is read from its slot. Returns the `Option`s,
    in field order. Called once, for `Job`."""
    declared = _declared(cls)
    core = {name for name in JobSlots.__slots__ if not name.startswith("_")} - {"name"}
    if core - {option.name for option in declared}:
        raise TypeError(f"{cls.__name__}'s fields do not match its storage")
    _keep(declared, core)
    for name in core:
        if name in cls.__dict__:
            delattr(cls, name)  # the slot is what is read
    for name in OPTION_NAMES:
        setattr(cls, name, property(attrgetter(f"_options.{name}"), _option_setter(name)))
    return tuple(declared)


def _keep(declared: list[Option[Any, Any]], core: set[str]) -> None:
    """Set this module's view of the fields: the options' names, defaults and class."""
    global OPTION_NAMES, _DEFAULT_VALUES, _OPTIONS_CLASS, DEFAULT_OPTIONS
    global _ALL_NAMES, _CORE_DEFAULTS, _OPTION_DEFAULTS
    shared = [option for option in declared if option.name not in core]
    OPTION_NAMES = tuple(option.name for option in shared)
    _DEFAULT_VALUES = tuple(option.default for option in shared)
    _OPTIONS_CLASS = type("Options", (Options,), {"__slots__": OPTION_NAMES})
    DEFAULT_OPTIONS = _OPTIONS_CLASS(_DEFAULT_VALUES)
    _OPTION_DEFAULTS = tuple(zip(OPTION_NAMES, _DEFAULT_VALUES, strict=True))
    _ALL_NAMES = ("name", *(option.name for option in declared))
    _CORE_DEFAULTS = tuple((o.name, o.default) for o in declared if o.name in core)
