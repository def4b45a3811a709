"""`Trigger`: the one protocol every kind of schedule implements.

A trigger answers one question, ``next_after(t)``: the first slot strictly after the instant
`t`, or None when there is none (past its end, or a schedule that never fires). It is pure:
the answer depends only on the trigger's definition and `t` — no clock, no state, no
history — so the engine, the command line's preview and the tests can ask it anything, in
any order, as often as they like.

The engine asks a job (`Job.next_after`, which hands the question to the job's schedule) and
never anything else of a trigger's kind: a new kind of trigger needs no engine change. A
trigger that can also count its slots without stepping through them (the interval trigger:
`IndexedTrigger`) lets `slots_between` answer in O(1); any other trigger is counted by
stepping, up to a bound.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

__all__ = ["IndexedTrigger", "Trigger", "bounds_utc", "slots_between"]


@runtime_checkable
class Trigger(Protocol):
    """A schedule: pure, it depends only on its definition and `t`."""

    def next_after(self, t: datetime) -> datetime | None:
        """The first slot strictly after `t` (aware), or None when there is none."""
        ...


@runtime_checkable
class IndexedTrigger(Trigger, Protocol):
    """A trigger whose slots are numbered 0, 1, 2, … and found by number in O(1)."""

    def index_after(self, t: datetime) -> int | None:
        """The number of the first slot strictly after `t`, ignoring any end; None when it
        cannot be computed (past year 9999)."""
        ...


def bounds_utc(
    kind: str, start: datetime | None, stop: datetime | None
) -> tuple[datetime | None, datetime | None]:
    """A trigger's inclusive bounds `start` and `stop` (aware instants, or None) in UTC;
    ValueError naming the trigger `kind` for a naive one."""
    if start is not None and start.tzinfo is None:
        raise ValueError(f"{kind} needs an aware start")
    if stop is not None and stop.tzinfo is None:
        raise ValueError(f"{kind} needs an aware stop")
    return (
        None if start is None else start.astimezone(UTC),
        None if stop is None else stop.astimezone(UTC),
    )


def slots_between(trigger: Trigger, after: datetime, until: datetime, limit: int = 10_000) -> int:
    """How many slots of `trigger` lie in (`after`, `until`] — for reports, such as the slots
    a late scheduler skipped.

    An `IndexedTrigger` is counted from its slot numbers in O(1) (its end is not applied:
    the count is that of the unbounded series). Any other trigger is stepped through with
    `next_after`, counting at most `limit` slots (so the answer is then a lower bound).
    """
    if isinstance(trigger, IndexedTrigger):
        first, last = trigger.index_after(after), trigger.index_after(until)
        if first is not None and last is not None:
            return max(0, last - first)
    count = 0
    slot = trigger.next_after(after)
    while slot is not None and slot <= until and count < limit:
        count += 1
        slot = trigger.next_after(slot)
    return count
