"""`LayeredMap`: an immutable, insertion-ordered mapping with cheap derived copies.

A catalog of 100,000 jobs must take one more job in microseconds, yet stay an immutable
value. A derived map shares a frozen base dict and copies only a small overlay of changes
(additions, replacements, tombstones); when the overlay outgrows about the square root of the
base, the next derivation folds it into a new base. A change therefore costs O(√n) amortized
instead of the O(n) of copying a dict, and lookups stay O(1).

Order is a dict's: a replaced key keeps its place, a new key goes to the end. A key removed
and then added again goes to the end too (the overlay is folded first to get that right).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from math import isqrt
from typing import Any, Generic, TypeVar

__all__ = ["LayeredMap"]

K = TypeVar("K")
V = TypeVar("V")

_GONE: Any = object()


class LayeredMap(Mapping[K, V], Generic[K, V]):
    __slots__ = ("_base", "_len", "_over")

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        self._base: dict[K, V] = dict(items)
        self._over: dict[K, V] = {}
        self._len = len(self._base)

    @classmethod
    def _make(cls, base: dict[K, V], over: dict[K, V], length: int) -> LayeredMap[K, V]:
        new = cls.__new__(cls)
        new._base, new._over, new._len = base, over, length
        return new

    # -- reading ---------------------------------------------------------------------------

    def __getitem__(self, key: K) -> V:
        over = self._over
        if key in over:
            value = over[key]
            if value is _GONE:
                raise KeyError(key)
            return value
        return self._base[key]

    def __contains__(self, key: object) -> bool:
        over = self._over
        if key in over:
            return over[key] is not _GONE
        return key in self._base

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        over = self._over
        if not over:
            yield from self._base
            return
        base = self._base
        for key in base:
            if over.get(key, None) is not _GONE:
                yield key
        for key, value in over.items():
            if value is not _GONE and key not in base:
                yield key

    def __repr__(self) -> str:
        return f"LayeredMap({dict(self.items())!r})"

    # -- deriving ----------------------------------------------------------------------------

    def _fold(self) -> dict[K, V]:
        """The overlay applied to a copy of the base: a plain dict of the current contents."""
        base = dict(self._base)  # a C-level copy: ~10 ns per entry
        for key, value in self._over.items():
            if value is _GONE:
                del base[key]
            else:
                base[key] = value
        return base

    def _folded(self) -> tuple[dict[K, V], dict[K, V]]:
        """(base, overlay copy) to derive from: the overlay folded in when it has grown."""
        if len(self._over) > 32 + 2 * isqrt(len(self._base)):
            return self._fold(), {}
        return self._base, dict(self._over)

    def set_many(self, items: Iterable[tuple[K, V]]) -> LayeredMap[K, V]:
        """A map with `items` added or replaced."""
        items = list(items)
        base, over = self._folded()
        if any(over.get(key, None) is _GONE for key, _ in items):
            base, over = self._fold(), {}  # removed, then added again: it goes to the end
        length = self._len
        for key, value in items:
            present = over[key] is not _GONE if key in over else key in base
            if not present:
                length += 1
            over[key] = value
        return self._make(base, over, length)

    def set(self, key: K, value: V) -> LayeredMap[K, V]:
        return self.set_many([(key, value)])

    def delete(self, key: K) -> LayeredMap[K, V]:
        """A map without `key` (KeyError if absent)."""
        if key not in self:
            raise KeyError(key)
        base, over = self._folded()
        if key in base:
            over[key] = _GONE
        else:
            del over[key]
        return self._make(base, over, self._len - 1)
