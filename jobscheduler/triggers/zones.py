"""Time zones: naming them, reading wall-clock times in them, and the DST rules.

The rules: a wall time that does not exist (inside a spring-forward gap) is read as
the first instant after the gap; an ambiguous one (inside a fall-back fold) as its first
occurrence.
"""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime, timezone, tzinfo
from functools import lru_cache
from pathlib import Path

__all__ = [
    "is_utc",
    "local_zone",
    "localize",
    "resolve_wall",
    "resolve_zone",
    "wall_time",
]


# The IANA names of UTC itself. They resolve to `datetime.UTC`, which behaves the same (no
# gaps, no folds, tzname "UTC") and is what ``tzinfo=UTC`` gives: a UTC job's start written
# that way is then its own wall time and UTC instant (one datetime per job, not three), and
# converting an instant to the job's zone returns it unchanged.
_UTC_NAMES = frozenset(
    ("UTC", "Etc/UTC", "UCT", "Etc/UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu")
)


def is_utc(zone: tzinfo) -> bool:
    """Whether `zone` is UTC itself: `datetime.UTC` or a ZoneInfo named by one of UTC's names."""
    return zone is UTC or getattr(zone, "key", None) in _UTC_NAMES


@lru_cache(maxsize=512)
def resolve_zone(name: str | None) -> tzinfo:
    """The zone called `name` (an IANA name such as ``Europe/Berlin``), or the machine's own
    zone for None. Raises ValueError naming the zone when there is no such zone. The names
    of UTC give `datetime.UTC`."""
    if name is None:
        return local_zone()
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"time zone must be an IANA name such as 'Europe/Berlin', not {name!r}")
    if name.strip() in _UTC_NAMES:
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # see `local_zone`

    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        # OSError: a name too long for a file name, or one naming a directory.
        shown = name if len(name) <= 80 else f"{name[:60]}… ({len(name)} characters)"
        raise ValueError(f"unknown time zone {shown!r}") from exc


def _local_zone_key() -> str | None:
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz:
        return tz
    etc_timezone = Path("/etc/timezone")
    if etc_timezone.is_file():
        key = etc_timezone.read_text(encoding="utf-8", errors="replace").strip()
        if key:
            return key
    localtime = Path("/etc/localtime")
    if localtime.is_symlink():
        target = str(localtime.resolve())
        marker = "zoneinfo/"
        if marker in target:
            return target.split(marker, 1)[1]
    return None


@lru_cache(maxsize=1)
def local_zone() -> tzinfo:
    """The machine's zone: ``$TZ``, ``/etc/timezone`` or the ``/etc/localtime`` link, read as
    an IANA zone so that DST rules apply; UTC when none of them names one."""
    key = _local_zone_key()
    if key in _UTC_NAMES:
        return UTC
    # zoneinfo (and the sysconfig it reads its search path from) is imported by the first
    # zone that is not UTC: a command reading UTC jobs does not pay for it.
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if key:
        try:
            return ZoneInfo(key)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    localtime = Path("/etc/localtime")
    if localtime.is_file():
        try:
            with localtime.open("rb") as fh:
                return ZoneInfo.from_file(fh, key="localtime")
        except (OSError, ValueError):
            pass
    return UTC


def wall_time(instant: datetime, zone: tzinfo) -> datetime:
    """What a wall clock in `zone` shows at `instant` (aware), as a naive datetime."""
    return instant.astimezone(zone).replace(tzinfo=None)


def localize(wall: datetime, zone: tzinfo) -> datetime:
    """The instant a naive wall-clock time `wall` stands for in `zone`, aware in `zone`.

    An ambiguous wall time is its first occurrence (``fold=0``); a non-existent one (in a DST
    gap) is the first instant after the gap, that is the transition itself, shown in the
    zone's new offset (02:30 in Berlin's spring gap gives 03:00+02:00). `wall`'s own `fold`
    is ignored. Fixed-offset zones take a fast path: they have neither gaps nor folds.
    """
    first = wall.replace(tzinfo=zone, fold=0)
    if isinstance(zone, timezone):
        return first
    return resolve_wall(first)


def resolve_wall(first: datetime) -> datetime:
    """`first` (aware, ``fold=0``) itself when its wall time exists, else the end of its gap.

    Both sides of the test carry the same tzinfo, so ``==`` compares wall fields: a wall time
    exists exactly when the round trip through UTC gives it back.
    """
    zone = first.tzinfo
    assert zone is not None
    if first.astimezone(UTC).astimezone(zone) == first:
        return first
    return _gap_end(first.replace(tzinfo=None), zone).astimezone(zone)


def _gap_end(wall: datetime, zone: tzinfo) -> datetime:
    """The transition instant (UTC) of the gap that swallows `wall`, found by bisection.

    PEP 495 reads a wall time in a gap with the offset before the transition for fold=0 and the
    offset after it for fold=1, so the transition lies between those two readings.
    """
    before = wall.replace(tzinfo=zone, fold=0).timestamp()
    after = wall.replace(tzinfo=zone, fold=1).timestamp()
    # Whole seconds: tz transitions fall on them. Invariant: lo has the old offset, hi the new.
    lo, hi = math.floor(min(before, after)), math.ceil(max(before, after))
    old = datetime.fromtimestamp(lo, zone).utcoffset()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, zone).utcoffset() == old:
            lo = mid
        else:
            hi = mid
    return datetime.fromtimestamp(hi, UTC)
