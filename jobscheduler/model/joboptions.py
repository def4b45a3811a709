"""`Option`: one field of a `Job`, declared once, on the class.

A job field is one line of `Job`'s body::

    timeout: Option[timedelta | None, timedelta | float | None] = Option(
        None, _timeout, form=Form.DURATION
    )

The first type is what the job holds, the second what its constructor takes (the checker
reads both: the attribute's type from ``__get__``, the constructor's parameter from
``__set__``). From that line follow the constructor's keyword, the default, the check that
normalises a given value (run in field order, every problem reported), the configuration
file's key (read and written as its `Form` says: `jobscheduler.config`), ``repr``, equality
and ``dataclasses.replace``.

At class creation an `Option` turns itself into the field it declares (`valueclass.field`:
`Job` is a frozen dataclass made by `valueclass.value_class`), carrying itself in the field's
metadata (`option_of`); `joblayout` then gives the job its storage.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, overload

from ..valueclass import ValueField, field

__all__ = ["Form", "Option", "option_of"]

Held = TypeVar("Held")
Given = TypeVar("Given")

_METADATA_KEY = "jobscheduler.option"


class Form(enum.Enum):
    """How the configuration file holds a field's value (the reader and the writer of each
    are in `jobscheduler.config`)."""

    TEXT = "text"  # any scalar read as the text written; written as str(value)
    SCALAR = "scalar"  # a number or a boolean, as YAML types it
    DURATION = "duration"  # "90s", "1h30m", or a number of seconds
    UNIT_DURATION = "unit_duration"  # a duration that must carry its unit
    DATETIME = "datetime"  # a date and time, written in the job's zone
    COMMAND = "command"  # text, or a list of arguments
    INTERVAL = "interval"  # "<n> <unit>"
    DATA = "data"  # plain data: scalars, lists, mappings
    ENV = "env"  # a mapping of text to text
    DEPENDENCE = "dependence"  # {job, status, delay}
    RETRY = "retry"  # {attempts, backoff, max_backoff, alert_each_attempt}
    PAUSE_AFTER_FAILURES = "pause_after_failures"  # N, or {failures, resume_after}
    MESSAGES = "messages"  # alerts by event
    DURATION_OR_AUTO = "duration_or_auto"  # a duration as DURATION, or the word "auto"


Check = Callable[[Any, Any], Any]
"""``check(value, job)``: `value` normalised, or ValueError / TypeError / InvalidJobError.
`job` is the job being built, its earlier fields checked already."""


class Option(Generic[Held, Given]):
    """A job field: its default, its check, its form in the configuration file.

    `check` None: any value is kept as given. `settled(value)` True: the value is already
    normalised and valid, so the check is skipped (the common case, and what keeps building
    a job cheap); by default only the default object itself is settled. `always_written`:
    the file has the key even at its default (``type``); other keys are written when their
    value differs from the default.
    """

    __slots__ = ("always_written", "check", "default", "default_settled", "form", "name", "settled")

    def __init__(
        self,
        default: Held,
        check: Check | None = None,
        *,
        form: Form = Form.TEXT,
        settled: Callable[[Any], bool] | None = None,
        always_written: bool = False,
    ) -> None:
        self.name = ""
        self.default = default
        self.check = check
        self.form = form
        self.settled: Callable[[Any], bool] = (
            settled if settled is not None else (lambda value: value is default)
        )
        self.always_written = always_written
        # Whether the default itself needs no check (an identity test spares the call).
        self.default_settled = self.settled(default)

    def __repr__(self) -> str:
        return f"Option({self.name!r}, default={self.default!r}, form={self.form.name})"

    def __set_name__(self, owner: type, name: str) -> None:
        # Become the field this declares (before `value_class` reads the class).
        self.name = name
        setattr(owner, name, self._field())

    def _field(self) -> Any:
        metadata = {_METADATA_KEY: self}
        default: Any = self.default
        made: Any
        if default.__class__.__hash__ is None:  # a read-only mapping: shared, never mutated
            made = field(default_factory=lambda: default, metadata=metadata)
        else:
            made = field(default=default, metadata=metadata)
        return made

    # What the type checker reads: the held type from a job, the given type into the
    # constructor. At run time the job's storage (`joblayout`) answers instead.
    @overload
    def __get__(self, job: None, owner: type) -> Held: ...
    @overload
    def __get__(self, job: object, owner: type) -> Held: ...
    def __get__(self, job: object | None, owner: type) -> Held:
        raise AttributeError(self.name)  # replaced on the class (`joblayout.lay_out`)

    def __set__(self, job: object, value: Given) -> None:
        raise AttributeError(self.name)  # replaced on the class (`joblayout.lay_out`)


def option_of(value_field: ValueField) -> Option[Any, Any] | None:
    """The `Option` a field of `Job` was declared by, or None (a plain field: ``name``)."""
    metadata: Mapping[str, Any] = value_field.metadata or {}
    option: Option[Any, Any] | None = metadata.get(_METADATA_KEY)
    return option
