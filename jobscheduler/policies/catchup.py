"""The `catch_up` policy: what a (re)start does about the slots missed while no node ran.

Missed slots are those of the job after its mark's ``last_slot`` (the last slot handled,
kept in the state store, so this works across restarts) up to and including now (the
schedule goes on from the first slot strictly after now), and no older than
``catch_up_window`` back from now. A job with no mark has missed nothing. ``latest``: one
run, for the last missed slot; ``all``: one run for each (at most `MAX_CATCH_UP`, the
latest), one after another, oldest first (`runpolicies.RunPolicies` starts the next when
one ends). A catch-up run has trigger ``catch_up`` and the slot it makes up
(`slottrigger.SlotTrigger`): among nodes sharing a store it is claimed once per slot.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta
from typing import Final

from ..model.job import Job

__all__ = ["CATCH_UP", "MAX_CATCH_UP", "missed_slots"]

CATCH_UP: Final = "catch_up"
MAX_CATCH_UP: Final = 1000
_TICK = timedelta(microseconds=1)


def missed_slots(
    job: Job,
    after: datetime,
    before: datetime,
    *,
    window: timedelta | None = None,
    limit: int = MAX_CATCH_UP,
) -> list[datetime]:
    """The slots of `job` strictly after `after` and at or before `before`, not earlier than
    ``before - window``; at most `limit` of them, the latest, in order. Stepped slot by slot
    from the later of `after` and the window's start (`next_after` is O(1) for interval jobs,
    so the cost is the number of slots in the window)."""
    start = after
    if window is not None and before - window - _TICK > after:
        start = before - window - _TICK
    found: deque[datetime] = deque(maxlen=max(limit, 0))
    slot = job.next_after(start)
    while slot is not None and slot <= before:
        found.append(slot)
        slot = job.next_after(slot)
    return list(found)
