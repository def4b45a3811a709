"""`ReadyRuns`: runs that are due and wait for a worker, and the `Run` a worker takes.

The queue is a heap of integer run keys (`keys.run_key`: higher priority first, then older,
then first queued) and a lane of them (below), beside ``waiting``, a dict of what each queued
run needs by key, which decides who owns a run. The run's `Run` is made only when a worker
takes it (or a view asks): a burst of 10,000 runs queues no new objects.

Workers `take` runs *without the processor's lock*: popping the lane or the heap, popping
``waiting`` and appending to a list are each one C call, atomic under the GIL. A burst of
workers then never queues up behind a Python lock, which is what limits a pool of threads: a worker
preempted while it holds a lock makes every other one block and switch (10,000 trivial runs
on 10 workers: 12,000 context switches and 3x the CPU time with a lock around the take,
about 100 without). Everything else — pushing, cancelling, views — runs with the processor's
lock held, like the rest of `timeline`.

A worker in a burst takes several runs with one `take_batch` call (`take` for each, in
order): see `workers` for what it does with them.

Keys pushed in increasing order (a burst's: one priority and instant, then first queued)
queue in ``lane``, a deque, instead of the heap, and `take` pops the lane's head, then
keeps the lower of it and the heap's head with one `heappushpop` (the other goes to the
heap): a pop from the front of a deque costs a quarter of a `heappop` on a heap of
thousands. A key lower than the lane's last goes to the heap. Each take gets the lowest key
left at its pop, as from the heap alone; two workers taking at once may get theirs in
either order.

Ownership: whoever pops a run from ``waiting`` owns it. A worker that pops a key whose run
is gone (cancelled) skips it. A cancelled run leaves its key in the heap or the lane, to be
skipped.

This relies on the GIL of CPython (the project's target); a free-threaded build would need
the processor's lock around `take` and the worker's bookkeeping.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from datetime import datetime
from heapq import heappop, heappush, heappushpop
from typing import TYPE_CHECKING, Any

from ..model.execution import Execution
from ..model.job import Job
from ..policies.slottrigger import SCHEDULE, SlotTrigger
from .jobstate import JobState

if TYPE_CHECKING:
    from ..runners.context import RunContext

__all__ = ["SCHEDULE", "ReadyRuns", "Run", "own_run_id"]


class Run:
    """One run of a job, from the moment it is due to its end (the engine's only run type).

    A worker makes one when it takes a ready run, and keeps it while the run runs; the views
    `JobProcessor.queued` and `pending` hand out fresh ones (`run_id` empty: not taken). `slot`
    is the scheduled instant (None for ``run_now`` and dependence runs); `due` is when it was
    (or will be) due. `RunContext` (the runner's side) and `Execution` (the outcome) are made
    from it.
    """

    __slots__ = (
        "ahead",
        "answer",
        "attempt",
        "ctx",
        "due",
        "job",
        "run_id",
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
    ) -> None:
        self.job = job
        self.state = state
        self.slot = slot
        self.due = due
        self.trigger = trigger
        self.run_id = ""  # set when a worker takes it (see `taken`)
        self.ctx: RunContext | None = None  # made by the worker, outside the lock
        self.stop_reason: str | None = None  # a stop that came before `ctx` existed
        self.stops_seen = 0  # ``state.act.stops`` when taken: later stops apply to it
        self.attempt = 1  # the try of its slot (a retry's: see `SlotTrigger`)
        # Its claim's answer, when claimed with others before a worker took it (`workers`):
        # True (run it) or the Execution it ends with (the claim failed).
        self.answer: bool | Execution | None = None
        # Its slot's claim made before it was due (`ahead.Entry`: the round, its place in it).
        self.ahead: tuple[Any, int] | None = None

    def taken(self, run_id: str, stops_seen: int, ahead: tuple[Any, int] | None) -> None:
        """A worker took it: its run id, the stop count it has seen, its claim ahead."""
        self.run_id = run_id
        self.stops_seen = stops_seen
        self.ahead = ahead

    def set_context(self, ctx: RunContext) -> None:
        """The runner's side of it, made by the worker."""
        self.ctx = ctx

    def set_answer(self, answer: bool | Execution) -> None:
        """Its claim's answer, claimed with others before a worker took it."""
        self.answer = answer

    def note_stop(self, reason: str) -> None:
        """A stop asked for: kept unless one came first (applied once `ctx` exists)."""
        if self.stop_reason is None:
            self.stop_reason = reason

    @property
    def job_name(self) -> str:
        return self.job.name

    @property
    def priority(self) -> int:
        return self.job.priority

    def __repr__(self) -> str:
        return f"Run({self.job.name!r}, {self.trigger!r}, slot={self.slot}, due={self.due})"


# What `waiting` holds for a queued run: the job's state for a scheduled run (its slot and
# definition are on the state: at most one is queued per job), else (due, trigger, job, state).
_OneOff = tuple[datetime, str, Job, JobState]
_Waiting = JobState | _OneOff


class ReadyRuns:
    """Due runs by priority then due instant, and the notices of runs that do not start."""

    def __init__(self, ids: Iterator[str]) -> None:
        self._ids = ids
        self.heap: list[int] = []
        self.lane: deque[int] = deque()  # keys pushed in increasing order (module notes)
        self.waiting: dict[int, _Waiting] = {}  # by key: the runs not taken yet
        self.notices: deque[tuple[Job, Execution]] = deque()
        # Slots claimed before they were due, by (job name, slot): filled by `ahead.ClaimsAhead`.
        self.ahead: dict[tuple[str, Any], tuple[Any, int]] = {}

    def __len__(self) -> int:
        return len(self.waiting)

    def push(
        self,
        state: JobState,
        job: Job,
        slot: datetime | None,
        due: datetime,
        key: int,
        trigger: str,
    ) -> None:
        """Queue a run of `job` (lock held): `slot` for a scheduled run, else `due`."""
        act = state.act
        if act is None:  # its first run (then kept: see `jobstate`)
            act = state.activity()
        act.runs.append(key)
        if trigger == SCHEDULE:
            act.queue_scheduled(key, slot, job)
            self.waiting[key] = state  # before the heap entry: a worker finds it
        else:
            self.waiting[key] = (due, trigger, job, state)
        lane = self.lane
        try:
            in_order = key > lane[-1]
        except IndexError:  # empty (workers take without the lock): any key is in order
            in_order = True
        if in_order:
            lane.append(key)
        else:
            heappush(self.heap, key)

    def take(self) -> Run | None:
        """The next run, now owned by the caller and counted as running; None when empty.

        Lock-free (see the module notes). The caller removes ``run.run_id`` from
        ``run.state.act.runs`` when the run has ended.
        """
        heap = self.heap
        lane = self.lane
        waiting = self.waiting
        while True:
            try:
                # The lane's head, or the heap's if lower, in one call once popped: compared
                # first, then popped, another worker's take could come in between.
                key = heappushpop(heap, lane.popleft()) if lane else heappop(heap)
            except IndexError:  # both empty, or another worker took the last one meanwhile
                if lane or heap:
                    continue
                return None
            queued = waiting.pop(key, None)
            if queued is not None:
                break
        run = _run_of(queued)
        act = run.state.act
        assert act is not None  # made by `push`
        scheduled = isinstance(queued, JobState)  # else a one-off start: never claimed ahead
        entry = None
        if scheduled and self.ahead:
            # Taken before `scheduled` is cleared below: `ClaimsAhead` releases a slot's
            # claim only when no run of it is queued (see there).
            entry = self.ahead.pop((run.job.name, run.slot), None)
        run.taken(self._run_id(entry, run.trigger), act.stops, entry)
        runs = act.runs
        runs.append(run.run_id)  # counted as running before it stops counting as queued
        runs.remove(key)  # ours alone to remove: we popped the run from `waiting`
        if scheduled:
            # Its slot and definition are the run's now: not kept on the job's state while
            # it waits for its next slot (48 bytes or more a job).
            act.clear_scheduled()
        return run

    def take_batch(self, most: int) -> list[Run]:
        """Up to `most` next runs, each as `take` gives it, in order, in one call (a burst's
        runs are moved a few at a time by a worker: see `workers`). Lock-free, as `take`; an
        empty list when none is ready."""
        take = self.take
        runs: list[Run] = []
        while len(runs) < most and (run := take()) is not None:
            runs.append(run)
        return runs

    def cancel(self, state: JobState, reason: str, now: datetime, *, only_schedule: bool) -> None:
        """The queued runs of one job end NOT_STARTED with `reason` (lock held)."""
        if state.idle:
            return
        for key, queued in list(self.waiting.items()):
            if _state_of(queued) is state and (not only_schedule or queued is state):
                self._drop(key, now, reason)

    def drop_all(self, now: datetime, reason: str) -> int:
        """Every queued run ends NOT_STARTED with `reason`, in queue order (lock held)."""
        dropped = 0
        for key in sorted(self.waiting):
            dropped += self._drop(key, now, reason)
        self.heap.clear()
        self.lane.clear()
        return dropped

    def _drop(self, key: int, now: datetime, reason: str) -> int:
        queued = self.waiting.pop(key, None)
        if queued is None:
            return 0  # a worker has it, or it was dropped already
        run = _run_of(queued)
        act = run.state.act
        assert act is not None  # made by `push`
        act.runs.remove(key)
        if act.scheduled == key:
            act.clear_scheduled()
        self.refuse(run.job, run.slot, run.trigger, now, reason, run.attempt)
        return 1

    def refuse(
        self,
        job: Job,
        slot: datetime | None,
        trigger: str,
        now: datetime,
        reason: str,
        attempt: int = 1,
    ) -> None:
        """Report a run that does not start: NOT_STARTED / ABNORMAL with `reason`, as the
        `attempt`th try of `slot`. A one-off start with a `SlotTrigger` is reported under the
        trigger's slot and attempt, with its reported trigger, as its run would have been (a
        backfill waits for that slot's answer). A slot claimed ahead is reported under its
        claim's run id (its record is the claim's)."""
        ahead = self.ahead
        entry = ahead.pop((job.name, slot), None) if ahead and trigger == SCHEDULE else None
        run_id = self._run_id(entry, trigger)
        if isinstance(trigger, SlotTrigger):
            slot, attempt, trigger = trigger.slot, trigger.attempt, trigger.reported
        execution = Execution.not_started(job.name, run_id, slot, now, reason, trigger, attempt)
        self.notices.append((job, execution))

    def _run_id(self, entry: tuple[Any, int] | None, trigger: str) -> str:
        """The run id of a run taken or refused: its claim ahead's (`entry`), the one its
        trigger brings (`own_run_id`), else a fresh one."""
        if entry is not None:
            claimed: str = entry[0].run_ids[entry[1]]
            return claimed
        if trigger.__class__ is not str and (run_id := own_run_id(trigger)) is not None:
            return run_id  # (plain text brings none: not looked at)
        return next(self._ids)

    def runs(self) -> list[Run]:
        """The queued runs (fresh `Run` objects, not taken), in the order they will start."""
        waiting = dict(self.waiting)
        return [_run_of(waiting[key]) for key in sorted(waiting)]


def own_run_id(trigger: str) -> str | None:
    """The run id a one-off start's trigger brings, for a run claimed before it was started
    (a submitted run claimed with its queue row's take: `cluster.queue`): its run has that
    id, and so has its report when it does not start. None: the run gets a fresh one."""
    run_id = getattr(trigger, "run_id", None)
    return run_id if isinstance(run_id, str) else None


def _state_of(queued: _Waiting) -> JobState:
    return queued if isinstance(queued, JobState) else queued[3]


def _run_of(queued: _Waiting) -> Run:
    """The `Run` of a queued run (its scheduled slot and definition are read from the job's
    state: the caller owns the run, so they are not replaced meanwhile)."""
    if isinstance(queued, JobState):
        act = queued.act
        assert act is not None  # made by `push`
        slot = act.scheduled_slot
        job = act.scheduled_job
        assert slot is not None and job is not None  # set by `push`
        return Run(job, queued, slot, slot, SCHEDULE)
    due, trigger, job, state = queued
    if trigger.__class__ is not SlotTrigger:  # text, or another kind kept as it is (a submit's)
        return Run(job, state, None, due, trigger)
    return _tagged_run(job, state, due, trigger)


def _tagged_run(job: Job, state: JobState, due: datetime, trigger: SlotTrigger) -> Run:
    """The run of a one-off start with a `SlotTrigger`: its slot and attempt, plain text."""
    run = Run(job, state, trigger.slot, due, trigger.reported)
    run.attempt = trigger.attempt
    return run
