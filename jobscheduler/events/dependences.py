"""Dependences: `TriggerEventHandler` starts a job's dependents when its run ends."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from ..clock import Clock
from ..model.catalog import Catalog
from ..model.event import Event
from ..model.execution import Execution
from ..model.job import Job

__all__ = ["DependenceHost", "DependenceStarts", "DependentStarter", "TriggerEventHandler"]


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


class DependentStarter(Protocol):
    """What `DependenceStarts` needs of the engine: delayed one-off starts, run ids."""

    def run_at(self, job: Job, when: datetime, trigger: str = "dependence") -> None: ...

    def new_run_id(self) -> str: ...


class DependenceStarts:
    """The `DependenceHost` a scheduler gives its `TriggerEventHandler`.

    A met dependence starts the dependent once, its delay after now (a dependent disabled, or
    paused in the state store: `paused(name)`, fires
    NOT_STARTED "dependence met but the job is paused" instead); a dependence not met is
    reported NOT_STARTED through `report` (the scheduler's end of every run).
    """

    def __init__(
        self,
        catalog: Callable[[], Catalog],
        starter: DependentStarter,
        clock: Clock,
        report: Callable[[Job, Execution], None],
        paused: Callable[[str], bool] = lambda name: False,
    ) -> None:
        self._catalog = catalog
        self._starter = starter
        self._clock = clock
        self._report = report
        self._paused = paused  # whether a job is paused in the state store

    def dependents_of(self, name: str) -> list[Job]:
        return self._catalog().dependents(name)

    def start_dependent(self, job: Job, parent: Execution) -> None:
        if not job.enabled or self._paused(job.name):
            self.not_started(job, "dependence met but the job is paused")
            return
        dependence = job.dependence
        now = self._clock.now()
        when = now + dependence.delay if dependence is not None else now
        self._starter.run_at(job, when, trigger="dependence")

    def not_started(self, job: Job, reason: str) -> None:
        run_id = self._starter.new_run_id()
        now = self._clock.now()
        self._report(job, Execution.not_started(job.name, run_id, None, now, reason, "dependence"))
