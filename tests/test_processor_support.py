"""Shared pieces of the processor tests: jobs on a FakeClock, and a recording harness."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from jobscheduler.clock import FakeClock
from jobscheduler.engine.processor import JobProcessor
from jobscheduler.model.event import Event
from jobscheduler.model.execution import Execution, SchedulerResult
from jobscheduler.model.job import Job
from jobscheduler.runners.context import RunContext

T0 = datetime(2024, 1, 1, tzinfo=UTC)
WAIT = 60.0  # real seconds a test waits for another thread before it fails (a loaded machine)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def job(name: str, start: float = 0, every: int = 60, **fields: Any) -> Job:
    """An external job starting at T0 + `start` seconds, every `every` seconds, in UTC."""
    return Job(
        name,
        command=["true"],
        start=at(start),
        interval=f"{every} seconds",
        timezone="UTC",
        **fields,
    )


class CountingClock(FakeClock):
    """A FakeClock that counts the waits made through it."""

    def __init__(self, start: datetime) -> None:
        super().__init__(start)
        self.waits = 0
        self.timeouts: list[float | None] = []
        self.counted = threading.Condition()

    def wait(self, condition: threading.Condition, timeout: float | None) -> bool:
        with self.counted:
            self.waits += 1
            self.timeouts.append(timeout)
            self.counted.notify_all()
        return super().wait(condition, timeout)

    def wait_for_waits(self, count: int) -> None:
        with self.counted:
            assert self.counted.wait_for(lambda: self.waits >= count, WAIT), self.waits


class Harness:
    """A JobProcessor whose runs are recorded; runs of a gated job block until released."""

    def __init__(
        self,
        clock: FakeClock,
        max_workers: int = 10,
        execute: Callable[[Job, RunContext], Execution] | None = None,
        claim: Callable[[Job, RunContext], bool] | None = None,
        early_wake: float | None = None,
        spin: float | None = None,
    ) -> None:
        self.clock = clock
        self.cond = threading.Condition()
        self.started: list[tuple[str, datetime | None, str]] = []
        self.finished: list[Execution] = []
        self.gates: dict[str, threading.Event] = {}
        self.processor = JobProcessor(
            execute or self.execute,
            self.on_finished,
            clock=clock,
            max_workers=max_workers,
            claim=claim,
            early_wake=early_wake,
            spin=spin,
        )

    def execute(self, job: Job, ctx: RunContext) -> Execution:
        with self.cond:
            self.started.append((job.name, ctx.slot, ctx.trigger))
            self.cond.notify_all()
        gate = self.gates.get(job.name)
        if gate is not None:
            assert gate.wait(WAIT), f"gate of {job.name} never opened"
        now = self.clock.now()
        return Execution(
            job.name,
            ctx.run_id,
            ctx.slot,
            started=now,
            ended=now,
            event=Event.SUCCESSFUL,
            result=SchedulerResult.NORMAL,
            trigger=ctx.trigger,
        )

    def on_finished(self, job: Job, execution: Execution) -> None:
        with self.cond:
            self.finished.append(execution)
            self.cond.notify_all()

    def gate(self, name: str) -> threading.Event:
        self.gates[name] = threading.Event()
        return self.gates[name]

    def wait_started(self, count: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.started) >= count, WAIT), self.started

    def wait_finished(self, count: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.finished) >= count, WAIT), self.finished

    def names(self) -> list[str]:
        with self.cond:
            return [name for name, _, _ in self.started]

    def events(self) -> list[tuple[str, Event | None, str | None]]:
        with self.cond:
            return [(e.job_name, e.event, e.reason) for e in self.finished]


def settle(processor: JobProcessor, clock: CountingClock) -> None:
    """Return once the scheduler thread waits on the clock (so a FakeClock move wakes it).

    The thread sets its deadline before it waits and clears it when it wakes, both under the
    processor's lock, which it releases only inside the wait.
    """
    for _ in range(1000):
        with clock.counted:
            waiting = clock.counted.wait_for(lambda: processor._loop._deadline != -math.inf, WAIT)
            assert waiting, "the scheduler thread never waited"
        with processor._lock:
            if processor._loop._deadline != -math.inf:
                return
    raise AssertionError("the scheduler thread never settled")
