"""Finding the next elapse of a parsed `CalendarSpec`, exactly as systemd 252 does.

This is systemd's own search (``find_next`` in ``src/shared/calendarspec.c``) step for step:
it walks a broken-down local time (year, month, day, hour, minute, second and microseconds)
forward field by field, and after each step lets ``mktime`` normalise it. Its results on DST
days come from how glibc's ``mktime`` reads a wall time with ``tm_isdst = -1``, so that is
reproduced too (`_LocalTime.mktime`):

- a wall time in a spring-forward gap is read with the offset before the gap, which moves it
  past the gap (02:30 in Berlin's gap → 03:30); the search goes on from there, so a slot
  inside the gap is skipped (``*-*-* 02:30`` does not run that day; ``*:0/15`` runs at 03:00);
- a wall time in the repeated hour of a fall-back is read with the offset glibc used last
  (the search carries it along, starting from the offset at the base time): after the first
  occurrence of the hour the search stays on it, so the repeated hour is not run twice.

Where systemd, asked from inside the second occurrence of a repeated hour, would answer with
an instant of the first occurrence (before the base time), the search goes on to the first
answer after it: a trigger's next slot is always strictly after `t`.

The search gives up after 1,000 steps (systemd's safety valve) and at the end of 2199.
Times are integers: seconds since the epoch and microseconds.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, tzinfo

from .calendar_spec import USEC_PER_SEC, CalendarSpec, Chain

__all__ = ["next_elapse"]

_MAX_YEAR = 2199
_MAX_ITERATIONS = 1000
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_DAY = 86400
_ZERO = timedelta(0)
_LOWEST = (1970, 1, 1, 0, 0, 0)  # each field's lowest value (the year's is never used)

# Per (zone, day ordinal): the zone's UTC offset in seconds and whether it is summer time
# (1, else 0), when they are the same all that day; else None (a transition falls in it).
# Only such days need the slow reading of wall times.
_DAY_OFFSETS: dict[tuple[tzinfo, int], tuple[int, int] | None] = {}
_MONTH_ORDINALS: dict[int, int] = {}


def _month_ordinal(year: int, month: int) -> int:
    """The ordinal of the first day of `month` (1-12) of `year`."""
    key = year * 12 + month
    ordinal = _MONTH_ORDINALS.get(key)
    if ordinal is None:
        ordinal = _MONTH_ORDINALS[key] = date(year, month, 1).toordinal()
    return ordinal


def _offset(zone: tzinfo, wall: datetime, fold: int) -> int:
    offset = zone.utcoffset(wall.replace(fold=fold))
    return int((offset or _ZERO).total_seconds())


def _isdst(zone: tzinfo, wall: datetime, fold: int = 0) -> int:
    return 1 if zone.dst(wall.replace(fold=fold)) else 0


def _day_offset(zone: tzinfo, ordinal: int) -> tuple[int, int] | None:
    key = (zone, ordinal)
    try:
        return _DAY_OFFSETS[key]
    except KeyError:
        pass
    if len(_DAY_OFFSETS) > 200_000:
        _DAY_OFFSETS.clear()
    day = datetime.fromordinal(ordinal)
    first, last = day, day.replace(hour=23, minute=59, second=59)
    offsets = {(_offset(zone, w, f), _isdst(zone, w, f)) for w in (first, last) for f in (0, 1)}
    result = offsets.pop() if len(offsets) == 1 else None
    _DAY_OFFSETS[key] = result
    return result


class _LocalTime:
    """``mktime``/``localtime`` of one zone (``timegm``/``gmtime`` for UTC), with glibc's
    memory of the last offset it used (see the module notes)."""

    __slots__ = ("last_offset", "utc", "zone")

    def __init__(self, zone: tzinfo | None, last_offset: int) -> None:
        self.zone = zone  # None: UTC
        self.utc = zone is None
        self.last_offset = last_offset

    def localtime(self, seconds: int) -> list[int]:
        if self.zone is None:
            t = datetime.fromtimestamp(seconds, UTC)
        else:
            t = datetime.fromtimestamp(seconds, self.zone)
        return [t.year, t.month, t.day, t.hour, t.minute, t.second]

    def settled(self, tm: list[int]) -> int:
        """The ordinal of `tm`'s day when mktime would leave `tm` as it is (every field in
        its range, no DST change that day), having done what such
        a mktime does besides (remember the day's offset); else 0. The cheap test that most
        of the search's calls pass."""
        year, month, day, hour, minute, second, isdst = tm
        if not (
            isdst == -1
            and 1 <= month <= 12
            and 1 <= day <= 31
            and 0 <= hour < 24
            and 0 <= minute < 60
            and 0 <= second < 60
            and 1970 <= year <= _MAX_YEAR
        ):
            return 0
        first = _month_ordinal(year, month)
        if day > 28 and day > _month_ordinal(year + month // 12, month % 12 + 1) - first:
            return 0  # past the month's end: mktime moves it
        ordinal = first + day - 1
        if self.zone is not None:
            known = _day_offset(self.zone, ordinal)
            if known is None:
                return 0
            self.last_offset = known[0]
        return ordinal

    def mktime(self, tm: list[int]) -> int | None:
        """The instant (epoch seconds) of the wall time `tm` ([year, month 1-12, day, hour,
        minute, second, isdst], any of them out of range), normalised in place as mktime
        does; None when out of the range of dates. `isdst` -1 reads the wall time as glibc
        does (module notes); 0 or 1 reads it in standard or summer time whatever the date
        (as glibc does: systemd's search hands mktime such a flag after a normalisation,
        which is how it can loop until its safety valve)."""
        year, month, day, hour, minute, second, isdst = tm
        year += (month - 1) // 12
        month = (month - 1) % 12 + 1
        days, seconds = divmod((((day - 1) * 24 + hour) * 60 + minute) * 60 + second, _DAY)
        try:
            ordinal = _month_ordinal(year, month) + days
            if not 0 < ordinal <= 3_652_059:
                return None
            local = (ordinal - _EPOCH_ORDINAL) * _DAY + seconds
            zone = self.zone
            if zone is None:
                instant = local
                tm[6] = 0
            else:
                known = _day_offset(zone, ordinal)
                if known is None or (isdst != -1 and isdst != known[1]):
                    return self._slow(tm, ordinal, seconds, local, isdst)
                self.last_offset = known[0]
                instant = local - known[0]
                tm[6] = known[1]
        except (OverflowError, ValueError):
            return None
        if not (
            1 <= tm[1] <= 12
            and 1 <= day <= 28
            and 0 <= hour < 24
            and 0 <= minute < 60
            and 0 <= second < 60
        ):  # some field out of its range (or a day past the 28th): write the normalised time
            d = date.fromordinal(ordinal)
            h, rest = divmod(seconds, 3600)
            tm[:6] = [d.year, d.month, d.day, h, rest // 60, rest % 60]
        return instant

    def _slow(self, tm: list[int], ordinal: int, seconds: int, local: int, isdst: int) -> int:
        """`mktime` on a day with a DST change, or with a summer/standard flag."""
        zone = self.zone
        assert zone is not None
        h, rest = divmod(seconds, 3600)
        wall = datetime.fromordinal(ordinal).replace(hour=h, minute=rest // 60, second=rest % 60)
        wall = wall.replace(tzinfo=zone)
        first, second = _offset(zone, wall, 0), _offset(zone, wall, 1)
        offset = _flagged_offset(zone, wall, first, second, isdst) if isdst != -1 else None
        if offset is None:
            offset = self._wall_offset(first, second)
        instant = local - offset
        t = datetime.fromtimestamp(instant, zone)
        self.last_offset = int((t.utcoffset() or _ZERO).total_seconds())
        tm[:] = [t.year, t.month, t.day, t.hour, t.minute, t.second, 1 if t.dst() else 0]
        return instant

    def _wall_offset(self, first: int, second: int) -> int:
        """The offset glibc reads a wall time with whose offsets are `first` and `second`
        (the same but in a repeated hour or a gap)."""
        if first <= second:  # one offset, or in a gap: the offset before it
            return first
        last = self.last_offset  # repeated: the occurrence of the offset used last, or nearest
        if last in (first, second):
            return last
        return first if abs(first - last) < abs(second - last) else second


def _flagged_offset(
    zone: tzinfo, wall: datetime, first: int, second: int, isdst: int
) -> int | None:
    """The offset of the kind of time `isdst` (1 summer, 0 standard) of the wall time, or
    else of that kind nearest the date, as glibc looks for it; None when the zone has none."""
    for offset, fold in ((first, 0), (second, 1)):
        if _isdst(zone, wall, fold) == isdst:
            return offset
    for days in range(30, 400, 30):
        for sign in (-1, 1):
            near = wall + timedelta(days=sign * days)
            if _isdst(zone, near) == isdst:
                return _offset(zone, near, 0)
    return None


def _match(
    spec: CalendarSpec, chain: Chain, tm: list[int], val: int, local: _LocalTime, eom: bool
) -> tuple[int, int]:
    """systemd's ``find_matching_component``: (1, new value) when `val` had to move to the
    earliest match ≥ it, (0, val) when it matches, (-1, val) when nothing matches."""
    if chain is None:
        return 0, val
    best: int | None = None
    for c in chain:
        start, stop = c.start, c.stop
        if eom:  # counted back from the month's end: the range runs the other way
            start = _end_of_month(tm, local, start)
            stop = _end_of_month(tm, local, stop)
            if stop > 0:
                start, stop = stop, start
        found = _first_match(start, stop, c.repeat, val)
        if found is not None and (best is None or found < best):
            best = found
    if best is None:
        return -1, val
    return (1 if best != val else 0), best


def _first_match(start: int, stop: int, repeat: int, val: int) -> int | None:
    """The first value ≥ `val` of one component (`stop` < 0: none), None when none is."""
    if start >= val:
        return start
    if repeat > 0:
        k = start + repeat * -((start - val) // repeat)
        if stop < 0 or k <= stop:
            return k
    return None


def _end_of_month(tm: list[int], local: _LocalTime, day: int) -> int:
    """systemd's ``find_end_of_month``: the day `day` - 1 days before `tm`'s month's last
    (mktime of day ``1 - day`` of the next month), or -1 when that is in another month."""
    found = _settled_end_of_month(tm, local, day)
    if found is not None:
        return found
    t = list(tm)
    t[1] += 1
    t[2] = 1 - day
    if local.mktime(t) is None or t[1] != tm[1]:
        return -1
    return t[2]


def _settled_end_of_month(tm: list[int], local: _LocalTime, day: int) -> int | None:
    """`_end_of_month` without mktime, when `tm` is in range and the day found has no DST
    change (having done what that mktime does besides); else None."""
    if not (
        tm[6] == -1 and 1 <= tm[1] <= 12 and 0 <= tm[3] < 24 and 0 <= tm[4] < 60 and 0 <= tm[5] < 60
    ):
        return None
    year, month0 = divmod(tm[0] * 12 + tm[1], 12)  # the next month
    ordinal = _month_ordinal(year, month0 + 1) - day  # its day 1 - `day`
    if local.zone is not None:
        known = _day_offset(local.zone, ordinal)
        if known is None:
            return None
        local.last_offset = known[0]  # what that mktime would remember
    found = date.fromordinal(ordinal)
    return found.day if found.month == tm[1] else -1


def _within_bounds(tm: list[int], local: _LocalTime) -> int:
    """systemd's ``tm_within_bounds``: 1 when `tm` is a real time as it is; 0 when mktime
    moved it forward (`tm` is then the moved time); < 0 when out of range or moved back."""
    if tm[0] > _MAX_YEAR:
        return -1
    if local.settled(tm):
        return 1
    t = list(tm)
    if local.mktime(t) is None:
        return -1
    if t[:6] == tm[:6]:
        return 1
    if not _moved_forward(t, tm):
        return -2
    tm[:] = t
    return 0


def _moved_forward(t: list[int], tm: list[int]) -> bool:
    """Whether mktime moved `tm` forward to `t`, by the first field that changed; the field
    after it starts again from its lowest value in `t`."""
    for i in range(5):
        if t[i] != tm[i]:
            t[i + 1] = _LOWEST[i + 1]
            return t[i] > tm[i]
    return t[5] > tm[5]


def _weekday_matches(bits: int, tm: list[int], local: _LocalTime) -> bool:
    if bits < 0:
        return True
    ordinal = local.settled(tm)
    if ordinal:
        return bool(bits & (1 << (ordinal - 1) % 7))  # ordinal 1 was a Monday
    t = list(tm)
    if local.mktime(t) is None:
        return False
    return bool(bits & (1 << date(t[0], t[1], t[2]).weekday()))


class _Search:
    """systemd's ``find_next`` from the wall time `c` + `usec`, field by field: each field
    moves to its next match; a field with none left carries into the field above it, and the
    search starts again from the new time. A field that moves resets the fields below it."""

    __slots__ = ("c", "local", "spec", "steps", "usec")

    def __init__(self, spec: CalendarSpec, c: list[int], usec: int, local: _LocalTime) -> None:
        self.spec, self.c, self.usec, self.local = spec, c, usec, local
        self.steps = (
            self.month,
            self.day,
            self.weekday,
            self.hour,
            self.minute,
            self.microsecond,
        )

    def find(self) -> int | None:
        """The next elapse's wall time is left in `c`, its microseconds returned; None: none
        (or the safety valve)."""
        c, local = self.c, self.local
        for _ in range(_MAX_ITERATIONS):
            if not local.settled(c):
                local.mktime(c)
            c[6] = self.spec.dst  # -1, or standard/summer time forced by the zone's abbreviation
            if not self.year():
                return None
            if all(step() for step in self.steps):
                return self.usec
        return None

    def _reset_below(self, i: int) -> None:
        self.c[i + 1 : 6] = _LOWEST[i + 1 : 6]
        self.usec = 0

    def _carry(self, i: int) -> bool:
        """Field `i` has no match left: the next value of the field above it. False: the
        search starts again."""
        self.c[i - 1] += 1
        self._reset_below(i - 1)
        return False

    def _field(self, i: int, chain: Chain, eom: bool = False) -> bool:
        """Field `i` moved to its next match; True when the time is then real as it is (go on
        to the next field), False when the search starts again from the new time."""
        c = self.c
        r, c[i] = _match(self.spec, chain, c, c[i], self.local, eom)
        if r > 0:
            self._reset_below(i)
        return self._settle(r, i)

    def _settle(self, r: int, i: int) -> bool:
        if r < 0 or (r := _within_bounds(self.c, self.local)) < 0:
            return self._carry(i)
        return r != 0  # 0: mktime moved the time (say, out of a DST gap): again from there

    def year(self) -> bool:
        """False: no year is left (the search is over)."""
        c = self.c
        r, c[0] = _match(self.spec, self.spec.year, c, c[0], self.local, False)
        if r > 0:
            self._reset_below(0)
        return r >= 0 and _within_bounds(c, self.local) > 0

    def month(self) -> bool:
        return self._field(1, self.spec.month)

    def day(self) -> bool:
        return self._field(2, self.spec.day, self.spec.end_of_month)

    def weekday(self) -> bool:
        return _weekday_matches(self.spec.weekdays, self.c, self.local) or self._carry(3)

    def hour(self) -> bool:
        return self._field(3, self.spec.hour)

    def minute(self) -> bool:
        return self._field(4, self.spec.minute)

    def microsecond(self) -> bool:
        c = self.c
        value = c[5] * USEC_PER_SEC + self.usec
        r, value = _match(self.spec, self.spec.microsecond, c, value, self.local, False)
        c[5], self.usec = divmod(value, USEC_PER_SEC)
        return self._settle(r, 5)


def next_elapse(spec: CalendarSpec, zone: tzinfo, after_usec: int) -> int | None:
    """The first elapse of `spec` strictly after `after_usec` (µs since the epoch), in µs
    since the epoch; None when there is none (before the end of 2199).

    `zone` is the job's zone; a zone written in the expression wins, and ``UTC`` in it
    makes the search run in UTC."""
    search_zone = _search_zone(spec, zone)
    base = after_usec
    for _ in range(8):  # more than the repeated hours of any zone's history need
        usec = base + 1
        seconds, fraction = divmod(usec, USEC_PER_SEC)
        try:
            start = datetime.fromtimestamp(seconds, search_zone or UTC)
        except (OverflowError, OSError, ValueError):
            return None
        offset = int((start.utcoffset() or _ZERO).total_seconds())
        local = _LocalTime(search_zone, offset)
        c = [start.year, start.month, start.day, start.hour, start.minute, start.second]
        c.append(1 if start.dst() else 0)  # localtime's flag, which the first mktime gets
        found = _Search(spec, c, fraction, local).find()
        if found is None:
            return None
        instant = local.mktime(c)
        if instant is None:
            return None
        result = instant * USEC_PER_SEC + found
        if result > after_usec:
            return result
        base = result  # an answer before the base time (see the module notes): go on
    return None


def _search_zone(spec: CalendarSpec, zone: tzinfo) -> tzinfo | None:
    """The zone the search runs in: the expression's, else the job's; None for UTC."""
    if spec.utc:
        return None
    if spec.timezone is not None:
        from .zones import resolve_zone

        zone = resolve_zone(spec.timezone)
    return None if zone is UTC else zone
