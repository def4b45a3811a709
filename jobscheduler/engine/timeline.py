"""`Timeline`: the processor's bookkeeping of when runs start — no threads, no clock.

The *timeline* is a heap of int keys (`keys.timeline_key`: instant, priority, sequence,
the job's state, one-off or not): each job's next slot, and each one-off start (``run_now``,
``run_at``). A job's state keeps the key of its live entry; entries are invalidated lazily:
changing, pausing or removing a job gives its state another key, and an entry that is no
longer its state's key is skipped when it reaches the top (a one-off entry is live while its
sequence is still in the job's ``pending``). Changing a job is O(log n); the heap is compacted
when more than half of it is stale. Due entries move to the `ReadyRuns`, under the limits.

States are found from keys through a table indexed by the key's index bits; an index is
reused once its state is forgotten (an old entry then names a state whose key differs, and is
stale).

Every method is called with the owner's lock held; `JobProcessor` owns the lock, the threads
and the clock. Runs that cannot start are reported through `notices`, a queue of
``(job, Execution)`` with event NOT_STARTED, for the owner to hand to its ``on_finished``.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, tzinfo
from heapq import heapify, heappop, heappush, nsmallest

from ..model.job import Job
from ..policies import overlap
from ..triggers.base import slots_between
from .jobstate import JobState
from .keys import (
    DUE_OFFSET,
    DUE_SPAN,
    EPOCH,
    INDEX_FIELD,
    INDEX_SHIFT,
    MICROSECOND,
    NEVER,
    ONE_OFF,
    RUN_SEQ_SHIFT,
    SEQ_MASK,
    SEQ_SHIFT,
    SUCCESSOR_KEEPS,
    TIME_OFFSET,
    TIME_SHIFT,
    due_bound,
    index_of,
    instant,
    micros,
    off_timeline,
    seq_of,
    successor_key,
    time_of,
    timeline_key,
)
from .ready import SCHEDULE, ReadyRuns, Run, own_run_id

__all__ = ["Timeline"]

log = logging.getLogger("jobscheduler.processor")

_INF = float("inf")
# Runs whose claim decides their limit once `skip_in_claims` (never refused here): a
# submitted run goes back to the queue, a rerun waits (`cluster.limits`).
_CLAIM_DECIDES = frozenset({"submit", "rerun"})
# A backfill's run: held to one at a time by an `overlap` policy too (`cluster.backfill`).
BACKFILL = "backfill"
_COMPACT_MIN = 1024
_POP_MAX = 64  # due entries popped one by one before a large batch is split off at once
_WAKE_EVERY = 4  # runs made ready between `on_ready` calls during a batch


class Timeline:
    """The timeline of next slots and one-off starts, feeding `ready` (see module notes)."""

    def __init__(self, ids: Iterator[str]) -> None:
        self._seq = itertools.count()
        self.states: dict[str, JobState] = {}
        self.table: list[JobState | None] = []  # by the index in their keys
        self._free: list[int] = []  # indices of forgotten states, to reuse
        self.timeline: list[int] = []
        self.ready = ReadyRuns(ids)
        self.notices = self.ready.notices
        self.stale = 0
        self.coalesced = 0
        self.refused = 0
        self.skipped = 0
        self._on_ready: Callable[[int], object] | None = None  # see `due`
        # Runs held by the `overlap` policy, one per job: (its state, the definition, the
        # slot, the slot in µs); and what stops a job's running runs (`overlap: replace`).
        self.held: dict[str, tuple[JobState, Job, datetime, int]] = {}
        self._stop_runs: Callable[[str, str], object] | None = None
        # `skip_in_claims`: a slot of an `overlap` policy is decided by its claim, not here.
        self.skips_in_claims = False
        # The top entry's slot as a datetime, and its job's Activity, made while the owner
        # waits for it, so that dispatching it at its instant builds neither (`prepare_next`).
        self._prepared: tuple[int, datetime] | None = None
        # The last slot made by a dispatch (µs, zone, datetime): the slots of a burst are due
        # at one instant, and share it (an immutable value; ~2 µs a slot to make).
        self._shared: tuple[int, tzinfo, datetime] | None = None
        # The last stop a dispatch read, in µs: a burst's one-off jobs (`start` = `stop`) share
        # theirs, and a datetime to µs costs more than comparing two UTC datetimes.
        self._stop_us: tuple[datetime, int] | None = None

    def connect(
        self, on_ready: Callable[[int], object], stop_runs: Callable[[str, str], object]
    ) -> None:
        """Hand the timeline what it calls: `on_ready(count)` as runs become ready during a
        batch (see `due`), and `stop_runs(name, reason)` for `overlap: replace` (it takes the
        owner's lock: it is called from a thread of its own)."""
        self._on_ready = on_ready
        self._stop_runs = stop_runs

    def skip_in_claims(self) -> None:
        """From now on, a scheduled slot of a job whose `overlap` is not ``allow`` is not
        skipped, held or made to replace here for this process's runs: its claim decides,
        over the runs of every node sharing the store (`cluster.limits`: the skipped records
        of a burst written together; one slot waiting per job across the cluster). So does
        the claim of a submitted run or a rerun for ``max_instances``."""
        self.skips_in_claims = True

    # -- definitions -----------------------------------------------------------------------

    def put(self, jobs: Iterable[Job], now: datetime) -> float:
        """Add or update `jobs`; returns the earliest instant newly put on the timeline.

        A new (or resumed, or rescheduled) job's next slot is its first slot strictly after
        `now`. A job whose schedule is unchanged keeps its next slot, even one already due: an
        update never loses or repeats a slot. Pausing (``enabled=False``) takes the job off
        the timeline and drops its queued scheduled runs (NOT_STARTED "job paused").
        """
        keys: list[int] = []
        for job in jobs:
            key = self._put(job, now)
            if key is not None:
                keys.append(key)
        if not keys:
            return _INF
        timeline = self.timeline
        if len(keys) * 4 > len(timeline):
            timeline.extend(keys)
            heapify(timeline)
        else:
            for key in keys:
                heappush(timeline, key)
        self._maybe_compact()
        return time_of(min(keys)) / 1e6

    def _put(self, job: Job, now: datetime) -> int | None:
        state = self.states.get(job.name)
        kept: int | None = None  # the next slot kept, in µs
        if state is None:
            state = self._new_state(job, True)
        else:
            old = state.job
            if state.registered and state.on_timeline and old.same_schedule(job):
                kept = time_of(state.key)
            state.register(job)
            if kept is not None and job.enabled and old.priority == job.priority:
                return None  # its timeline entry stays valid as it is
            self._invalidate(state)
            if not job.enabled:
                self.ready.cancel(state, "job paused", now, only_schedule=True)
        if not job.enabled:
            return None
        if kept is None:
            slot = _next_slot(job, now)
            if slot is None:
                return None
            kept = micros(slot)
        key = timeline_key(kept, job.priority, next(self._seq), state.index)
        state.set_key(key)
        return key

    def _new_state(self, job: Job, registered: bool) -> JobState:
        table = self.table
        index = self._free.pop() if self._free else len(table)
        state = JobState(job, registered, off_timeline(index))
        if index == len(table):
            table.append(state)
        else:
            table[index] = state
        self.states[job.name] = state
        return state

    def remove(self, name: str, now: datetime, reason: str = "job removed") -> bool:
        """Take job `name` off the timeline; its queued runs and pending one-offs (also those
        of a job known only through them) end NOT_STARTED with `reason`; its running runs go
        on. False if it was not registered."""
        state = self.states.get(name)
        if state is None:
            return False
        registered = state.registered
        if registered:
            state.unregister()
            self._invalidate(state)
        self.ready.cancel(state, reason, now, only_schedule=False)
        self._drop_pending(state, reason, now)
        self.forget_if_idle(state)
        return registered

    def registered(self) -> list[Job]:
        return [s.job for s in self.states.values() if s.registered]

    def _invalidate(self, state: JobState) -> None:
        if state.on_timeline:
            state.set_key(off_timeline(state.index))
            self.stale += 1

    def forget_if_idle(self, state: JobState) -> None:
        if not state.registered and state.idle and self.states.get(state.job.name) is state:
            del self.states[state.job.name]
            index = state.index
            self.table[index] = None
            self._free.append(index)

    # -- one-off starts --------------------------------------------------------------------

    def add_one_off(self, job: Job, when: datetime, trigger: str) -> float:
        """One run of `job` at `when` (trigger "run_now", "dependence"…); returns its instant."""
        state = self.states.get(job.name)
        if state is None:
            state = self._new_state(job, False)
        act = state.activity()
        seq = next(self._seq)
        key = timeline_key(micros(when), job.priority, seq, state.index, ONE_OFF)
        act.add_pending(seq_of(key), when, trigger, job)
        heappush(self.timeline, key)
        return when.timestamp()

    def cancel_pending(self, name: str, now: datetime, reason: str) -> int:
        """Drop the pending one-off starts of job `name`, silently; returns how many. A start
        claimed already (its trigger brings its run id: a submitted run claimed with its queue
        row) is reported NOT_STARTED with `reason` instead, so its claim and its row end; so
        is a backfill's run (its backfill waits for its slot's answer)."""
        state = self.states.get(name)
        act = state.act if state is not None else None
        if state is None or act is None or not act.pending:
            return 0
        count = len(act.pending)
        for _when, trigger, job in act.pending.values():
            if own_run_id(trigger) is not None or trigger == BACKFILL:
                self.ready.refuse(job, None, trigger, now, reason)
        act.clear_pending()
        self.stale += count
        self.forget_if_idle(state)
        return count

    def _drop_pending(self, state: JobState, reason: str, now: datetime) -> None:
        act = state.act
        if act is None or not act.pending:
            return
        for _when, trigger, job in act.pending.values():
            self.ready.refuse(job, None, trigger, now, reason)
        self.stale += len(act.pending)
        act.clear_pending()

    # -- dispatch ----------------------------------------------------------------------------

    def due(self, now: datetime, limit: int | None = None) -> tuple[int, float | None]:
        """Move every timeline entry due at `now` to the ready runs (at most `limit`
        entries, at most `_POP_MAX`: the others stay on the timeline, and the delay returned
        is then 0 or less).

        Returns (runs made ready, seconds until the next entry or None when there is none).
        A dispatched slot's successor is ``next_after(slot)``, anchored; if that is already
        past (the thread was held up for several intervals) the missed slots are skipped to
        the first slot after `now` and counted in `skipped`. `on_ready`, when set, hears of
        the runs made ready while a large batch is still being moved (so workers start them
        at once), every `_WAKE_EVERY` runs; the caller learns of the rest from the result.
        """
        now_us = (now - EPOCH) // MICROSECOND  # `micros` and `due_bound`, inlined: hot
        bound = (now_us + 1 + TIME_OFFSET) << TIME_SHIFT
        timeline = self.timeline
        pushed = 0
        if timeline and timeline[0] < bound:
            on_ready = self._on_ready
            told = 0
            keys = self._take_due(bound)
            left = _POP_MAX if limit is None or limit > _POP_MAX else limit
            try:
                for key in keys:
                    pushed += self._dispatch(key, now, now_us)
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
                for key in list(keys):
                    heappush(timeline, key)
                if on_ready is not None and pushed > told:
                    on_ready(pushed - told)
                raise
        while timeline:
            top = timeline[0]
            if self._live(top):
                return pushed, (time_of(top) - now_us) / 1e6
            heappop(timeline)
            self.stale -= 1
        return pushed, None

    def prepare_next(self) -> None:
        """Make what dispatching the top entry needs, ahead of its instant. Called by the
        owner when it is about to wait for that entry (after `due`, which leaves a live entry
        on top): the wait pays for these instead of the run's start (the first datetime a
        process builds from a timestamp costs ~10 µs, an object made cold 5–20 µs)."""
        if not self.timeline:
            return
        key = self.timeline[0]
        prepared = self._prepared
        if (prepared is not None and prepared[0] == key) or key & ONE_OFF:
            return
        state = self.table[index_of(key)]
        if state is None or state.key != key:
            return  # stale: `due` was not called since it went stale
        self._prepared = (key, instant(time_of(key), state.job.zone))
        state.activity()  # it is about to have a run

    def _dispatch(self, key: int, now: datetime, now_us: int) -> int:
        """Dispatch one due timeline entry; returns the runs made ready (0 or 1).

        The key arithmetic is inline (see `keys`): this is the path of a run that is due."""
        state = self.table[(key & INDEX_FIELD) >> INDEX_SHIFT]
        due_us = (key >> TIME_SHIFT) - TIME_OFFSET
        if key & ONE_OFF:
            act = state.act if state is not None else None
            one_off = act.pop_pending(seq_of(key)) if act is not None else None
            if state is None or one_off is None:
                self.stale -= 1
                return 0
            when, trigger, job = one_off
            return self._admit(state, job, None, when, due_us, trigger, now)
        if state is None or state.key != key:
            self.stale -= 1
            return 0
        job = state.job
        prepared = self._prepared
        shared = self._shared
        zone = job.zone
        if prepared is not None and prepared[0] == key:
            slot = prepared[1]
            self._prepared = None
        elif shared is not None and shared[0] == due_us and shared[1] is zone:
            slot = shared[2]  # a burst's slots share their instant: one datetime for all
        else:
            slot = instant(due_us, zone)
            self._shared = (due_us, zone, slot)
        stop = job.stop_utc
        last = False
        if stop is not None:
            stop_us = self._stop_us
            if stop_us is None or stop_us[0] != stop:
                stop_us = self._stop_us = (stop, (stop - EPOCH) // MICROSECOND)
            last = due_us >= stop_us[1]  # stop is inclusive: no slot after it
        following = None if last else _next_slot(job, slot)
        if following is not None:
            following_us = (following - EPOCH) // MICROSECOND
            if following_us <= now_us:
                following = self._skip(job, slot, following, now)
                following_us = micros(following) if following is not None else 0
        if following is not None:
            successor = (
                ((following_us + TIME_OFFSET) << TIME_SHIFT)
                | (key & SUCCESSOR_KEEPS)
                | ((next(self._seq) & SEQ_MASK) << SEQ_SHIFT)
            )  # `successor_key`
            state.set_key(successor)
            heappush(self.timeline, successor)
        else:
            state.set_key(NEVER | (key & INDEX_FIELD))  # `off_timeline`
        return self._admit(state, job, slot, slot, due_us, SCHEDULE, now)

    def _take_due(self, bound: int) -> Iterator[int]:
        """Take the entries below `bound` (due) off the timeline, in timeline order.

        One pop at a time while they are few; once the batch is large against the timeline
        (a burst), the rest is split off in one pass and sorted: a pop costs a dozen
        comparisons, the split and the sort about one each. Lazy: the first entries are
        dispatched before a large batch is split.
        """
        timeline = self.timeline
        popped = 0
        while timeline and timeline[0] < bound:
            if popped >= _POP_MAX and popped * 16 >= len(timeline):
                rest = [key for key in timeline if key >= bound]
                batch = [key for key in timeline if key < bound]
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
            count = max(1, slots_between(trigger, slot, now))
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
        due_us: int,
        trigger: str,
        now: datetime,
    ) -> int:
        act = state.act
        if act is not None:
            # A slot of a job with an `overlap` policy whose claim decides (`skip_in_claims`):
            # queued as any, its claim skips, queues or replaces if the job is busy on any
            # node, as for a run elsewhere (`cluster.limits`: one waiting slot per cluster);
            # so does a submitted run's or a rerun's claim for ``max_instances``.
            claimed = self.skips_in_claims and (
                (trigger == SCHEDULE and job.overlap != "allow") or trigger in _CLAIM_DECIDES
            )
            if act.runs and trigger == SCHEDULE and job.overlap != "allow" and not claimed:
                held = self.held and job.name in self.held  # and its end not reported
                released = self.release(job.name, now) if held else 0
                if slot is not None and overlap.is_busy(job, len(act.runs)):
                    return released + self._busy_slot(state, job, slot, due_us, now)
            if trigger == SCHEDULE and act.scheduled is not None:
                self.coalesced += 1  # the run already waiting stands for this slot too
                return 0
            limit = job.max_instances
            if limit is None and trigger == BACKFILL and job.overlap != "allow":
                limit = 1  # a backfill never runs beside a run of such a job (it waits)
            if limit is not None and len(act.runs) >= limit and not claimed:
                self.refused += 1
                self.ready.refuse(job, slot, trigger, now, "already running")
                return 0
        # `run_key`, inline: the path of every run made ready.
        key = ((DUE_OFFSET + due_us - job.priority * DUE_SPAN) << RUN_SEQ_SHIFT) + next(self._seq)
        self.ready.push(state, job, slot, due, key, trigger)
        return 1

    # -- runs held by `overlap` (see `policies.overlap`) -----------------------------------

    def _busy_slot(
        self, state: JobState, job: Job, slot: datetime, due_us: int, now: datetime
    ) -> int:
        """A scheduled `slot` of the busy `job` (its policy is not ``allow``); returns the runs
        queued (always 0: a run is held, or the slot skipped)."""
        name = job.name
        action = overlap.on_busy(job, name in self.held)
        if action == overlap.SKIP:
            self.ready.refuse(job, slot, SCHEDULE, now, overlap.SKIPPED)
            return 0
        self.held[name] = (state, job, slot, due_us)
        if action == overlap.REPLACE and self._stop_runs is not None:
            # Stopping takes the lock held here: a short thread does it once it is free
            # (`replace` is rare; a thread start does not wait for the lock).
            threading.Thread(
                target=self._stop_runs,
                args=(name, overlap.REPLACED),
                name="jobscheduler-replace",
                daemon=True,
            ).start()
        return 0

    def release(self, name: str, now: datetime) -> int:
        """Queue job `name`'s held run if the job is no longer busy; returns the runs queued."""
        held = self.held.get(name)
        if held is None:
            return 0
        state, job, slot, due_us = held
        act = state.act
        if act is not None and overlap.is_busy(job, len(act.runs)):
            return 0
        del self.held[name]
        current = state.job
        if not state.registered or not current.enabled:
            reason = "job removed" if not state.registered else "job paused"
            self.ready.refuse(job, slot, SCHEDULE, now, reason)
            return 0
        return self._admit(state, current, slot, slot, due_us, SCHEDULE, now)

    def _drop_held(self, now: datetime, reason: str) -> int:
        """Every held run ends NOT_STARTED with `reason`; returns how many."""
        held, self.held = self.held, {}
        for _state, job, slot, _due in held.values():
            self.ready.refuse(job, slot, SCHEDULE, now, reason)
        return len(held)

    def _live(self, key: int) -> bool:
        state = self.table[index_of(key)]
        if state is None:
            return False
        if key & ONE_OFF:
            act = state.act
            return act is not None and act.pending is not None and seq_of(key) in act.pending
        return state.key == key

    def skip_overdue(self, now: datetime) -> int:
        """Move scheduled slots before `now` to the first slot after `now` (after a restart:
        slots missed while stopped are not made up). One-off starts stay. Returns how many
        jobs moved."""
        bound = due_bound(micros(now) - 1)  # before `now`
        timeline = self.timeline
        keep: list[int] = []
        moved = 0
        while timeline and timeline[0] < bound:
            key = heappop(timeline)
            if not self._live(key):
                self.stale -= 1
            elif key & ONE_OFF:
                keep.append(key)
            else:
                moved += 1
                state = self.table[index_of(key)]
                assert state is not None  # live
                slot = _next_slot(state.job, now)
                if slot is None:
                    state.set_key(off_timeline(index_of(key)))
                    continue
                successor = successor_key(key, micros(slot), next(self._seq))
                state.set_key(successor)
                keep.append(successor)
        for key in keep:
            heappush(timeline, key)
        return moved

    def next_due(self, now: datetime) -> bool:
        """Whether a live timeline entry is due at `now`."""
        timeline = self.timeline
        while timeline and not self._live(timeline[0]):
            heappop(timeline)
            self.stale -= 1
        return bool(timeline) and timeline[0] < due_bound(micros(now))

    def _maybe_compact(self) -> None:
        if self.stale > _COMPACT_MIN and self.stale * 2 > len(self.timeline):
            self.timeline = [key for key in self.timeline if self._live(key)]
            heapify(self.timeline)
            self.stale = 0

    def drop_all(self, now: datetime, reason: str) -> int:
        """Every queued run and pending one-off ends NOT_STARTED with `reason`; the job
        schedules stay. Returns how many runs were dropped."""
        dropped = self.ready.drop_all(now, reason) + self._drop_held(now, reason)
        for state in list(self.states.values()):
            act = state.act
            if act is not None and act.pending:
                dropped += len(act.pending)
                self._drop_pending(state, reason, now)
            self.forget_if_idle(state)
        return dropped

    # -- views ---------------------------------------------------------------------------------

    def pending_runs(self) -> list[Run]:
        """The pending one-off starts (fresh `Run` objects), earliest first."""
        runs = [
            Run(job, state, None, when, trigger)
            for state in self.states.values()
            if state.act is not None and state.act.pending
            for when, trigger, job in state.act.pending.values()
        ]
        runs.sort(key=lambda r: r.due)
        return runs

    def waits(self, name: str, slot: datetime) -> bool:
        """Whether a run of job `name`'s `slot` is ready or held by `overlap` (False for a job
        the timeline no longer knows)."""
        state = self.states.get(name)
        if state is None:
            return False
        act = state.act
        if act is not None and act.scheduled_slot == slot:
            return True
        held = self.held.get(name)
        return held is not None and held[2] == slot

    def busy_here(self, job: Job) -> bool:
        """Whether `job`'s runs queued or running in this process reach its limit (cheap: a
        claim ahead of a slot of a limited job asks, see `ahead`)."""
        state = self.states.get(job.name)
        act = state.act if state is not None else None
        return act is not None and overlap.is_busy(job, len(act.runs))

    def upcoming(
        self, after_us: int, until_us: int
    ) -> tuple[list[tuple[Job, datetime]], int | None, int | None]:
        """The live scheduled entries due in (`after_us`, `until_us`] (µs) as (job, slot); the
        instant (µs) of the soonest entry up to `until_us` (looked at before, or now), and of
        the first one after it (None: none).

        Walks the heap from its top and not below a live entry later than `until_us` (its
        children are later still): a look at the next fraction of a second costs what is
        due in it, not the whole timeline. A stale entry's children are walked (one of them
        may be the next live entry)."""
        timeline = self.timeline
        found: list[tuple[Job, datetime]] = []
        soonest: int | None = None
        following: int | None = None
        size = len(timeline)
        stack = [0] if size else []
        while stack:
            at = stack.pop()
            key = timeline[at]
            when = time_of(key)
            state = self._scheduled(key)
            if state is not None:
                if when > until_us:
                    following = when if following is None else min(following, when)
                    continue
                soonest = when if soonest is None else min(soonest, when)
                if when > after_us:
                    found.append((state.job, instant(when, state.job.zone)))
            child = 2 * at + 1
            stack.extend(range(child, min(child + 2, size)))
        return found, soonest, following

    def _scheduled(self, key: int) -> JobState | None:
        """The state of the job whose live scheduled entry `key` is; None for a one-off
        entry or a stale one."""
        if key & ONE_OFF:
            return None
        state = self.table[index_of(key)]
        return state if state is not None and state.key == key else None

    def next_run(self, name: str) -> datetime | None:
        """Job `name`'s next start: its next slot, or an earlier pending one-off."""
        state = self.states.get(name)
        if state is None:
            return None
        act = state.act
        candidates = [when for when, _, _ in act.pending.values()] if act and act.pending else []
        if state.on_timeline:
            candidates.append(instant(time_of(state.key), state.job.zone))
        return min(candidates, key=datetime.timestamp) if candidates else None

    def soonest(self, count: int) -> list[tuple[datetime, str]]:
        """The `count` jobs that start soonest, (when, name) earliest first, each job once
        at its `next_run`: one pass over the states, without a datetime per job."""
        # A key orders by its instant first: the smallest keys are the soonest slots.
        keys = nsmallest(count, [s.key for s in self.states.values() if s.on_timeline])
        table = self.table
        names = {state.job.name for key in keys if (state := table[index_of(key)]) is not None}
        names.update(
            s.job.name for s in self.states.values() if s.act is not None and s.act.pending
        )
        found = [(when, name) for name in names if (when := self.next_run(name)) is not None]
        found.sort(key=lambda entry: entry[0].timestamp())
        return found[:count]


def _next_slot(job: Job, after: datetime) -> datetime | None:
    """``job.next_after(after)``; a trigger that raises is logged and ends the schedule."""
    try:
        return job.next_after(after)
    except Exception:
        log.exception("job %r: computing its next slot failed; it is not scheduled", job.name)
        return None
