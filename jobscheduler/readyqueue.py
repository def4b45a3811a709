"""`ReadyQueue`: runs that are due and wait for a worker; `JobState` and `Run`.

The queue is a heap of ``(-priority, due instant, sequence, run)`` — higher priority first,
then older first — beside ``waiting``, a dict of the same runs by sequence, which decides who
owns a run. Workers `claim` runs *without the processor's lock*: popping the heap, popping
``waiting`` and appending to a list are each one C call, atomic under the GIL (the heap
compares numbers only: sequences are unique, runs are never compared). A burst of workers
then never queues up behind a Python lock, which is what limits a pool of threads: a worker
preempted while it holds a lock makes every other one block and switch (10,000 trivial runs
on 10 workers: 12,000 context switches and 3x the CPU time with a lock around the claim,
about 100 without). Everything else — pushing, cancelling, views — runs with the processor's
lock held, like the rest of `runqueue`.

Ownership: whoever pops a run from ``waiting`` owns it. A worker that pops a heap entry whose
run is gone (cancelled) skips it. A cancelled run leaves its heap entry behind, to be skipped.

This relies on the GIL of CPython (the project's target); a free-threaded build would need
the processor's lock around `claim` and the worker's bookkeeping.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from heapq import heappop, heappush
from typing import TYPE_CHECKING

from .events import Event
from .execution import Execution, SchedulerResult
from .job import Job

if TYPE_CHECKING:
    from .runcontext import RunContext

__all__ = ["SCHEDULE", "JobState", "QueuedRun", "ReadyQueue", "Run"]

SCHEDULE = "schedule"


@dataclass(frozen=True)
class QueuedRun:
    """A run waiting to start: due and waiting for a worker, or a pending one-off start.

    `slot` is the scheduled instant (None for ``run_now`` and dependence runs); `due` is when
    it was (or will be) due.
    """

    job_name: str
    trigger: str
    slot: datetime | None
    due: datetime
    priority: int


class JobState:
    """What the processor knows of one job name: definition, next slot, its runs."""

    __slots__ = (
        "gen",
        "job",
        "next_slot",
        "pending",
        "queued",
        "registered",
        "running",
        "scheduled",
        "stop_reason",
        "stops",
    )

    def __init__(self, job: Job, registered: bool) -> None:
        self.job = job
        self.registered = registered  # False: removed, or only known through run_now/run_at
        self.gen = 0
        self.next_slot: datetime | None = None  # not None iff a live timeline entry exists
        self.pending: dict[int, tuple[datetime, str, Job]] | None = None  # one-offs by sequence
        # Lists made with the first queued run (an empty list costs 56 bytes, an empty set
        # 216: most jobs wait far more than they run), changed by workers without the lock
        # (one C call each): sequences of the runs in the ready queue, ids of the runs taken
        # and not finished.
        self.queued: list[int] | None = None
        self.running: list[int] | None = None
        self.scheduled: Run | None = None  # the queued run with trigger "schedule", if any
        self.stops = 0  # stop_job calls so far, and the reason of the last one
        self.stop_reason: str | None = None

    @property
    def idle(self) -> bool:
        return not (self.running or self.queued or self.pending)


class Run:
    """One run: in the ready queue, then taken by a worker."""

    __slots__ = (
        "ctx",
        "due",
        "job",
        "run_id",
        "seq",
        "slot",
        "state",
        "stop_reason",
        "stops_seen",
        "trigger",
    )

    def __init__(
        self,
        job: Job,
        state: JobState,
        slot: datetime | None,
        due: datetime,
        trigger: str,
        seq: int,
    ) -> None:
        self.job = job
        self.state = state
        self.slot = slot
        self.due = due
        self.trigger = trigger
        self.seq = seq
        self.run_id = 0  # set when a worker claims it
        self.ctx: RunContext | None = None  # made by the worker, outside the lock
        self.stop_reason: str | None = None  # a stop that came before `ctx` existed
        self.stops_seen = 0  # ``state.stops`` when claimed: later stop_job calls apply to it


class ReadyQueue:
    """Due runs by priority then due instant, and the notices of runs that do not start."""

    def __init__(self, ids: Iterator[int]) -> None:
        self._ids = ids
        self.heap: list[tuple[int, float, int, Run]] = []
        self.waiting: dict[int, Run] = {}  # by sequence: the runs not claimed yet
        self.notices: deque[tuple[Job, Execution]] = deque()

    def __len__(self) -> int:
        return len(self.waiting)

    def push(self, run: Run, due_ts: float) -> None:
        """Queue `run` (lock held)."""
        state = run.state
        if state.queued is None or state.running is None:
            state.queued = []
            state.running = []
        state.queued.append(run.seq)
        if run.trigger == SCHEDULE:
            state.scheduled = run
        self.waiting[run.seq] = run  # before the heap entry: a claimer finds it
        heappush(self.heap, (-run.job.priority, due_ts, run.seq, run))

    def claim(self) -> Run | None:
        """The next run, now owned by the caller and counted as running; None when empty.

        Lock-free (see the module notes). The caller removes ``run.run_id`` from
        ``run.state.running`` when the run has ended.
        """
        heap = self.heap
        waiting = self.waiting
        while True:
            try:
                entry = heappop(heap)
            except IndexError:
                return None
            run = waiting.pop(entry[2], None)
            if run is not None:
                break
        run_id = run.run_id = next(self._ids)
        state = run.state
        run.stops_seen = state.stops
        queued, running = state.queued, state.running
        assert queued is not None and running is not None  # made by `push`
        running.append(run_id)  # counted as running before it stops counting as queued
        queued.remove(run.seq)  # ours alone to remove: we popped the run from `waiting`
        if state.scheduled is run:
            state.scheduled = None
        return run

    def cancel(self, state: JobState, reason: str, now: datetime, *, only_schedule: bool) -> None:
        """The queued runs of one job end NOT_STARTED with `reason` (lock held)."""
        if not state.queued:
            return
        for run in list(self.waiting.values()):
            if run.state is state and (not only_schedule or run.trigger == SCHEDULE):
                self._drop(run, now, reason)

    def drop_all(self, now: datetime, reason: str) -> int:
        """Every queued run ends NOT_STARTED with `reason`, in queue order (lock held)."""
        dropped = 0
        for entry in sorted(list(self.heap)):
            dropped += self._drop(entry[3], now, reason)
        self.heap.clear()
        return dropped

    def _drop(self, run: Run, now: datetime, reason: str) -> int:
        if self.waiting.pop(run.seq, None) is None:
            return 0  # a worker has it, or it was dropped already
        state = run.state
        assert state.queued is not None  # made by `push`
        state.queued.remove(run.seq)
        if state.scheduled is run:
            state.scheduled = None
        self.refuse(run.job, run.slot, run.trigger, now, reason)
        return 1

    def refuse(
        self, job: Job, slot: datetime | None, trigger: str, now: datetime, reason: str
    ) -> None:
        """Report a run that does not start: NOT_STARTED / ABNORMAL with `reason`."""
        execution = Execution(
            job_name=job.name,
            run_id=next(self._ids),
            slot=slot,
            started=now,
            ended=now,
            event=Event.NOT_STARTED,
            result=SchedulerResult.ABNORMAL,
            reason=reason,
            trigger=trigger,
        )
        self.notices.append((job, execution))

    def runs(self) -> list[QueuedRun]:
        """The queued runs, in the order they will start."""
        waiting = self.waiting
        return [
            QueuedRun(run.job.name, run.trigger, run.slot, run.due, run.job.priority)
            for _, _, seq, run in sorted(list(self.heap))
            if waiting.get(seq) is run
        ]
