"""Functions made jobs: what ``@scheduler.job(...)`` does and gives back.

The decorator makes an internal `Job` whose command is the function (or class) itself — a
job defined in code, ``source == "code"``, kept beside the definitions store and never
written into the YAML file (`config.codejobs`) — and gives back a `JobFunction`: the function,
callable as before, with `JobFunction.submit` for an on-demand run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

from .job import Job, JobType

__all__ = ["JobDecorator", "JobFunction", "SubmitFn", "callable_name", "job_decorator"]

P = ParamSpec("P")
R = TypeVar("R")

SubmitFn = Callable[[str, dict[str, Any] | None], int]


def callable_name(function: object) -> str:
    """``package.module:qualname`` of a function or class, for messages and pages."""
    module = getattr(function, "__module__", None) or "?"
    return f"{module}:{getattr(function, '__qualname__', repr(function))}"


class JobFunction(Generic[P, R]):
    """A function made a job by ``@scheduler.job``: still callable as before (a call runs it
    here and now, outside the scheduler), plus `submit` and `job_name`."""

    def __init__(self, function: Callable[P, R], job_name: str, submit: SubmitFn) -> None:
        functools.update_wrapper(self, function, updated=())  # a class: its __dict__ stays its own
        self.function = function
        self.job_name = job_name
        self._submit = submit

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def submit(self, **args: Any) -> int:
        """Ask for an on-demand run (`Scheduler.submit`) that calls the function with `args`
        as keyword arguments (on top of the job's own ``args``); returns its queue id."""
        return self._submit(self.job_name, args or None)

    def __repr__(self) -> str:
        return f"<job {self.job_name!r}: {callable_name(self.function)}>"


class JobDecorator(Protocol):
    """What ``@scheduler.job(...)`` is: it takes the function and gives its `JobFunction`."""

    def __call__(self, function: Callable[P, R], /) -> JobFunction[P, R]: ...


_JOB_KEYWORDS = frozenset(f.name for f in fields(Job)) - {"name", "type", "command"}


def job_decorator(
    add_job: Callable[[Job], object],
    submit: SubmitFn,
    now: Callable[[], datetime],
    name: str | None,
    schedule: Mapping[str, Any],
    options: Mapping[str, Any],
) -> JobDecorator:
    """The decorator of ``@scheduler.job(name, **schedule, **options)``: it makes the job
    (internal, its command the function itself), adds it (`add_job`: refused as any job is,
    `JobActionError`), and gives back the `JobFunction`. An ``interval`` without ``start``
    counts from `now` (the first run one interval after the definition)."""
    if name is not None and not isinstance(name, str):
        raise TypeError(
            f"@scheduler.job takes a job name, not {name!r}: write @scheduler.job() with "
            "parentheses"
        )
    unknown = sorted(set(options) - _JOB_KEYWORDS)
    if unknown:
        raise TypeError(f"@scheduler.job: {', '.join(unknown)} is no Job option")
    keywords = {**schedule, **options}
    if keywords.get("interval") is not None and keywords.get("start") is None:
        keywords["start"] = now()

    def decorate(function: Callable[P, R], /) -> JobFunction[P, R]:
        if not callable(function):
            raise TypeError(f"@scheduler.job decorates a function or class, not {function!r}")
        job_name = name if name is not None else function.__name__
        add_job(Job(job_name, type=JobType.INTERNAL, command=function, **keywords))
        return JobFunction(function, job_name, submit)

    return decorate
