"""Checks of a job's plain option values: each returns the normalised value or raises
ValueError (`Job` reports it with the job's name and the key)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from .jobparts import _REFERENCE_RE, EMPTY_MAPPING, JobType, _seconds, _to_timedelta

__all__ = [
    "ON_NODE_LOSS",
    "checked_args",
    "checked_command",
    "checked_cwd",
    "checked_env",
    "checked_flag",
    "checked_int",
    "checked_kill_grace",
    "checked_max_instances",
    "checked_on_node_loss",
    "checked_output_limit",
    "checked_timeout",
    "checked_type",
    "checked_warn_after",
]

# What `on_node_loss` accepts: a run lost with its node (killed, cut off) is recorded
# abandoned; "rerun" also runs it again on the node that took over (docs/state.md).
ON_NODE_LOSS = ("abandon", "rerun")


def checked_int(key: str, value: Any) -> int:
    """A whole number (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be a whole number, not {value!r}")
    return value


def checked_flag(key: str, value: Any) -> bool:
    """True or False (not 1, not "yes")."""
    if value is not True and value is not False:
        raise ValueError(f"{key} must be true or false, not {value!r}")
    return value


def checked_max_instances(value: Any) -> int | None:
    """None (unlimited) or a whole number of at least 1."""
    if value is None:
        return None
    count = checked_int("max_instances", value)
    if count < 1:
        raise ValueError(f"max_instances must be at least 1, not {count}")
    return count


def checked_output_limit(value: Any) -> int:
    """A whole number of bytes, 0 or more."""
    limit = checked_int("output_limit", value)
    if limit < 0:
        raise ValueError(f"output_limit must not be negative, not {limit}")
    return limit


def checked_type(value: Any) -> JobType:
    """A `JobType`, or its name (any case)."""
    if isinstance(value, JobType):
        return value
    if isinstance(value, str):
        return JobType.parse(value)
    raise ValueError(f"unknown job type {value!r} (expected 'external' or 'internal')")


def checked_timeout(value: Any) -> timedelta | None:
    """None (no timeout), or a duration above 0 (a timedelta or seconds)."""
    if value is None:
        return None
    timeout = _to_timedelta(value, "timeout")
    if timeout <= timedelta(0):
        raise ValueError(f"timeout must be above 0, not {_seconds(timeout)}")
    return timeout


def checked_kill_grace(value: Any) -> timedelta:
    """A duration of 0 or more (a timedelta or seconds): SIGTERM to SIGKILL."""
    grace = _to_timedelta(value, "kill_grace")
    if grace < timedelta(0):
        raise ValueError(f"kill_grace must not be negative ({_seconds(grace)})")
    return grace


def checked_on_node_loss(value: Any) -> str:
    """``abandon`` or ``rerun``."""
    if value not in ON_NODE_LOSS:
        raise ValueError(f"on_node_loss must be abandon or rerun, not {value!r}")
    return str(value)


def checked_cwd(value: Any) -> str | None:
    """None (the scheduler's directory), or a path (text or `os.PathLike`), kept as text."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"cwd must be a path, not {value!r}")
    return value


def checked_warn_after(value: Any) -> timedelta | str:
    """``"auto"``, or a positive duration (a timedelta, or seconds as a number)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = timedelta(seconds=value)
    if not isinstance(value, timedelta):
        raise ValueError(f"warn_after must be a duration (10m, 1h30m) or auto, not {value!r}")
    if value <= timedelta(0):
        raise ValueError(f"warn_after must be positive, not {value}")
    return value


def checked_env(env: Any) -> Mapping[str, str] | None:
    """None, or a read-only copy of a mapping of text to text."""
    if env is None:
        return None
    if not isinstance(env, Mapping):
        raise ValueError(f"env must be a mapping of names to text, not {env!r}")
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"env entries must be text: {key!r}: {value!r}")
    return MappingProxyType(dict(env))


def checked_args(args: Any, job_type: Any) -> Mapping[str, Any]:
    """A read-only copy of an internal job's keyword arguments (identifiers as keys); None
    is no arguments."""
    if args is None:
        return EMPTY_MAPPING
    if not isinstance(args, Mapping):
        raise ValueError(f"args must be a mapping of keyword arguments, not {args!r}")
    for key in args:
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"args keys must be Python identifiers, not {key!r}")
    if args and job_type is not JobType.INTERNAL:
        raise ValueError("args are for internal jobs; pass arguments in command instead")
    return MappingProxyType(dict(args)) if args else EMPTY_MAPPING


def checked_command(
    command: Any, job_type: Any, shell: Any
) -> str | tuple[str, ...] | Callable[..., Any]:
    """An EXTERNAL job's argv list or text (split like a shell would unless `shell`), or an
    INTERNAL job's ``"package.module:name"``, or the function or class itself (a job defined
    in code)."""
    internal = job_type is JobType.INTERNAL
    if callable(command):
        return _checked_callable(command, internal)
    if isinstance(command, str):
        return _checked_text(command, internal, shell)
    if isinstance(command, Sequence) and not isinstance(command, bytes):
        return _checked_argv(tuple(command), internal)
    raise ValueError(f"command must be text or a list of text, not {command!r}")


def _checked_callable(command: Callable[..., Any], internal: bool) -> Callable[..., Any]:
    if not internal:
        raise ValueError(
            f"a Python function or class ({command!r}) is the command of an internal job "
            "(type internal)"
        )
    return command


def _checked_text(command: str, internal: bool, shell: Any) -> str:
    if not command.strip():
        raise ValueError("command must not be empty")
    if internal:
        if not _REFERENCE_RE.match(command.strip()):
            raise ValueError(f"an internal job's command is 'package.module:name', not {command!r}")
        return command.strip()
    # Only quotes and backslashes can make shlex.split fail (posix mode, no comments):
    # a command without them is not split here, which is most of a job's cost.
    if not shell and ("'" in command or '"' in command or "\\" in command):
        import shlex  # only for a command with quotes: not at every start

        try:
            shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"command {command!r} cannot be split: {exc}") from None
    return command


def _checked_argv(argv: tuple[Any, ...], internal: bool) -> tuple[str, ...]:
    if not argv:
        raise ValueError("command must not be empty")
    if not all(isinstance(arg, str) for arg in argv):
        raise ValueError(f"every argument of command must be text: {list(argv)!r}")
    if not argv[0]:
        raise ValueError("command must not start with an empty program name")
    if internal:
        raise ValueError("an internal job's command is one 'package.module:name' text")
    return argv
