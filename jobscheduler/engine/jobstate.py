"""What the processor knows of one job (`JobState`, `Activity`).

A scheduler with 100,000 jobs holds 100,000 of these, nearly all of them waiting, so a
waiting job costs four slots and one int: its definition, its timeline key (which holds its
next slot and the state's index: see `keys`), whether it is registered, and an `Activity`
made the first time the job has runs, one-off starts or stops (then kept: a job that ran
once will run again).
"""

from __future__ import annotations

from datetime import datetime

from ..model.job import Job
from .keys import NEVER, index_of

__all__ = ["Activity", "JobState"]


class Activity:
    """A job's runs and the requests about them (made on the first one, see the module
    notes). `runs` is changed by workers without the lock (one C call each): the ready-queue
    keys (ints) of its queued runs and the ids (texts) of its runs taken and not finished."""

    __slots__ = (
        "pending",
        "runs",
        "scheduled",
        "scheduled_job",
        "scheduled_slot",
        "stop_reason",
        "stops",
    )

    def __init__(self) -> None:
        self.runs: list[int | str] = []
        self.pending: dict[int, tuple[datetime, str, Job]] | None = None  # one-offs by seq
        # The queued run with trigger "schedule", if any: its key, slot and definition.
        self.scheduled: int | None = None
        self.scheduled_slot: datetime | None = None
        self.scheduled_job: Job | None = None
        self.stops = 0  # stop_job calls so far, and the reason of the last one
        self.stop_reason: str | None = None


class JobState:
    """What the processor knows of one job name: its definition, its timeline key (the next
    slot, or `off_timeline`), and its `Activity` once it has had any."""

    __slots__ = ("act", "job", "key", "registered")

    def __init__(self, job: Job, registered: bool, key: int) -> None:
        self.job = job
        self.registered = registered  # False: removed, or only known through run_now/run_at
        self.key = key
        self.act: Activity | None = None

    @property
    def index(self) -> int:
        return index_of(self.key)

    @property
    def on_timeline(self) -> bool:
        return self.key < NEVER

    @property
    def idle(self) -> bool:
        act = self.act
        return act is None or not (act.runs or act.pending)

    def activity(self) -> Activity:
        """The job's `Activity`, made now if it had none (lock held)."""
        act = self.act
        if act is None:
            act = self.act = Activity()
        return act
