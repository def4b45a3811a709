"""Shared helpers for the run-policy tests: the start time, a handler that records, job builders."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import policy_jobs as pj

from jobscheduler import Event, Execution, FakeClock, Job, JobType
from jobscheduler.scheduler import Scheduler

T0 = datetime(2024, 1, 1, tzinfo=UTC)
WAIT = 60.0  # seconds: reached only when a test fails, even on a loaded machine


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[Event, Execution]] = []

    def handle(self, job: Job, event: Event, execution: Execution) -> None:
        self.seen.append((event, execution))


def internal_job(name: str, function: str, key: str, interval: str, **fields: Any) -> Job:
    """An internal job calling `policy_jobs.<function>(key, **args)`, first due at T0 + 60s."""
    args = {"key": key, **fields.pop("args", {})}
    return Job(
        name,
        type=JobType.INTERNAL,
        command=f"{pj.__name__}:{function}",
        args=args,
        start=T0 + timedelta(seconds=60),
        interval=interval,
        timezone="UTC",
        **fields,
    )


def step_one(s: Scheduler, clock: FakeClock, seconds: float) -> None:
    """Advance the clock, run what is due on `s`, and wait until it is idle."""
    clock.advance(timedelta(seconds=seconds))
    s._processor.run_due(clock.now())
    assert s.wait_idle(WAIT)
