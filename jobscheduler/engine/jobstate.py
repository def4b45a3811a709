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

    def queue_scheduled(self, key: int, slot: datetime | None, job: Job) -> None:
        """A run with trigger "schedule" is queued under `key`, for `slot` of `job`."""
        self.scheduled = key
        self.scheduled_slot = slot
        self.scheduled_job = job

    def clear_scheduled(self) -> None:
        """The queued scheduled run was taken or dropped. Its slot and definition are cleared
        before `scheduled`: no other is queued for the job until `scheduled` is None."""
        self.scheduled_slot = self.scheduled_job = None
        self.scheduled = None

    def add_pending(self, seq: int, when: datetime, trigger: str, job: Job) -> None:
        """A one-off start of `job` at `when`, by its timeline sequence number."""
        if self.pending is None:
            self.pending = {}
        self.pending[seq] = (when, trigger, job)

    def pop_pending(self, seq: int) -> tuple[datetime, str, Job] | None:
        """The one-off start `seq`, taken out (None: there is none)."""
        pending = self.pending
        one_off = pending.pop(seq, None) if pending else None
        if not pending:
            self.pending = None
        return one_off

    def clear_pending(self) -> None:
        """Every one-off start dropped."""
        self.pending = None

    def count_stop(self, reason: str) -> None:
        """A stop_job call: later ones are told apart from those a run has seen."""
        self.stop_reason = reason
        self.stops += 1


class JobState:
    """What the processor knows of one job name: its definition, its timeline key (the next
    slot, or `off_timeline`), and its `Activity` once it has had any."""

    __slots__ = ("act", "job", "key", "registered")

    def __init__(self, job: Job, registered: bool, key: int) -> None:
        self.job = job
        self.registered = registered  # False: removed, or only known through run_now/run_at
        self.key = key
        self.act: Activity | None = None

    def register(self, job: Job) -> None:
        """The job is (again) defined, as `job`."""
        self.job = job
        self.registered = True

    def unregister(self) -> None:
        """The job was removed (its runs and one-off starts may go on)."""
        self.registered = False

    def set_key(self, key: int) -> None:
        """Its timeline key: its next slot, or `off_timeline`."""
        self.key = key

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
