"""The errors jobscheduler raises.

`JobActionError` is the specification's ``JobActionException``: an invalid job, a duplicate or
unknown name, a bad configuration file. It carries the place of the problem (file, line, job,
key) so that a message always says where to look.
"""

from __future__ import annotations

from collections.abc import Sequence

from .valueclass import value_class


@value_class(frozen=True, init=False)
class Problem:
    """One problem found in a definition or a configuration file.

    Every field but ``message`` is optional: a problem found in code has no file or line.
    """

    message: str
    file: str | None = None
    line: int | None = None
    job: str | None = None
    group: str | None = None
    key: str | None = None

    def __init__(
        self,
        message: str,
        file: str | None = None,
        line: int | None = None,
        job: str | None = None,
        group: str | None = None,
        key: str | None = None,
    ) -> None:
        put = object.__setattr__
        put(self, "message", message)
        put(self, "file", file)
        put(self, "line", line)
        put(self, "job", job)
        put(self, "group", group)
        put(self, "key", key)

    def __str__(self) -> str:
        where: list[str] = []
        if self.file is not None:
            where.append(f"{self.file}:{self.line}" if self.line is not None else self.file)
        if self.job is not None:
            where.append(f"job {self.job!r}")
        if self.group is not None:
            where.append(f"group {self.group!r}")
        if self.key is not None:
            where.append(f"key {self.key!r}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


class JobActionError(Exception):
    """A job action failed: invalid job, duplicate or unknown name, bad configuration file.

    ``problems`` lists every problem found (a configuration file reports all of them at once);
    ``str(error)`` names each with its file, line, job and key.
    """

    def __init__(self, problems: str | Problem | Sequence[Problem]) -> None:
        if isinstance(problems, str):
            problems = [Problem(problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__(self._render())

    def _render(self) -> str:
        if len(self.problems) == 1:
            return str(self.problems[0])
        lines = [f"{len(self.problems)} problems:"]
        lines.extend(f"  {p}" for p in self.problems)
        return "\n".join(lines)

    @property
    def problem(self) -> Problem:
        """The first problem (most errors have exactly one)."""
        return self.problems[0]


class InvalidJobError(JobActionError):
    """A job, dependence or group definition breaks a rule."""


class DuplicateNameError(JobActionError):
    """A job or group with that name exists already."""


class UnknownNameError(JobActionError, KeyError):
    """No job or group has that name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return JobActionError.__str__(self)


class ConfigFileError(JobActionError):
    """The configuration file cannot be read, parsed or validated."""


class ConflictError(JobActionError):
    """An API change cannot apply on top of an edit made to the file by someone else."""


class ClaimError(RuntimeError):
    """A claim that failed for a reason its claimer has already told in the log (the state
    store away, this node fenced): the run ends NOT_STARTED with this message, and the
    engine logs it without a traceback."""
