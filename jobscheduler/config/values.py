"""Values of the configuration file: durations, date-times, plain data, and the known keys.

Shared by the loader and the writer, so that what one writes the other reads back unchanged.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from typing import Any

from ..model.job import JOB_OPTIONS
from ..triggers.zones import is_utc, localize, wall_time

__all__ = [
    "EMAIL_KEYS",
    "GROUP_KEYS",
    "JOB_KEYS",
    "MESSAGE_KEYS",
    "SMTP_KEYS",
    "TOP_KEYS",
    "datetime_data",
    "format_duration",
    "parse_datetime",
    "parse_delay",
    "parse_duration",
    "parse_unit_duration",
    "plain_data",
    "unknown_key_message",
]

TOP_KEYS = ("email", "jobs", "groups")
JOB_KEYS = ("description", *(o.name for o in JOB_OPTIONS if o.name != "description"))
"""A job's keys, in the order they are written."""
DEPENDENCE_KEYS = ("job", "status", "delay")
MESSAGE_KEYS = ("recipients", "template", "template_file")
GROUP_KEYS = ("jobs", "messages")
EMAIL_KEYS = ("from_address", "subject", "default_template", "default_template_file", "smtp")
SMTP_KEYS = (
    "host",
    "port",
    "security",
    "username",
    "password_env",
    "timeout",
    "retries",
    "queue_size",
)

# The specification's parameter names (and a few common guesses), lower-cased without
# separators, pointing at the key to write instead.
_SYNONYMS = {
    "startdtg": "start",
    "enddtg": "stop",
    "end": "stop",
    "intervalvalue": "interval",
    "intervalunit": "interval",
    "jobtype": "type",
    "jobcmd": "command",
    "cmd": "command",
    "templatefilename": "template_file",
    "definedgroups": "groups",
    "emailconfiguration": "email",
    "fromaddress": "from_address",
    "defaulttemplate": "default_template",
    "password": "password_env",
    "dependency": "dependence",
    "depends": "dependence",
    "dependson": "dependence",
    "alerts": "messages",
    "tz": "timezone",
    "zone": "timezone",
    "environment": "env",
    "workdir": "cwd",
    "directory": "cwd",
}


def unknown_key_message(key: str, known: tuple[str, ...]) -> str:
    """``unknown key 'x' (did you mean 'y'?)``, suggesting the closest known key."""
    folded = re.sub(r"[\s_.-]", "", key.lower())
    guess = _SYNONYMS.get(folded)
    if guess not in known:
        import difflib  # only for a misspelt key

        close = difflib.get_close_matches(key.lower(), known, n=1, cutoff=0.6)
        guess = close[0] if close else None
    hint = f" (did you mean {guess!r}?)" if guess else f" (known keys: {', '.join(known)})"
    return f"unknown key {key!r}{hint}"


# -- durations -------------------------------------------------------------------------------

_DURATION_UNITS = {
    "ms": timedelta(milliseconds=1),
    "msec": timedelta(milliseconds=1),
    "millisecond": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "sec": timedelta(seconds=1),
    "second": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "min": timedelta(minutes=1),
    "minute": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "hr": timedelta(hours=1),
    "hour": timedelta(hours=1),
    "d": timedelta(days=1),
    "day": timedelta(days=1),
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([a-z]+)")
_MAX_SECONDS = 10 * 365 * 86400  # ten years: beyond that it is a typo


def parse_duration(value: Any, key: str, *, bare: bool = True) -> timedelta:
    """A duration: ``"10s"``, ``"500ms"``, ``"2m"`` (minutes), ``"1h"``, ``"1d"``, ``"1h30m"``,
    ``"90 seconds"``, or a plain number of seconds. A negative plain number is returned as
    such (the definition refuses it, naming the key); text is never negative. `bare` False
    (a caller that refused bare numbers first): the refusal does not suggest one."""
    if isinstance(value, bool):
        raise ValueError(f"{key} must be a duration such as '10s', not {value!r}")
    if isinstance(value, int | float):
        return _seconds(value, key)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a duration such as '10s' or '500ms', not {value!r}")
    text = value.strip().lower()
    try:
        return _seconds(float(text), key)  # "10" in quotes: seconds too
    except ValueError:
        pass
    total = _duration_parts(text, value, key)
    if total is None:
        if not bare:
            raise ValueError(
                f"{key} {value!r} is not a duration: write it with its unit, e.g. '90s', "
                "'30m', '2h', '1h30m' or '1d'"
            )
        raise ValueError(
            f"{key} {value!r} is not a duration: write e.g. '10s', '500ms', '2m', '1h' or a "
            "number of seconds"
        )
    return total


def _seconds(value: float, key: str) -> timedelta:
    if not math.isfinite(value) or abs(value) > _MAX_SECONDS:
        raise ValueError(f"{key} {value!r} is not a usable number of seconds")
    return timedelta(seconds=value)


def _duration_parts(text: str, value: str, key: str) -> timedelta | None:
    """The sum of `text`'s amounts with units (``1h30m``, ``90 seconds``); None when it is
    not such a text."""
    total = timedelta(0)
    position = 0
    for match in _DURATION_PART.finditer(text):
        step = _unit(match.group(2))
        if text[position : match.start()].strip() or step is None:
            return None
        amount = float(match.group(1)) * step.total_seconds()
        if amount > _MAX_SECONDS:  # checked before timedelta arithmetic would overflow
            raise ValueError(f"{key} {value!r} is longer than ten years")
        total += step * float(match.group(1))
        position = match.end()
    if not position or text[position:].strip():
        return None
    if total.total_seconds() > _MAX_SECONDS:
        raise ValueError(f"{key} {value!r} is longer than ten years")
    return total


def _unit(unit: str) -> timedelta | None:
    """The length of a unit's name (``s``, ``second``, ``seconds``, ...)."""
    return _DURATION_UNITS.get(unit) or _DURATION_UNITS.get(unit.rstrip("s"))


def parse_unit_duration(
    value: Any, key: str, units: tuple[str, ...] = ("s", "m"), why: str = ""
) -> timedelta:
    """A duration that carries its unit (``10s``, ``2m``, ``1h30m``); a bare number, quoted or
    not, is refused: ``backoff: 10`` could be seconds or milliseconds, and is not guessed.
    The refusal suggests the number with each of `units`, then says `why`."""
    bare: Any = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        bare = value
    elif isinstance(value, str):
        try:
            bare = float(value.strip())
        except ValueError:
            bare = None
    if bare is not None:
        examples = " or ".join(f"'{bare:g}{unit}'" for unit in units)
        raise ValueError(
            f"{key} {value!r} is a bare number: write it with its unit, e.g. {examples}{why}"
        )
    return parse_duration(value, key, bare=False)


def parse_delay(value: Any) -> timedelta:
    """A dependence's delay: a duration with its unit (``10s``, ``500ms``). A bare number,
    quoted or not, is refused: the spec's delays are milliseconds, and reading ``500`` as
    seconds (as other durations are) would silently wait a thousand times too long."""
    why = " (the spec's delays are milliseconds, so a bare number is not guessed)"
    return parse_unit_duration(value, "delay", ("ms", "s"), why)


def format_duration(value: timedelta) -> str | int | float:
    """The text `parse_duration` reads back as `value`: ``"90m"``, ``"10s"``, ``"1500ms"``.

    Whole days are written in hours ("36h") since days of DST change are ambiguous to readers.
    Sub-millisecond parts are written as seconds with a fraction.
    """
    micro = value // timedelta(microseconds=1)
    if micro < 0:
        return value.total_seconds()
    for unit, size in (("h", 3_600_000_000), ("m", 60_000_000), ("s", 1_000_000), ("ms", 1000)):
        if micro % size == 0 and micro:
            return f"{micro // size}{unit}"
    if micro == 0:
        return "0s"
    return f"{micro / 1_000_000:.6f}".rstrip("0") + "s"


# -- date-times ------------------------------------------------------------------------------


def parse_datetime(value: Any, key: str) -> datetime:
    """A YAML timestamp or an ISO-8601 text (``2003-05-10T01:00``, ``…+02:00``, ``…Z``).

    A date alone means midnight. Naive results are left naive (the job reads them in its zone).
    """
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            return parsed
    raise ValueError(
        f"{key} must be a date and time such as 2003-05-10 01:00:00 (ISO 8601, optionally with "
        f"an offset such as +02:00), not {value!r}"
    )


def _same_zone(a: tzinfo, b: tzinfo) -> bool:
    key = getattr(a, "key", None)
    return (
        a is b
        or (key is not None and key == getattr(b, "key", None))
        or (is_utc(a) and is_utc(b))  # `datetime.UTC` and ZoneInfo("Etc/UTC") alike
    )


def datetime_data(value: datetime, zone: tzinfo) -> datetime:
    """How a job's `value` is written: as a naive wall time when it is in the job's own `zone`
    and reading that wall time back gives the same instant (not so for the second occurrence
    of an ambiguous time); else with its UTC offset, so that its meaning never depends on the
    machine that reads the file."""
    if value.tzinfo is None:
        return value
    if _same_zone(value.tzinfo, zone):
        wall = wall_time(value, zone)
        # Compared in UTC: within one zone Python compares wall times and ignores `fold`.
        if localize(wall, zone).astimezone(UTC) == value.astimezone(UTC):
            return wall
    offset = value.utcoffset()
    if offset is None or offset % timedelta(minutes=1):
        # YAML timestamps carry whole-minute offsets only (historic zones had seconds).
        return value.astimezone(UTC)
    return value.astimezone(timezone(offset))


# -- plain data --------------------------------------------------------------------------------

_PLAIN_DEPTH = 32


def plain_data(value: Any, key: str, depth: int = 0) -> Any:
    """`value` as data YAML can hold and give back: text, numbers, booleans, None, dates,
    lists and mappings with text keys. Tuples become lists. Raises ValueError naming `key`
    (e.g. ``args.when.0``) for anything else."""
    if depth > _PLAIN_DEPTH:
        raise ValueError(f"{key} is nested more than {_PLAIN_DEPTH} levels deep")
    if value is None or isinstance(value, str | bool | int | float | datetime | date):
        return value
    if isinstance(value, list | tuple):
        return [plain_data(item, f"{key}.{i}", depth + 1) for i, item in enumerate(value)]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, item in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{key} has a key {k!r} that is not text")
            out[k] = plain_data(item, f"{key}.{k}", depth + 1)
        return out
    raise ValueError(
        f"{key} holds a {type(value).__name__}, which a configuration file cannot hold "
        "(text, numbers, booleans, null, dates, lists and mappings only)"
    )
