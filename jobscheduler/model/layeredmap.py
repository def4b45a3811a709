"""`LayeredMap`: an immutable, insertion-ordered mapping whose changed copies cost O(1).

A catalog of 100,000 jobs must take one more job in about a microsecond, yet stay an immutable
value that other threads may hold and read. The maps derived from one another share a
*family*: a frozen base dict, an overlay dict holding the changes as of the family's newest
map, and an undo log (for each change, the key and the overlay's value before it). A map is
its family and its position in the log:

- deriving from the newest map appends to the log and writes the overlay in place: O(1);
- the newest map reads the overlay, then the base: O(1);
- an older map reads the overlay and undoes the changes logged after its position. When
  that tail is long it copies the overlay once, undoes the tail on the copy, and keeps the
  result as a family of its own (O(overlay)); deriving from an older map does the same;
- when the overlay outgrows a quarter of the base, the next change folds it into a new base
  and starts a new family: O(n) every O(n) changes.

A change logs before it writes, and a reader checks the log after it reads, so a reader never
sees a change made after its map, even while another thread derives from the same map.
Derivations from one family are serialized by the family's lock.

Order is a dict's: a replaced key keeps its place, a new key goes to the end. A key removed
and then added again goes to the end too (the overlay is folded first to get that right).
"""

from __future__ import annotations

from _thread import allocate_lock
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar, overload

__all__ = ["LayeredMap"]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

_GONE: Any = object()  # in the overlay: the key was removed
_ABSENT: Any = object()  # in the undo log: the overlay did not have the key
_SHORT_TAIL = 32  # an older map scans a tail up to this long; past it, it takes its own copy


class _Family(Generic[K, V]):
    """What maps derived from one another share. Only the lock holder appends."""

    __slots__ = ("base", "keys", "lock", "olds", "over")

    def __init__(self, base: dict[K, V], over: dict[K, V] | None = None) -> None:
        self.base = base  # never changed
        self.over: dict[K, V] = {} if over is None else over  # as of the newest map
        self.olds: list[Any] = []  # undo log: the overlay's value before each change...
        self.keys: list[K] = []  # ...and its key (appended after the value, read before)
        self.lock = allocate_lock()  # threading's Lock, without importing threading

    def overlay_at(self, n: int) -> dict[K, V]:
        """A copy of the overlay as it was after the first `n` changes."""
        over = dict(self.over)  # copied first: every change it shows is logged by now
        keys, olds = self.keys, self.olds
        for i in range(len(keys) - 1, n - 1, -1):  # newest first: ends at the value at n
            key, old = keys[i], olds[i]
            if old is _ABSENT:
                over.pop(key, None)
            else:
                over[key] = old
        return over

    def folded(self, over: dict[K, V]) -> dict[K, V]:
        """The base with `over` applied: a plain dict of the contents."""
        base = dict(self.base)  # a C-level copy: ~10 ns per entry
        for key, value in over.items():
            if value is _GONE:
                base.pop(key, None)
            else:
                base[key] = value
        return base


class LayeredMap(Mapping[K, V], Generic[K, V]):
    __slots__ = ("_len", "_state")

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        base: dict[K, V] = dict(items)
        self._state: tuple[_Family[K, V], int] = (_Family(base), 0)
        self._len = len(base)

    @classmethod
    def _make(cls, family: _Family[K, V], n: int, length: int) -> LayeredMap[K, V]:
        new = cls.__new__(cls)
        new._state, new._len = (family, n), length
        return new

    # -- reading ---------------------------------------------------------------------------

    # Each read first tries the newest map's way (the overlay, then the base), and checks
    # that no change was logged meanwhile; an older map takes `_older`.

    def __getitem__(self, key: K) -> V:
        family, n = self._state
        keys = family.keys
        value = family.over.get(key, _ABSENT)
        if len(keys) != n:  # changed before or while reading: an older map's way
            value = self._older(key)
        if value is _ABSENT:
            return family.base[key]
        if value is _GONE:
            raise KeyError(key)
        result: V = value
        return result

    @overload
    def get(self, key: K, /) -> V | None: ...

    @overload
    def get(self, key: K, /, default: V | T) -> V | T: ...

    def get(self, key: K, /, default: Any = None) -> Any:
        family, n = self._state
        keys = family.keys
        value = family.over.get(key, _ABSENT)
        if len(keys) != n:  # changed before or while reading: an older map's way
            value = self._older(key)
        if value is _ABSENT:
            return family.base.get(key, default)
        return default if value is _GONE else value

    def __contains__(self, key: object) -> bool:
        family, n = self._state
        keys = family.keys
        value = family.over.get(key, _ABSENT)  # type: ignore[arg-type]
        if len(keys) != n:  # changed before or while reading: an older map's way
            value = self._older(key)
        if value is _ABSENT:
            return key in family.base
        return value is not _GONE

    def _older(self, key: Any) -> Any:
        """The key's overlay value for this map, an older one: a value, `_GONE`, or `_ABSENT`
        (then the base has it, or nothing does)."""
        family, n = self._state
        if len(family.keys) - n > _SHORT_TAIL:
            family, n = self._own_family(), 0
        value = family.over.get(key, _ABSENT)  # read first: any change it shows is logged
        keys = family.keys
        for i in range(n, len(keys)):  # the first change after n logged the value at n
            if keys[i] == key:
                return family.olds[i]
        return value

    def _own_family(self) -> _Family[K, V]:
        """This map's contents in a new family of its own, where it is at position 0."""
        family, n = self._state
        own: _Family[K, V] = _Family(family.base, family.overlay_at(n))
        self._state = (own, 0)
        return own

    def __len__(self) -> int:
        return self._len

    def _snapshot(self) -> tuple[dict[K, V], dict[K, V]]:
        """(base, a copy of the overlay) as of this map."""
        family, n = self._state
        return family.base, family.overlay_at(n)

    def __iter__(self) -> Iterator[K]:
        base, over = self._snapshot()
        if not over:
            yield from base
            return
        for key in base:
            if over.get(key, None) is not _GONE:
                yield key
        for key, value in over.items():
            if value is not _GONE and key not in base:
                yield key

    def __repr__(self) -> str:
        return f"LayeredMap({dict(self.items())!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (list(self.items()),))

    # -- deriving ----------------------------------------------------------------------------

    def set_many(self, items: Iterable[tuple[K, V]]) -> LayeredMap[K, V]:
        """A map with `items` added or replaced."""
        items = list(items)
        family, n = self._state
        with family.lock:
            if len(family.keys) != n:
                family, n = _tip(family, n)
            over = family.over
            fold = len(over) + len(items) > 64 + len(family.base) // 4
            for key, _ in items:
                if fold or over.get(key, None) is _GONE:
                    # Folded when the overlay has grown (O(n) once every O(n) changes), and
                    # when a removed key is added again: it goes to the end.
                    family, n = _Family(family.folded(family.overlay_at(n))), 0
                    over = family.over
                    break
            base, olds, keys = family.base, family.olds, family.keys
            length = self._len
            for key, value in items:
                old = over.get(key, _ABSENT)
                if old is _GONE or (old is _ABSENT and key not in base):
                    length += 1
                olds.append(old)
                keys.append(key)
                over[key] = value
            return self._make(family, n + len(items), length)

    def set(self, key: K, value: V) -> LayeredMap[K, V]:
        return self.set_many([(key, value)])

    def delete(self, key: K) -> LayeredMap[K, V]:
        """A map without `key` (KeyError if absent)."""
        if key not in self:
            raise KeyError(key)
        family, n = self._state
        with family.lock:
            family, n = _tip(family, n)
            family.olds.append(family.over.get(key, _ABSENT))
            family.keys.append(key)
            family.over[key] = _GONE
            return self._make(family, n + 1, self._len - 1)


def _tip(family: _Family[K, V], n: int) -> tuple[_Family[K, V], int]:
    """Where to derive the map at position `n` of `family` from (the family's lock held):
    that position when it is the newest, else a new family of the map's contents."""
    if len(family.keys) == n:
        return family, n
    return _Family(family.base, family.overlay_at(n)), 0
