"""The two schedulers under test, set up the same way, and small helpers around them.

- jobscheduler: ``Scheduler()`` in memory (or with a file), ``max_workers=10`` (its default),
  internal jobs naming `bench._jobs` functions; a one-off run is a job whose ``stop`` equals
  its ``start``.
- APScheduler 3.11: ``BackgroundScheduler`` with its defaults (a ``ThreadPoolExecutor`` of 10
  threads, a memory job store, ``misfire_grace_time`` 1 s, ``coalesce`` on, ``max_instances``
  1), jobs with a ``date`` trigger for one-off runs.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

JOBSCHEDULER = "jobscheduler"
APSCHEDULER = "apscheduler"
MACHINE = "machine"


def at_us(epoch_us: int) -> datetime:
    """The aware UTC datetime of `epoch_us` microseconds since the epoch (exact)."""
    return EPOCH + timedelta(microseconds=epoch_us)


def js_one_off(
    name: str,
    slot_us: int,
    *,
    function: str = "record",
    args: dict[str, Any] | None = None,
    command: Any = None,
    priority: int = 0,
) -> Any:
    """A jobscheduler job with one slot, at `slot_us`."""
    from jobscheduler import Interval, Job, JobType, Unit

    when = at_us(slot_us)
    if command is not None:
        return Job(
            name,
            type=JobType.EXTERNAL,
            command=command,
            start=when,
            stop=when,
            interval=Interval(1, Unit.DAY),
            timezone="UTC",
            priority=priority,
        )
    return Job(
        name,
        type=JobType.INTERNAL,
        command=f"bench._jobs:{function}",
        args=args if args is not None else {},
        start=when,
        stop=when,
        interval=Interval(1, Unit.DAY),
        timezone="UTC",
        priority=priority,
    )


def js_future(name: str, start: datetime) -> Any:
    """A daily jobscheduler job from `start` (far enough ahead never to run in a benchmark)."""
    from jobscheduler import Interval, Job, JobType, Unit

    return Job(
        name,
        type=JobType.INTERNAL,
        command="bench._jobs:noop",
        start=start,
        interval=Interval(1, Unit.DAY),
        timezone="UTC",
    )


def js_scheduler(**kwargs: Any) -> Any:
    from jobscheduler.scheduler import Scheduler

    return Scheduler(**kwargs)


def aps_scheduler(**kwargs: Any) -> Any:
    """A BackgroundScheduler with APScheduler's defaults (UTC as its zone)."""
    from apscheduler.schedulers.background import BackgroundScheduler

    return BackgroundScheduler(timezone=UTC, **kwargs)


def aps_add_one_off(scheduler: Any, function: Any, slot_us: int, key: int, *args: Any) -> None:
    scheduler.add_job(function, "date", run_date=at_us(slot_us), args=[key, *args], id=f"j{key}")


class ApsCounter:
    """Counts APScheduler's events: executed runs, missed runs, errors (thread-safe)."""

    def __init__(self, scheduler: Any, target: int = 0) -> None:
        from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MISSED

        self.executed = 0
        self.missed = 0
        self.errors = 0
        self.target = target
        self.settled = threading.Event()
        self._lock = threading.Lock()
        self._kinds = (EVENT_JOB_EXECUTED, EVENT_JOB_MISSED, EVENT_JOB_ERROR)
        scheduler.add_listener(
            self._on_event, EVENT_JOB_EXECUTED | EVENT_JOB_MISSED | EVENT_JOB_ERROR
        )

    def _on_event(self, event: Any) -> None:
        executed, missed, error = self._kinds
        with self._lock:
            if event.code == executed:
                self.executed += 1
            elif event.code == missed:
                self.missed += 1
            elif event.code == error:
                self.errors += 1
            if self.target and self.executed + self.missed + self.errors >= self.target:
                self.settled.set()
