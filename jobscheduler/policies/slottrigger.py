"""`SlotTrigger`: the trigger of a one-off start a policy makes for a slot.

A retry, a catch-up run and a host's second look each start one run of a job at a given
instant, for a slot that is not the one due then, and as a given attempt. The engine's
`run_at` takes a `SlotTrigger` where a plain text would do, and the run it makes has that
slot and attempt, and the trigger `reported`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

__all__ = ["SCHEDULE", "SlotTrigger"]

SCHEDULE: Final = "schedule"
"""The trigger of a run of the job's own schedule (the engine's, never a one-off start's)."""


class SlotTrigger(str):
    """A one-off start's trigger (``"retry"``, ``"catch_up"``) that carries the slot the run
    belongs to and its attempt (1-based), and the trigger `reported` (default: the text
    itself). Equal to its text, which must not be ``"schedule"`` (the engine's scheduled runs
    are another kind)."""

    slot: datetime | None
    attempt: int
    reported: str

    def __new__(
        cls, trigger: str, slot: datetime | None, attempt: int = 1, reported: str | None = None
    ) -> SlotTrigger:
        if trigger == SCHEDULE:
            raise ValueError("a one-off start's trigger cannot be 'schedule'")
        tagged = super().__new__(cls, trigger)
        tagged.slot = slot
        tagged.attempt = attempt
        tagged.reported = str(trigger) if reported is None else reported
        return tagged
