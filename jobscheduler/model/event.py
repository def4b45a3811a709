"""The event a run ends in.

Every run ends in exactly one `Event`: SUCCESSFUL, FAILED or NOT_STARTED. `BOTH` is not an
outcome; it is what a `Dependence` or an alert listens for when any finished run will do.
`OVERDUE` is not an outcome either: a warning, told once, that a run still goes on after its
job's ``warn_after`` (the run still ends in one of the three).
"""

from __future__ import annotations

import enum

__all__ = ["Event"]


class Event(enum.Enum):
    """The outcome of a run (NOT_STARTED, SUCCESSFUL, FAILED), BOTH as a filter, or the
    OVERDUE warning of a run still going."""

    NOT_STARTED = "not_started"
    SUCCESSFUL = "successful"
    FAILED = "failed"
    BOTH = "both"
    OVERDUE = "overdue"

    @classmethod
    def parse(cls, text: str) -> Event:
        """Read an event name as written in a file: ``successful``, ``FAILED``, ``NOTSTARTED``,
        ``not started`` and ``not_started`` are all accepted (case and separators ignored)."""
        key = text.strip().lower().replace(" ", "").replace("_", "").replace("-", "")
        for event in cls:
            if event.value.replace("_", "") == key:
                return event
        names = ", ".join(e.value for e in cls)
        raise ValueError(f"unknown event {text!r} (expected one of: {names})")

    def matches(self, outcome: Event) -> bool:
        """Whether a listener for this event wants to hear of `outcome`.

        BOTH matches SUCCESSFUL and FAILED, the two ways a run that started can end; it does
        not match NOT_STARTED (the specification's TriggerEventHandler never starts dependents
        of a run that did not start).
        """
        if self is Event.BOTH:
            return outcome in (Event.SUCCESSFUL, Event.FAILED)
        return self is outcome

    def __str__(self) -> str:
        return self.value
