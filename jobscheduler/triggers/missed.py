"""`missed_slots`: the slots of a schedule that fell in a stretch of time nobody ran.

A node starting after downtime records, per job, the slots after the job's mark (the last
slot handled, kept in the state store) and before now as one ``missed`` record; ``catch_up``
uses the same range to choose what to make up. Pure: it asks the trigger only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .base import Trigger

__all__ = ["MISSED_LIMIT", "MissedRange", "missed_slots"]

MISSED_LIMIT = 100_000
"""How many slots `missed_slots` steps through at most (an every-second job down for a day
has 86,400)."""


@dataclass(frozen=True)
class MissedRange:
    """The slots of a trigger in an open interval: the `first`, the `last`, their `count`.

    `complete` is False when there were more than the limit asked for: `last` and `count`
    are then those of the first `limit` slots only, and `count` is a lower bound."""

    first: datetime
    last: datetime
    count: int
    complete: bool = True

    def describe(self) -> str:
        """``"3 slots missed"``, ``"1 slot missed"``, ``"at least 100000 slots missed"``."""
        plural = "" if self.count == 1 else "s"
        prefix = "" if self.complete else "at least "
        return f"{prefix}{self.count} slot{plural} missed"


def missed_slots(
    trigger: Trigger, after: datetime, before: datetime, limit: int = MISSED_LIMIT
) -> MissedRange | None:
    """The slots of `trigger` strictly after `after` and strictly before `before` (aware
    instants), or None when there are none (also when `before` is not after `after`).

    Stepped with `next_after`, at most `limit` slots (≥ 1): O(count). A schedule past its end
    has no slots; a `before` equal to a slot leaves that slot out (it is due now, not
    missed).
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    first = trigger.next_after(after)
    if first is None or first >= before:
        return None
    last, count = first, 1
    while True:
        following = trigger.next_after(last)
        if following is None or following >= before:
            return MissedRange(first, last, count)
        if count >= limit:
            return MissedRange(first, last, count, complete=False)
        last, count = following, count + 1
