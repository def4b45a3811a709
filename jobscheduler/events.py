"""Events: how every run ends, and who is told.

Every run ends in exactly one `Event`: SUCCESSFUL, FAILED or NOT_STARTED. `BOTH` is not an
outcome; it is what a `Dependence` or an alert listens for when any finished run will do.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .execution import Execution
    from .job import Job

__all__ = ["Event", "EventHandler"]


class Event(enum.Enum):
    """The outcome of a run (NOT_STARTED, SUCCESSFUL, FAILED), or BOTH as a filter."""

    NOT_STARTED = "not_started"
    SUCCESSFUL = "successful"
    FAILED = "failed"
    BOTH = "both"

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


@runtime_checkable
class EventHandler(Protocol):
    """Listens to the events of a job, or of every job of a group.

    ``handle`` is called off the scheduler thread once per finished run. An exception it raises
    is logged and swallowed: it never reaches the scheduler or the other handlers.
    """

    def handle(self, job: Job, event: Event, execution: Execution) -> None: ...


class DependenceHost(Protocol):
    """What `TriggerEventHandler` needs from the scheduler it serves."""

    def dependents_of(self, name: str) -> list[Job]:
        """The jobs whose dependence names job `name`."""
        ...

    def start_dependent(self, job: Job, parent: Execution) -> None:
        """Run dependent `job` once, after its dependence's delay."""
        ...

    def not_started(self, job: Job, reason: str) -> None:
        """Record that `job` did not start: fires its NOT_STARTED event."""
        ...


class TriggerEventHandler:
    """Starts the jobs that depend on a job, when its run ends (the spec's 1.3.6).

    For each dependent of the job: if the dependence's event matches the run's outcome
    (``BOTH`` matches SUCCESSFUL and FAILED) the dependent runs once after its delay; if it
    does not match, the dependent fires NOT_STARTED with the reason "dependence not met". A
    parent that did not start (NOT_STARTED) starts none of its dependents; each fires
    NOT_STARTED, so a chain A -> B -> C reports every link.

    The scheduler adds one to every job automatically.
    """

    def __init__(self, host: DependenceHost) -> None:
        self._host = host

    def handle(self, job: Job, event: Event, execution: Execution) -> None:
        for dependent in self._host.dependents_of(job.name):
            dependence = dependent.dependence
            if dependence is None:  # changed since the list was taken
                continue
            if event is Event.NOT_STARTED:
                self._host.not_started(dependent, f"dependence not met: {job.name} did not start")
            elif dependence.event.matches(event):
                self._host.start_dependent(dependent, execution)
            else:
                self._host.not_started(
                    dependent,
                    f"dependence not met: {job.name} ended {event.name}, "
                    f"waiting for {dependence.event.name}",
                )

    def __repr__(self) -> str:
        return "TriggerEventHandler()"
