"""Reading systemd `OnCalendar` expressions (``systemd.time(7)``, "Calendar Events").

A faithful reading of systemd's own parser (``src/shared/calendarspec.c``, as in systemd 252):
what ``systemd-analyze calendar`` accepts is accepted, what it refuses is refused
(`CalendarError`), and the parsed `CalendarSpec` is normalised as systemd normalises it, so
that `calendar_eval` finds the same elapses. The grammar::

    [WEEKDAYS] [[YEAR-]MONTH-DAY] [HOUR:MINUTE[:SECOND]] [TIMEZONE]
    WEEKDAYS   Mon, Tuesday, Mon..Fri, Mon-Fri, Sat,Sun (any case)
    each field *, a number, a list (1,15), a range (1..5), a repetition (0/15, 1..20/5)
    DAY        ~N after the month counts from the month's end (*-02~01: its last day)
    SECOND     may have a fraction (00:00:01.5, */0.25), to the microsecond
    TIMEZONE   UTC, or an IANA name (Europe/Berlin) that wins over the job's zone
    @EPOCH     one instant; shorthands minutely, hourly, daily, weekly, monthly, quarterly,
               semiannually (bi-annually, …), yearly (annually)

A two-digit year is 20YY below 70 and 19YY from 70. Years run from 1970 to 2199 (systemd's
bounds). A missing date is ``*-*-*``, a missing time ``00:00:00``, missing seconds ``00``.

As systemd does with the machine's zone (``TZ``), the abbreviations of the job's zone (``CET``
and ``CEST`` for Europe/Berlin: glibc's ``tzname``, from the rule at the end of the zone's
file) are accepted as a suffix, before zone names: they force standard or summer time.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from zoneinfo import TZPATH

from .calendar_spec import USEC_PER_SEC, CalendarError, CalendarSpec, Chain, Component
from .zones import resolve_zone

__all__ = ["USEC_PER_SEC", "CalendarError", "CalendarSpec", "Component", "parse_calendar"]

_INT_MAX = 2**31 - 1
_MIN_YEAR, _MAX_YEAR = 1970, 2199
_COMPONENTS_MAX = 240
_BITS_WEEKDAYS = 127
_DAYS = (
    ("monday", 0),
    ("mon", 0),
    ("tuesday", 1),
    ("tue", 1),
    ("wednesday", 2),
    ("wed", 2),
    ("thursday", 3),
    ("thu", 3),
    ("friday", 4),
    ("fri", 4),
    ("saturday", 5),
    ("sat", 5),
    ("sunday", 6),
    ("sun", 6),
)
_DIGITS = re.compile(r"[0-9]+")
_EPOCH = re.compile(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)")
_ZONE_CHARS = re.compile(r"^[A-Za-z0-9_+\-/]+$")


class _Cursor:
    """The rest of the text being read (systemd reads through a ``const char *``)."""

    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.text[i] if i < len(self.text) else ""  # "" is C's NUL

    def skip_spaces(self) -> None:
        while self.peek() == " ":
            self.pos += 1


def _forced(p: str, abbreviations: tuple[str, str] | None) -> tuple[int, str] | None:
    """(0 or 1, the abbreviation) when `p` ends with a space and one of the zone's
    abbreviations (any case), standard first, as systemd looks for them."""
    for dst, name in enumerate(abbreviations or ()):
        if name and len(p) > len(name) and p.lower().endswith(" " + name.lower()):
            return dst, name
    return None


class _Spec:
    """The mutable spec while parsing."""

    def __init__(self) -> None:
        self.dst = -1
        self.dst_name: str | None = None
        self.weekdays = 0
        self.year: list[list[int]] | None = None
        self.month: list[list[int]] | None = None
        self.day: list[list[int]] | None = None
        self.hour: list[list[int]] | None = None
        self.minute: list[list[int]] | None = None
        self.microsecond: list[list[int]] | None = None
        self.end_of_month = False
        self.utc = False
        self.timezone: str | None = None


def _fail(expression: str, why: str) -> CalendarError:
    return CalendarError(f"invalid calendar expression {expression!r}: {why}")


_POSIX_NAME = re.compile(r"<([^>]*)>|([A-Za-z]{3,})")


@lru_cache(maxsize=512)
def zone_abbreviations(key: str | None) -> tuple[str, str] | None:
    """glibc's ``tzname`` for ``TZ=:key``: the standard and summer abbreviations of the rule
    at the end of the zone's file (``CET-1CEST,M3.5.0,M10.5.0/3`` → CET, CEST; a zone
    without summer time gives its one name twice); None when unknown."""
    if not key:
        return None
    for root in TZPATH:
        path = Path(root) / key
        try:
            data = path.read_bytes()
        except OSError:
            continue
        footer = data.rstrip(b"\n").rsplit(b"\n", 1)[-1].decode("ascii", "replace")
        names = [a or b for a, b in _POSIX_NAME.findall(footer)]
        if not names or not data.startswith(b"TZif"):
            return None
        return names[0], names[1] if len(names) > 1 else names[0]
    return None


def parse_calendar(expression: str, zone_key: str | None = None) -> CalendarSpec:
    """`expression` parsed and normalised; `CalendarError` where systemd refuses it.
    `zone_key` names the job's zone, whose abbreviations a suffix may be."""
    if not isinstance(expression, str):
        raise CalendarError(f"calendar must be a text such as 'Mon..Fri 09:00', not {expression!r}")
    return _parse_cached(expression, zone_abbreviations(zone_key))


@lru_cache(maxsize=2048)
def _parse_cached(expression: str, abbreviations: tuple[str, str] | None) -> CalendarSpec:
    try:
        return _parse(expression, abbreviations)
    except _Invalid as exc:
        raise _fail(expression, str(exc)) from None


class _Invalid(Exception):
    pass


def _zone_is_valid(name: str) -> bool:
    """systemd's ``timezone_is_valid``: a name of the zone database (a file under
    /usr/share/zoneinfo holding a zone)."""
    if not name or name.startswith("/") or not _ZONE_CHARS.match(name) or "//" in name:
        return False
    try:
        resolve_zone(name)
    except ValueError:
        return False
    return True


def _parse(expression: str, abbreviations: tuple[str, str] | None) -> CalendarSpec:
    c = _Spec()
    if "\x00" in expression:
        raise _Invalid("it holds a NUL character")
    p = _zone_suffix(expression, abbreviations, c)
    if not p:
        raise _Invalid("it is empty")
    shorthand = _SHORTHANDS.get(p.lower())
    if shorthand is not None:
        _apply_shorthand(shorthand, c)
    else:
        cur = _Cursor(p)
        _parse_weekdays(cur, c)
        if _parse_date(cur, c) == 0:
            _parse_time(cur, c)
        if cur.peek() != "":
            raise _Invalid(f"unexpected {cur.text[cur.pos :]!r}")
    return _normalize(c)


def _zone_suffix(p: str, abbreviations: tuple[str, str] | None, c: _Spec) -> str:
    """Reads the zone at the end of `p` (``UTC``, one of the job's zone's abbreviations, or
    a zone's name) into `c`: `p` without it."""
    forced = _forced(p, abbreviations)
    if p.lower().endswith(" utc"):
        c.utc = True
        return p[:-4]
    if forced is not None:
        c.dst, c.dst_name = forced
        return p[: -len(c.dst_name) - 1]
    last_space = p.rfind(" ")
    if last_space >= 0 and _zone_is_valid(p[last_space + 1 :]):
        c.timezone = p[last_space + 1 :]
        return p[:last_space]
    return p


def _apply_shorthand(shorthand: dict[str, tuple[int, ...]], c: _Spec) -> None:
    for key, values in shorthand.items():
        if key == "weekdays":
            c.weekdays = values[0]
        else:
            setattr(c, key, [[v, -1, 0] for v in values])


_SHORTHANDS: dict[str, dict[str, tuple[int, ...]]] = {}
_SHORTHANDS["minutely"] = {"microsecond": (0,)}
_SHORTHANDS["hourly"] = {"minute": (0,), "microsecond": (0,)}
_SHORTHANDS["daily"] = {"hour": (0,), "minute": (0,), "microsecond": (0,)}
_SHORTHANDS["monthly"] = {"day": (1,), **_SHORTHANDS["daily"]}
for _name in ("annually", "yearly", "anually"):
    _SHORTHANDS[_name] = {"month": (1,), "day": (1,), **_SHORTHANDS["daily"]}
_SHORTHANDS["weekly"] = {"weekdays": (1,), **_SHORTHANDS["daily"]}
_SHORTHANDS["quarterly"] = {"month": (1, 4, 7, 10), "day": (1,), **_SHORTHANDS["daily"]}
for _name in ("biannually", "bi-annually", "semiannually", "semi-annually"):
    _SHORTHANDS[_name] = {"month": (1, 7), "day": (1,), **_SHORTHANDS["daily"]}


def _parse_weekdays(cur: _Cursor, c: _Spec) -> None:
    last = -1  # the start of a range being read, else -1
    first = True
    while True:
        nr = _weekday_name(cur)
        if nr is None:
            if first:
                return
            raise _Invalid("a weekday is missing after a separator")
        c.weekdays |= _weekday_bits(last, nr)
        next_last = _weekday_separator(cur, last, nr)
        if next_last is None:
            return
        last = next_last
        first = False


def _weekday_name(cur: _Cursor) -> int | None:
    """The number of the weekday named at the cursor (read), or None when none is."""
    rest = cur.text[cur.pos :].lower()
    for name, nr in _DAYS:
        if rest.startswith(name):
            if cur.peek(len(name)) not in ("", "-", ".", ",", " "):
                raise _Invalid(f"unknown weekday in {cur.text[cur.pos :]!r}")
            cur.pos += len(name)
            return nr
    return None


def _weekday_bits(last: int, nr: int) -> int:
    """The bits of weekday `nr`, or of the range from `last` (when >= 0) to it."""
    if last < 0:
        return 1 << nr
    if last > nr:
        raise _Invalid("a range of weekdays runs backwards")
    return sum(1 << j for j in range(last, nr + 1))


def _weekday_separator(cur: _Cursor, last: int, nr: int) -> int | None:
    """Reads what follows weekday `nr`: the start of the range it opens (or -1 after a
    comma); None at the end of the weekdays."""
    ch = cur.peek()
    if ch in ("", " "):
        cur.skip_spaces()
        return None
    if ch == ".":
        if last >= 0 or cur.peek(1) != ".":
            raise _Invalid("a weekday range needs '..' and one end")
        last, cur.pos = nr, cur.pos + 2
    elif ch == "-":
        if last >= 0:
            raise _Invalid("a weekday range has one end")
        last, cur.pos = nr, cur.pos + 1
    else:  # ","
        last, cur.pos = -1, cur.pos + 1
    if cur.peek() in ("", " "):
        cur.skip_spaces()
        if last >= 0:
            raise _Invalid("a weekday range is open")
        return None
    return last


def _fraction(cur: _Cursor) -> int:
    """systemd's ``parse_fractional_part_u(…, 6, …)``: six digits, rounded on the seventh."""
    value = 0
    i = 0
    while i < 6:
        ch = cur.peek()
        if not ("0" <= ch <= "9"):
            if i == 0:
                raise _Invalid("a decimal point needs digits after it")
            value *= 10 ** (6 - i)
            break
        value = value * 10 + int(ch)
        cur.pos += 1
        i += 1
    if "5" <= cur.peek() <= "9":
        value += 1
    match = _DIGITS.match(cur.text, cur.pos)
    if match:
        cur.pos = match.end()
    return value


def _decimal(cur: _Cursor, usec: bool) -> int:
    match = _DIGITS.match(cur.text, cur.pos)
    if match is None:
        raise _Invalid(f"a number is expected at {cur.text[cur.pos :]!r}")
    value = int(match.group())
    if value > 2**64 - 1:
        raise _Invalid(f"{match.group()} is out of range")
    cur.pos = match.end()
    if usec:
        if value * USEC_PER_SEC > 2**64 - 1:
            raise _Invalid(f"{match.group()} is out of range")
        value *= USEC_PER_SEC
        if cur.peek() == "." and cur.peek(1) != ".":
            cur.pos += 1
            value += _fraction(cur)
    if value > _INT_MAX:
        raise _Invalid(f"{match.group()} is out of range")
    return value


def _parse_chain(cur: _Cursor, usec: bool) -> list[list[int]] | None:
    if cur.peek() == "*":
        cur.pos += 1
        return [[0, -1, USEC_PER_SEC]] if usec else None
    chain: list[list[int]] = []
    for nesting in range(_COMPONENTS_MAX + 2):
        if nesting > _COMPONENTS_MAX:
            raise _Invalid("a list is too long")
        chain.append(_parse_component(cur, usec))
        if cur.peek() != ",":
            break
        cur.pos += 1
    return chain


def _parse_component(cur: _Cursor, usec: bool) -> list[int]:
    """One element of a list: [start, stop (-1: none), repeat (0: none)]."""
    start = _decimal(cur, usec)
    stop, repeat = _range_stop(cur, usec)
    if cur.peek() == "/":
        cur.pos += 1
        repeat = _decimal(cur, usec)
        if repeat == 0:
            raise _Invalid("a repetition of 0")
    else:
        if start > _INT_MAX - repeat:
            raise _Invalid("a value is out of range")
        if usec and stop >= 0 and start + repeat > stop:
            raise _Invalid("a range of seconds shorter than a second needs a repetition")
    if cur.peek() not in ("", " ", ",", "-", "~", ":"):
        raise _Invalid(f"unexpected {cur.text[cur.pos :]!r}")
    return [start, stop, repeat]


def _range_stop(cur: _Cursor, usec: bool) -> tuple[int, int]:
    """Reads ``..STOP`` when it follows: the stop (-1: none) and the range's repetition (its
    every value; 0: none)."""
    if cur.peek() != "." or cur.peek(1) != ".":
        return -1, 0
    cur.pos += 2
    return _decimal(cur, usec), USEC_PER_SEC if usec else 1


def _parse_date(cur: _Cursor, c: _Spec) -> int:
    if cur.peek() == "":
        return 0
    if cur.peek() == "@":
        _parse_epoch(cur, c)
        return 1
    start = cur.pos
    first = _parse_chain(cur, False)
    if cur.peek() in ("", ":"):
        cur.pos = start  # it was a time, not a date: read again as one
        return 0
    _date_separator(cur, c)
    second = _parse_chain(cur, False)
    if cur.peek() in ("", " "):
        cur.skip_spaces()
        c.month, c.day = first, second
        return 0
    if c.end_of_month:
        raise _Invalid("'~' comes between month and day")
    _date_separator(cur, c)
    third = _parse_chain(cur, False)
    if cur.peek() not in ("", " "):
        raise _Invalid(f"unexpected {cur.text[cur.pos :]!r}")
    cur.skip_spaces()
    c.year, c.month, c.day = first, second, third
    return 0


def _date_separator(cur: _Cursor, c: _Spec) -> None:
    """Reads ``-``, or ``~`` (the day counts from the month's end)."""
    if cur.peek() == "~":
        c.end_of_month = True
    elif cur.peek() != "-":
        raise _Invalid(f"unexpected {cur.text[cur.pos :]!r}")
    cur.pos += 1


def _parse_epoch(cur: _Cursor, c: _Spec) -> None:
    """``@SECONDS``, read as systemd reads it (strtoul: leading white space and a sign are
    allowed)."""
    match = _EPOCH.match(cur.text, cur.pos + 1)
    if match is None:
        raise _Invalid("@ needs seconds since the epoch")
    cur.pos = match.end()
    value = int(match.group(2))
    if match.group(1) == "-" and value:
        raise _Invalid("@ is before 1970")
    _from_epoch(value, c)


def _from_epoch(seconds: int, c: _Spec) -> None:
    from datetime import UTC, datetime

    if seconds > 2**63 - 1:
        raise _Invalid("@ is out of range")
    try:
        t = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise _Invalid("@ is out of range") from None
    c.utc = True
    c.year, c.month, c.day = [[t.year, -1, 0]], [[t.month, -1, 0]], [[t.day, -1, 0]]
    c.hour, c.minute = [[t.hour, -1, 0]], [[t.minute, -1, 0]]
    c.microsecond = [[t.second * USEC_PER_SEC, -1, 0]]


def _parse_time(cur: _Cursor, c: _Spec) -> None:
    if cur.peek() == "":
        c.hour, c.minute, c.microsecond = [[0, -1, 0]], [[0, -1, 0]], [[0, -1, 0]]
        return
    hour = _parse_chain(cur, False)
    if cur.peek() != ":":
        raise _Invalid("a time is HOUR:MINUTE[:SECOND]")
    cur.pos += 1
    minute = _parse_chain(cur, False)
    if cur.peek() == "":
        c.hour, c.minute, c.microsecond = hour, minute, [[0, -1, 0]]
        return
    if cur.peek() != ":":
        raise _Invalid(f"unexpected {cur.text[cur.pos :]!r}")
    cur.pos += 1
    second = _parse_chain(cur, True)
    if cur.peek() != "":
        raise _Invalid(f"unexpected {cur.text[cur.pos :]!r}")
    c.hour, c.minute, c.microsecond = hour, minute, second


def _normalize_chain(chain: list[list[int]] | None) -> Chain:
    if chain is None:
        return None
    unique = sorted({_normalize_component(*item) for item in chain})
    return tuple(Component(*item) for item in unique)


def _normalize_component(start: int, stop: int, repeat: int) -> tuple[int, int, int]:
    """A range's stop moved down to its last repetition; a repetition that cannot fire even
    once, or a range of one value, made a plain value."""
    if stop > start and repeat > 0:
        stop -= (stop - start) % repeat
        if start + repeat > stop:
            return start, -1, 0
    if start == stop:
        return start, -1, 0
    return start, stop, repeat


def _fix_year(chain: list[list[int]] | None) -> None:
    for item in chain or ():
        for i in (0, 1):
            if 0 <= item[i] < 70:
                item[i] += 2000
            elif 70 <= item[i] < 100:
                item[i] += 1900


def _chain_valid(chain: Chain, low: int, high: int, end_of_month: bool = False) -> bool:
    if chain is None:
        return True
    for c in chain:
        if end_of_month:
            # No more than 28 days back from the month's end. systemd checks the list
            # recursively and takes 3 off again at each element: so do we (``*-*~1,26`` is
            # refused, ``*-*~26`` is not).
            high -= 3
        if not _component_valid(c, low, high, end_of_month):
            return False
    return True


def _component_valid(c: Component, low: int, high: int, end_of_month: bool) -> bool:
    if c.start < low or c.start > high or c.repeat > high - low:
        return False
    if c.stop >= 0:
        return low <= c.stop <= high and c.start + c.repeat <= c.stop
    if end_of_month:
        return c.start - c.repeat >= low
    return c.start + c.repeat <= high


def _normalize(c: _Spec) -> CalendarSpec:
    if c.timezone == "UTC":
        c.utc, c.timezone = True, None
    weekdays = c.weekdays if 0 < c.weekdays < _BITS_WEEKDAYS else -1
    end_of_month = c.end_of_month and c.day is not None
    _fix_year(c.year)
    spec = CalendarSpec(
        weekdays=weekdays,
        year=_normalize_chain(c.year),
        month=_normalize_chain(c.month),
        day=_normalize_chain(c.day),
        hour=_normalize_chain(c.hour),
        minute=_normalize_chain(c.minute),
        microsecond=_normalize_chain(c.microsecond),
        end_of_month=end_of_month,
        utc=c.utc,
        timezone=c.timezone,
        dst=c.dst,
        dst_name=c.dst_name,
    )
    if not (
        _chain_valid(spec.year, _MIN_YEAR, _MAX_YEAR)
        and _chain_valid(spec.month, 1, 12)
        and _chain_valid(spec.day, 1, 31, end_of_month)
        and _chain_valid(spec.hour, 0, 23)
        and _chain_valid(spec.minute, 0, 59)
        and _chain_valid(spec.microsecond, 0, 60 * USEC_PER_SEC - 1)
    ):
        raise _Invalid("a value is out of range")
    return spec
