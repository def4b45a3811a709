"""`EventHandler`: what listens to the events of a job or of a group."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..model.event import Event
from ..model.execution import Execution
from ..model.job import Job

__all__ = ["EventHandler"]


@runtime_checkable
class EventHandler(Protocol):
    """Listens to the events of a job, or of every job of a group.

    ``handle`` is called off the scheduler thread once per finished run. An exception it raises
    is logged and swallowed: it never reaches the scheduler or the other handlers.
    """

    def handle(self, job: Job, event: Event, execution: Execution) -> None: ...
