"""`RunQueue`: the processor's bookkeeping of when runs start — no threads, no clock.

The *timeline* is a heap of ``(instant, -priority, sequence, job state, generation)``: each
job's next slot, and each one-off start (``run_now``, ``run_at``). Entries are invalidated
lazily: a job's generation goes up when it is changed, paused or removed, and an entry of an
older generation is skipped when it reaches the top (a one-off entry is live while its sequence
is still in the job's ``pending``). Changing a job is O(log n); the heap is compacted when more
than half of it is stale. Due entries move to the `ReadyQueue`, under the limits.

Every method is called with the owner's lock held; `JobProcessor` owns the lock, the threads
and the clock. Runs that cannot start are reported through `notices`, a queue of
``(job, Execution)`` with event NOT_STARTED, for the owner to hand to its ``on_finished``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from heapq import heapify, heappop, heappush

from .job import Job
from .readyqueue import SCHEDULE, JobState, QueuedRun, ReadyQueue, run_key

__all__ = ["RunQueue"]

log = logging.getLogger("jobscheduler.processor")

_INF = float("inf")
_ONE_OFF = -1  # the generation of one-off timeline entries
_COMPACT_MIN = 1024
_POP_MAX = 64  # due entries popped one by one before a large batch is split off at once
_WAKE_EVERY = 4  # runs made ready between `on_ready` calls during a batch


_Entry = tuple[float, int, int, JobState, int]


def _same_schedule(a: Job, b: Job) -> bool:
    """Whether two definitions of a job have the same slots (so its next slot can be kept)."""
    return (
        a.start == b.start
        and a.interval == b.interval
        and a.stop == b.stop
        and a.timezone == b.timezone
        and a.dependence == b.dependence
        and getattr(a, "cron", None) == getattr(b, "cron", None)
        and getattr(a, "calendar", None) == getattr(b, "calendar", None)
    )


class RunQueue:
    """The timeline of next slots and one-off starts, feeding `ready` (see module notes)."""

    def __init__(self, ids: Iterator[int]) -> None:
        self._ids = ids
        self._seq = itertools.count()
        self.states: dict[str, JobState] = {}
        self.timeline: list[_Entry] = []
        self.ready = ReadyQueue(ids)
        self.notices = self.ready.notices
        self.stale = 0
        self.coalesced = 0
        self.refused = 0
        self.skipped = 0
        self.on_ready: Callable[[int], object] | None = None  # see `due`

    # -- definitions -----------------------------------------------------------------------

    def put(self, jobs: Iterable[Job], now: datetime) -> float:
        """Add or update `jobs`; returns the earliest instant newly put on the timeline.

        A new (or resumed, or rescheduled) job's next slot is its first slot strictly after
        `now`. A job whose schedule is unchanged keeps its next slot, even one already due: an
        update never loses or repeats a slot. Pausing (``enabled=False``) takes the job off
        the timeline and drops its queued scheduled runs (NOT_STARTED "job paused").
        """
        entries: list[_Entry] = []
        for job in jobs:
            entry = self._put(job, now)
            if entry is not None:
                entries.append(entry)
        if not entries:
            return _INF
        timeline = self.timeline
        if len(entries) * 4 > len(timeline):
            timeline.extend(entries)
            heapify(timeline)
        else:
            for entry in entries:
                heappush(timeline, entry)
        self._maybe_compact()
        return min(entries)[0]

    def _put(self, job: Job, now: datetime) -> _Entry | None:
        state = self.states.get(job.name)
        kept: datetime | None = None
        if state is None:
            state = self.states[job.name] = JobState(job, True)
        else:
            old = state.job
            if state.registered and _same_schedule(old, job):
                kept = state.next_slot
            state.job = job
            state.registered = True
            if kept is not None and job.enabled and old.priority == job.priority:
                return None  # its timeline entry stays valid as it is
            self._invalidate(state)
            if not job.enabled:
                self.ready.cancel(state, "job paused", now, only_schedule=True)
        if not job.enabled:
            return None
        slot = kept if kept is not None else _next_slot(job, now)
        state.next_slot = slot
        if slot is None:
            return None
        return (slot.timestamp(), -job.priority, next(self._seq), state, state.gen)

    def remove(self, name: str, now: datetime, reason: str = "job removed") -> bool:
        """Take job `name` off the timeline; its queued runs and pending one-offs end
        NOT_STARTED with `reason`; its running runs go on. False if it was not registered."""
        state = self.states.get(name)
        if state is None or not state.registered:
            return False
        state.registered = False
        self._invalidate(state)
        self.ready.cancel(state, reason, now, only_schedule=False)
        self._drop_pending(state, reason, now)
        self.forget_if_idle(state)
        return True

    def registered(self) -> list[Job]:
        return [s.job for s in self.states.values() if s.registered]

    def _invalidate(self, state: JobState) -> None:
        state.gen += 1
        if state.next_slot is not None:
            state.next_slot = None
            self.stale += 1

    def forget_if_idle(self, state: JobState) -> None:
        if not state.registered and state.idle and self.states.get(state.job.name) is state:
            del self.states[state.job.name]

    # -- one-off starts --------------------------------------------------------------------

    def add_one_off(self, job: Job, when: datetime, trigger: str) -> float:
        """One run of `job` at `when` (trigger "run_now", "dependence"…); returns its instant."""
        state = self.states.get(job.name)
        if state is None:
            state = self.states[job.name] = JobState(job, False)
        seq = next(self._seq)
        if state.pending is None:
            state.pending = {}
        state.pending[seq] = (when, trigger, job)
        ts = when.timestamp()
        heappush(self.timeline, (ts, -job.priority, seq, state, _ONE_OFF))
        return ts

    def cancel_pending(self, name: str) -> int:
        """Drop the pending one-off starts of job `name`, silently; returns how many."""
        state = self.states.get(name)
        if state is None or not state.pending:
            return 0
        count = len(state.pending)
        state.pending = None
        self.stale += count
        self.forget_if_idle(state)
        return count

    def _drop_pending(self, state: JobState, reason: str, now: datetime) -> None:
        if not state.pending:
            return
        for _when, trigger, job in state.pending.values():
            self.ready.refuse(job, None, trigger, now, reason)
        self.stale += len(state.pending)
        state.pending = None

    # -- dispatch ----------------------------------------------------------------------------

    def due(self, now: datetime, limit: int | None = None) -> tuple[int, float | None]:
        """Move every timeline entry due at `now` to the ready queue (at most `limit`
        entries, at most `_POP_MAX`: the others stay on the timeline, and the delay returned
        is then 0 or less).

        Returns (runs made ready, seconds until the next entry or None when there is none).
        A dispatched slot's successor is ``next_after(slot)``, anchored; if that is already
        past (the thread was held up for several intervals) the missed slots are skipped to
        the first slot after `now` and counted in `skipped`. `on_ready`, when set, hears of
        the runs made ready while a large batch is still being moved (so workers start them
        at once), every `_WAKE_EVERY` runs; the caller learns of the rest from the result.
        """
        now_ts = now.timestamp()
        timeline = self.timeline
        pushed = 0
        if timeline and timeline[0][0] <= now_ts:
            on_ready = self.on_ready
            told = 0
            entries = self._take_due(now_ts)
            left = _POP_MAX if limit is None or limit > _POP_MAX else limit
            try:
                for entry in entries:
                    pushed += self._dispatch(entry, now, now_ts)
                    if on_ready is not None and pushed - told >= _WAKE_EVERY:
                        on_ready(pushed - told)
                        told = pushed
                    if limit is not None:
                        left -= 1
                        if not left:
                            break  # still popping one by one: the rest is on the timeline
            except BaseException:
                # A bug while dispatching: the entries not reached yet go back on the timeline
                # (a large batch was taken off it at once), and the runs queued are announced.
                for entry in list(entries):
                    heappush(timeline, entry)
                if on_ready is not None and pushed > told:
                    on_ready(pushed - told)
                raise
        while timeline:
            top = timeline[0]
            if self._live(top):
                return pushed, top[0] - now_ts
            heappop(timeline)
            self.stale -= 1
        return pushed, None

    def _dispatch(self, entry: _Entry, now: datetime, now_ts: float) -> int:
        """Dispatch one due timeline entry; returns the runs made ready (0 or 1)."""
        ts, negprio, seq, state, gen = entry
        timeline = self.timeline
        if gen == _ONE_OFF:
            pending = state.pending
            one_off = pending.pop(seq, None) if pending else None
            if one_off is None:
                self.stale -= 1
                return 0
            if not pending:
                state.pending = None
            when, trigger, job = one_off
            return self._admit(state, job, None, when, ts, trigger, now)
        if gen != state.gen:
            self.stale -= 1
            return 0
        slot = state.next_slot
        assert slot is not None
        job = state.job
        stop = job.stop
        last = stop is not None and ts >= stop.timestamp()  # stop is inclusive: nothing after
        following = None if last else _next_slot(job, slot)
        if following is not None:
            following_ts = following.timestamp()
            if following_ts <= now_ts:
                following = self._skip(job, slot, following, now)
                following_ts = following.timestamp() if following is not None else 0.0
        state.next_slot = following
        if following is not None:
            heappush(timeline, (following_ts, negprio, next(self._seq), state, gen))
        return self._admit(state, job, slot, slot, ts, SCHEDULE, now)

    def _take_due(self, now_ts: float) -> Iterator[_Entry]:
        """Take the entries due at `now_ts` off the timeline, in timeline order.

        One pop at a time while they are few; once the batch is large against the timeline
        (a burst), the rest is split off in one pass and sorted: a pop costs a dozen tuple
        comparisons, the split and the sort about one each. Lazy: the first entries are
        dispatched before a large batch is split.
        """
        timeline = self.timeline
        popped = 0
        while timeline and timeline[0][0] <= now_ts:
            if popped >= _POP_MAX and popped * 16 >= len(timeline):
                rest = [entry for entry in timeline if entry[0] > now_ts]
                batch = [entry for entry in timeline if entry[0] <= now_ts]
                heapify(rest)
                timeline[:] = rest
                batch.sort()  # all after the popped ones: those were the smallest
                yield from batch
                return
            popped += 1
            yield heappop(timeline)

    def _skip(self, job: Job, slot: datetime, missed: datetime, now: datetime) -> datetime | None:
        following = _next_slot(job, now)
        trigger = job.trigger
        count = 1
        if trigger is not None and following is not None:
            first, after = trigger.index_after(slot), trigger.index_after(now)
            if first is not None and after is not None:
                count = max(1, after - first)
        self.skipped += count
        log.warning(
            "job %r: slot %s ran %.3f s late; %d slot(s) from %s were skipped, next is %s",
            job.name,
            slot.isoformat(),
            (now - slot).total_seconds(),
            count,
            missed.isoformat(),
            following.isoformat() if following is not None else "none",
        )
        return following

    def _admit(
        self,
        state: JobState,
        job: Job,
        slot: datetime | None,
        due: datetime,
        due_ts: float,
        trigger: str,
        now: datetime,
    ) -> int:
        if trigger == SCHEDULE and state.scheduled is not None:
            self.coalesced += 1  # the run already waiting stands for this slot too
            return 0
        limit = job.max_instances
        if limit is not None and state.runs is not None and len(state.runs) >= limit:
            self.refused += 1
            self.ready.refuse(job, slot, trigger, now, "already running")
            return 0
        key = run_key(job.priority, due_ts, next(self._seq))
        self.ready.push(state, job, slot, due, key, trigger)
        return 1

    def _live(self, entry: _Entry) -> bool:
        state = entry[3]
        if entry[4] == _ONE_OFF:
            return state.pending is not None and entry[2] in state.pending
        return entry[4] == state.gen

    def skip_overdue(self, now: datetime) -> int:
        """Move scheduled slots before `now` to the first slot after `now` (after a restart:
        slots missed while stopped are not made up). One-off starts stay. Returns how many
        jobs moved."""
        now_ts = now.timestamp()
        timeline = self.timeline
        keep: list[_Entry] = []
        moved = 0
        while timeline and timeline[0][0] < now_ts:
            entry = heappop(timeline)
            state = entry[3]
            if not self._live(entry):
                self.stale -= 1
            elif entry[4] == _ONE_OFF:
                keep.append(entry)
            else:
                moved += 1
                slot = _next_slot(state.job, now)
                state.next_slot = slot
                if slot is not None:
                    keep.append((slot.timestamp(), entry[1], next(self._seq), state, state.gen))
        for entry in keep:
            heappush(timeline, entry)
        return moved

    def next_due(self, now: datetime) -> bool:
        """Whether a live timeline entry is due at `now`."""
        timeline = self.timeline
        now_ts = now.timestamp()
        while timeline and not self._live(timeline[0]):
            heappop(timeline)
            self.stale -= 1
        return bool(timeline) and timeline[0][0] <= now_ts

    def _maybe_compact(self) -> None:
        if self.stale > _COMPACT_MIN and self.stale * 2 > len(self.timeline):
            self.timeline = [entry for entry in self.timeline if self._live(entry)]
            heapify(self.timeline)
            self.stale = 0

    def drop_all(self, now: datetime, reason: str) -> int:
        """Every queued run and pending one-off ends NOT_STARTED with `reason`; the job
        schedules stay. Returns how many runs were dropped."""
        dropped = self.ready.drop_all(now, reason)
        for state in list(self.states.values()):
            if state.pending:
                dropped += len(state.pending)
                self._drop_pending(state, reason, now)
            self.forget_if_idle(state)
        return dropped

    # -- views ---------------------------------------------------------------------------------

    def pending_runs(self) -> list[QueuedRun]:
        """The pending one-off starts, earliest first."""
        runs = [
            QueuedRun(job.name, trigger, None, when, job.priority)
            for state in self.states.values()
            if state.pending
            for when, trigger, job in state.pending.values()
        ]
        runs.sort(key=lambda r: r.due)
        return runs

    def next_run(self, name: str) -> datetime | None:
        """Job `name`'s next start: its next slot, or an earlier pending one-off."""
        state = self.states.get(name)
        if state is None:
            return None
        candidates = [when for when, _, _ in (state.pending or {}).values()]
        if state.next_slot is not None:
            candidates.append(state.next_slot)
        return min(candidates, key=datetime.timestamp) if candidates else None


def _next_slot(job: Job, after: datetime) -> datetime | None:
    """``job.next_after(after)``; a trigger that raises is logged and ends the schedule."""
    try:
        return job.next_after(after)
    except Exception:
        log.exception("job %r: computing its next slot failed; it is not scheduled", job.name)
        return None
