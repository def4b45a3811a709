"""A job's run policies: `overlap`, `catch_up` (with `catch_up_window`), `retry` (a `Retry`),
`pause_after_failures` and `host`. Each check returns the normalised value or raises
ValueError (or `InvalidJobError` naming the key inside ``retry``); `Job` declares each field
with its check and reports a failure with the job's name and the key.

The values are plain (texts, a timedelta, an int, a frozen `Retry`), kept in the job's
options object (see `joblayout`): a job that sets none of them costs nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final

from ..valueclass import value_class
from .jobparts import MAX_DURATION, _fail, _seconds

__all__ = [
    "CATCH_UP_VALUES",
    "DEFAULT_CATCH_UP_WINDOW",
    "OVERLAP_VALUES",
    "PAUSE_AFTER_FAILURES_KEYS",
    "PauseAfterFailures",
    "Retry",
    "checked_catch_up",
    "checked_catch_up_window",
    "checked_host",
    "checked_overlap",
    "checked_pause_after_failures",
    "checked_retry",
    "dependent_job_problems",
]

OVERLAP_VALUES: Final = ("allow", "skip", "queue", "replace")
CATCH_UP_VALUES: Final = ("none", "latest", "all")
DEFAULT_CATCH_UP_WINDOW: Final = timedelta(days=1)
DEFAULT_BACKOFF: Final = timedelta(seconds=10)
DEFAULT_MAX_BACKOFF: Final = timedelta(hours=1)
MAX_ATTEMPTS: Final = 100


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> str:
    if isinstance(value, str) and value.strip().lower() in allowed:
        # The very object of `allowed` (shared, so the engine may test a default by identity)
        return allowed[allowed.index(value.strip().lower())]
    raise ValueError(f"{key} must be one of {', '.join(allowed)}, not {value!r}")


def checked_overlap(value: Any) -> str:
    """``allow`` | ``skip`` | ``queue`` | ``replace`` (any case)."""
    return _choice("overlap", value, OVERLAP_VALUES)


def checked_catch_up(value: Any) -> str:
    """``none`` | ``latest`` | ``all`` (any case)."""
    return _choice("catch_up", value, CATCH_UP_VALUES)


def _duration(value: Any, key: str) -> timedelta:
    """A timedelta above 0 and at most ten years; a bare number is refused: a duration here
    always carries its unit (``timedelta`` in code, ``10s`` in the file)."""
    if not isinstance(value, timedelta):
        if isinstance(value, int | float) and not isinstance(value, bool):
            raise ValueError(
                f"{key} {value!r} is a bare number: give a duration with its unit "
                "(timedelta(seconds=10); '10s' in the file)"
            )
        raise ValueError(f"{key} must be a duration such as timedelta(seconds=10), not {value!r}")
    if value <= timedelta(0):
        raise ValueError(f"{key} must be above 0, not {_seconds(value)}")
    if value > MAX_DURATION:
        raise ValueError(f"{key} must be at most ten years, not {_seconds(value)}")
    return value


def checked_catch_up_window(value: Any) -> timedelta:
    """A duration above 0 (see `_duration`)."""
    return _duration(value, "catch_up_window")


def checked_pause_after_failures(value: Any) -> PauseAfterFailures | None:
    """None (never), a `PauseAfterFailures`, a whole number of at least 1 (its `failures`),
    or a mapping of its fields ``{failures: 3, resume_after: timedelta(minutes=5)}``."""
    if value is None or isinstance(value, PauseAfterFailures):
        return value
    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in PAUSE_AFTER_FAILURES_KEYS]
        if unknown:
            raise _fail(
                f"unknown pause_after_failures key {unknown[0]!r} (expected "
                f"{', '.join(PAUSE_AFTER_FAILURES_KEYS)})",
                key=f"pause_after_failures.{unknown[0]}",
            )
        if "failures" not in value:
            raise _fail(
                "pause_after_failures needs failures (how many in a row pause the job)",
                key="pause_after_failures",
            )
        return PauseAfterFailures(**value)
    return PauseAfterFailures(value, key="pause_after_failures")


# What fnmatch cannot express is never an error (it has no syntax errors of its own): what
# is refused is what cannot name a node — an empty pattern, spaces at its ends, control
# characters, and a "[" left open (fnmatch reads it as a literal "[", a silent surprise).
_OPEN_BRACKET = re.compile(r"\[(?![^\]]*\])")


def checked_host(value: Any) -> str | None:
    """None (any node) or a shell-style pattern (`fnmatch`): ``db-*``, ``worker-[12]``.

    Only the syntax is checked (docs/config.md): whether a node matches is known only when
    nodes run, and a pattern for a machine not yet up is not an error.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"host must be a non-empty pattern such as 'db-*', not {value!r}")
    if value != value.strip():
        raise ValueError(f"host pattern {value!r} must not start or end with spaces")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"host pattern {value!r} contains a control character")
    if _OPEN_BRACKET.search(value):
        raise ValueError(f"host pattern {value!r} has a '[' that is never closed")
    return value


PAUSE_AFTER_FAILURES_KEYS: Final = ("failures", "resume_after")


@value_class(frozen=True, init=False)
class PauseAfterFailures:
    """Pause a job after `failures` consecutive FAILED runs, counted across every node of the
    state store (FOSSology's respawn throttle); with `resume_after` (a timedelta above 0), the
    pause ends by itself that long after it began (None: it lasts until resumed).

    The file takes ``pause_after_failures: 3`` or ``{failures: 3, resume_after: 5m}``."""

    failures: int
    resume_after: timedelta | None = None

    def __init__(
        self, failures: int, resume_after: timedelta | None = None, *, key: str | None = None
    ) -> None:
        where = key or "pause_after_failures.failures"
        if isinstance(failures, bool) or not isinstance(failures, int):
            raise _fail(f"pause_after_failures must be a whole number, not {failures!r}", key=where)
        if failures < 1:
            raise _fail(f"pause_after_failures must be at least 1, not {failures}", key=where)
        if resume_after is not None:
            try:
                resume_after = _duration(resume_after, "resume_after")
            except ValueError as exc:
                raise _fail(str(exc), key="pause_after_failures.resume_after") from None
        object.__setattr__(self, "failures", failures)
        object.__setattr__(self, "resume_after", resume_after)


@value_class(frozen=True, init=False)
class Retry:
    """Retry a FAILED run: at most `attempts` tries in all, the first included (so
    ``attempts=1`` never retries), waiting ``backoff × 2^(n-1)`` after try n, with full
    jitter (a random share of 50–100 % of that), capped at `max_backoff` after the jitter.

    `backoff` and `max_backoff` are timedeltas (a bare number is refused); handlers hear only
    the final outcome unless `alert_each_attempt`.
    """

    attempts: int
    backoff: timedelta = DEFAULT_BACKOFF
    max_backoff: timedelta = DEFAULT_MAX_BACKOFF
    alert_each_attempt: bool = False

    def __init__(
        self,
        attempts: int,
        backoff: timedelta = DEFAULT_BACKOFF,
        max_backoff: timedelta = DEFAULT_MAX_BACKOFF,
        alert_each_attempt: bool = False,
    ) -> None:
        if isinstance(attempts, bool) or not isinstance(attempts, int):
            raise _fail(f"attempts must be a whole number, not {attempts!r}", key="retry.attempts")
        if not 1 <= attempts <= MAX_ATTEMPTS:
            raise _fail(
                f"attempts must be from 1 to {MAX_ATTEMPTS}, not {attempts}", key="retry.attempts"
            )
        try:
            backoff = _duration(backoff, "backoff")
        except ValueError as exc:
            raise _fail(str(exc), key="retry.backoff") from None
        try:
            max_backoff = _duration(max_backoff, "max_backoff")
        except ValueError as exc:
            raise _fail(str(exc), key="retry.max_backoff") from None
        if max_backoff < backoff:
            raise _fail(
                f"max_backoff ({_seconds(max_backoff)}) is below backoff ({_seconds(backoff)})",
                key="retry.max_backoff",
            )
        if alert_each_attempt is not True and alert_each_attempt is not False:
            raise _fail(
                f"alert_each_attempt must be true or false, not {alert_each_attempt!r}",
                key="retry.alert_each_attempt",
            )
        put = object.__setattr__
        put(self, "attempts", attempts)
        put(self, "backoff", backoff)
        put(self, "max_backoff", max_backoff)
        put(self, "alert_each_attempt", alert_each_attempt)

    def delay(self, attempt: int, share: float) -> timedelta:
        """The wait after try `attempt` (1-based) failed: ``backoff × 2^(attempt-1)`` times
        `share` (the jitter, from 0.5 to 1.0), then capped at `max_backoff`."""
        exponent = min(attempt - 1, 40)  # 2^40 × any backoff is past every cap
        seconds = self.backoff.total_seconds() * (2**exponent) * share
        return min(timedelta(seconds=min(seconds, MAX_DURATION.total_seconds())), self.max_backoff)


_RETRY_KEYS = ("attempts", "backoff", "max_backoff", "alert_each_attempt")


def checked_retry(value: Any) -> Retry | None:
    """None, a `Retry`, or a mapping of its fields (reported with the job's name)."""
    if value is None or isinstance(value, Retry):
        return value
    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in _RETRY_KEYS]
        if unknown:
            raise _fail(
                f"unknown retry key {unknown[0]!r} (expected {', '.join(_RETRY_KEYS)})",
                key=f"retry.{unknown[0]}",
            )
        if "attempts" not in value:
            raise _fail("retry needs attempts (every try, the first included)", key="retry")
        return Retry(**value)
    raise ValueError(f"retry must be a Retry or {{attempts: 3, backoff: 10s}}, not {value!r}")


def dependent_job_problems(catch_up: Any, overlap: Any) -> list[tuple[str, str]]:
    """(key, message) for the run policies a dependent job cannot have: `catch_up` (other
    than ``none``) and `overlap` (other than ``allow``). A dependent job has no slots to miss
    or to overlap: its runs come one per parent event (docs/config.md)."""
    problems: list[tuple[str, str]] = []
    if catch_up != "none" and catch_up in CATCH_UP_VALUES:
        problems.append(
            ("catch_up", "catch_up is for scheduled jobs: a dependent job has no slots to miss")
        )
    if overlap != "allow" and overlap in OVERLAP_VALUES:
        problems.append((
            "overlap",
            "overlap is for scheduled jobs: a dependent job has no slots that could "
            "overlap (its runs come one per event of its parent)",
        ))  # fmt: skip
    return problems
