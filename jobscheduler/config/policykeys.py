"""Reading and writing a job's ``retry`` and ``pause_after_failures`` keys; the other run
policies' keys are plain forms (text, scalars, durations), read and written as their `Form`
says and checked by the `Job` itself (`model.policies`)."""

from __future__ import annotations

from typing import Any

from ..model.policies import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_BACKOFF,
    PAUSE_AFTER_FAILURES_KEYS,
    PauseAfterFailures,
    Retry,
)
from .reader import Bad, ValueReader
from .values import format_duration, parse_unit_duration
from .yamlnodes import Node

__all__ = [
    "RETRY_KEYS",
    "pause_after_failures_data",
    "read_pause_after_failures",
    "read_retry",
    "retry_entries",
]

RETRY_KEYS = ("attempts", "backoff", "max_backoff", "alert_each_attempt")


def read_retry(
    reader: ValueReader, node: Node, lines: dict[str, int], where: dict[str, Any]
) -> dict[str, Any]:
    """``retry: {attempts: 3, backoff: 10s, max_backoff: 5m, alert_each_attempt: false}``, as
    keyword arguments of `Retry` (the `Job` checks them, naming ``retry.KEY``). ``retry: 3``
    is short for ``{attempts: 3}``."""
    if node.kind == "scalar":
        return {"attempts": reader.scalar(node, "retry")}
    fields = reader.entries(node, RETRY_KEYS, lines, "retry.", **where)
    if fields is None:
        raise Bad("retry must be a mapping such as {attempts: 3, backoff: 10s}", node.lineno)
    out: dict[str, Any] = {}
    for key, (_, value) in fields.items():
        if value.is_null:
            continue
        try:
            scalar = reader.scalar(value, f"retry.{key}")
            out[key] = parse_unit_duration(scalar, key) if "backoff" in key else scalar
        except (Bad, ValueError) as exc:
            message = exc.message if isinstance(exc, Bad) else str(exc)
            raise Bad(message, value.lineno, f"retry.{key}") from None
    if "attempts" not in out:
        raise Bad("retry needs attempts (every try, the first included)", node.lineno, "retry")
    return out


def retry_entries(retry: Retry) -> dict[str, Any]:
    """The keys ``retry`` is written with (attempts, and those not at their defaults)."""
    entries: dict[str, Any] = {"attempts": retry.attempts}
    if retry.backoff != DEFAULT_BACKOFF:
        entries["backoff"] = format_duration(retry.backoff)
    if retry.max_backoff != DEFAULT_MAX_BACKOFF:
        entries["max_backoff"] = format_duration(retry.max_backoff)
    if retry.alert_each_attempt:
        entries["alert_each_attempt"] = True
    return entries


def read_pause_after_failures(
    reader: ValueReader, node: Node, lines: dict[str, int], where: dict[str, Any]
) -> Any:
    """``pause_after_failures: 3`` (the value as written: the `Job` checks it), or
    ``{failures: 3, resume_after: 5m}`` as keyword arguments of `PauseAfterFailures`
    (``resume_after`` a duration with its unit; a problem names
    ``pause_after_failures.KEY`` and its line)."""
    if node.kind == "scalar":
        return reader.scalar(node, "pause_after_failures")
    fields = reader.entries(
        node, PAUSE_AFTER_FAILURES_KEYS, lines, "pause_after_failures.", **where
    )
    if fields is None:
        raise Bad(
            "pause_after_failures must be a whole number or a mapping such as "
            "{failures: 3, resume_after: 5m}",
            node.lineno,
        )
    out: dict[str, Any] = {}
    for key, (_, value) in fields.items():
        if value.is_null:
            continue
        try:
            scalar = reader.scalar(value, f"pause_after_failures.{key}")
            out[key] = parse_unit_duration(scalar, key) if key == "resume_after" else scalar
        except (Bad, ValueError) as exc:
            message = exc.message if isinstance(exc, Bad) else str(exc)
            raise Bad(message, value.lineno, f"pause_after_failures.{key}") from None
    if "failures" not in out:
        raise Bad(
            "pause_after_failures needs failures (how many in a row pause the job)",
            node.lineno,
            "pause_after_failures",
        )
    return out


def pause_after_failures_data(value: PauseAfterFailures) -> Any:
    """How ``pause_after_failures`` is written: the number alone without `resume_after`."""
    if value.resume_after is None:
        return value.failures
    return {"failures": value.failures, "resume_after": format_duration(value.resume_after)}
