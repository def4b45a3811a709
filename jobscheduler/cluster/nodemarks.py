"""What a node writes about history: missed ranges at start (`record_missed`) and retention
(`Retention`, `prune_history`). See `cluster.node`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..model.job import Job
from ..model.runid import RunIds
from ..policies.catchup import MAX_CATCH_UP
from ..policies.catchup import missed_slots as catch_up_slots
from ..state.base import StateStore
from ..state.records import RunState
from ..triggers.missed import missed_slots

__all__ = ["PendingMarks", "Retention", "prune_history", "record_gaps", "record_missed"]

log = logging.getLogger("jobscheduler.node")


@dataclass(frozen=True)
class Retention:
    """How long history is kept: runs started more than `max_age` ago go, and each job keeps
    at most its newest `keep_per_job` finished runs (running runs always stay). Applied by
    every node once an hour (`StateStore.prune`)."""

    max_age: timedelta = timedelta(days=30)
    keep_per_job: int = 1000

    def __post_init__(self) -> None:
        if self.max_age <= timedelta(0):
            raise ValueError(f"retention max_age must be positive, not {self.max_age}")
        if self.keep_per_job < 1:
            raise ValueError(f"retention keep_per_job must be at least 1, not {self.keep_per_job}")


_TICK = timedelta(microseconds=1)


def _missed_until(job: Job, after: datetime, now: datetime) -> datetime:
    """Where a job's missed range ends: at `now`, or, for a job with ``catch_up``, just before
    the first slot its catch-up runs make up (`latest`: the last missed slot; `all`: those in
    its window), so that no slot is both recorded missed and run, and the mark this moves
    to is where the catch-up (`policies/catchup.py`) starts from."""
    if job.catch_up == "none":
        return now
    limit = 1 if job.catch_up == "latest" else MAX_CATCH_UP
    made_up = catch_up_slots(job, after, now, window=job.catch_up_window, limit=limit)
    return made_up[0] - _TICK if made_up else now


def record_missed(store: StateStore, jobs: Iterable[Job], node: str, now: datetime) -> int:
    """One ``missed`` record per enabled scheduled job for its slots after its mark (or after
    its newest record's slot, if later: marks are written once per heartbeat) and before
    `now`, keyed by the first (`slot`, `last_slot`, the count in `reason`); the mark moves to
    the last. A job with no mark has missed nothing. Returns how many records were written.
    """
    marks = store.marks()
    ids = RunIds(lambda: now)
    written = 0
    for job in jobs:
        mark = marks.get(job.name)
        if mark is None or mark.last_slot is None or not job.enabled:
            continue
        after = mark.last_slot
        newest = store.history(job.name, limit=1)
        if newest:
            seen = newest[0].last_slot or newest[0].slot
            if seen is not None and seen > after:
                after = seen
        found = missed_slots(job, after, _missed_until(job, after, now))
        if found is None:
            continue
        reason = (
            f"{found.describe()} (from {found.first.isoformat()} to "
            f"{found.last.isoformat()}): no node was up"
        )
        if store.record(
            job.name,
            found.first,
            "schedule",
            next(ids),
            node=node,
            state=RunState.MISSED,
            started=now,
            ended=now,
            reason=reason,
            last_slot=found.last,
        ):
            written += 1
            log.warning("job %r: %s", job.name, reason)
        store.set_mark(job.name, last_slot=found.last)
    return written


_LOOK_BACK = timedelta(minutes=5)
"""How long before a slot a run of it may have started (a claim made ahead, a node whose
clock is ahead, within the skew limit of `cluster.skew`), to find it in the history."""


def record_gaps(
    store: StateStore,
    job: Job,
    first: datetime,
    last: datetime,
    *,
    node: str,
    cause: str,
    now: datetime,
) -> int:
    """``missed`` records for the slots of `job` from `first` to `last` (both included) that
    no node recorded (run, refused, or in a missed range): one record per unbroken stretch of
    them, keyed by its first slot (`slot`, `last_slot`, the count and `cause` in `reason`).
    A stretch whose first slot another node records meanwhile is left to it (the key is
    taken). Returns how many slots were recorded missed."""
    span = missed_slots(job, first - _TICK, last + _TICK)
    if span is None:
        return 0
    recorded: set[datetime] = set()
    ranges: list[tuple[datetime, datetime]] = []
    limit = 2 * span.count + 1000
    for run in store.history(job.name, limit=limit, since=first - _LOOK_BACK):
        if run.slot is None:
            continue
        if run.state is RunState.MISSED and run.last_slot is not None:
            ranges.append((run.slot, run.last_slot))
        recorded.add(run.slot)
    stretches: list[list[datetime]] = []
    previous: datetime | None = None
    slot: datetime | None = span.first
    while slot is not None and slot <= last:
        done = slot in recorded or any(a <= slot <= b for a, b in ranges)
        if not done:
            if stretches and stretches[-1][-1] == previous:
                stretches[-1].append(slot)
            else:
                stretches.append([slot])
        previous = slot
        slot = job.next_after(slot)
    ids = RunIds(lambda: now)
    written = 0
    for stretch in stretches:
        start, end, count = stretch[0], stretch[-1], len(stretch)
        plural = "" if count == 1 else "s"
        reason = (
            f"{count} slot{plural} missed (from {start.isoformat()} to {end.isoformat()}): {cause}"
        )
        if store.record(
            job.name,
            start,
            "schedule",
            next(ids),
            node=node,
            state=RunState.MISSED,
            started=now,
            ended=now,
            reason=reason,
            last_slot=end,
        ):
            written += count
            log.info("job %r: %s", job.name, reason)
    return written


class PendingMarks:
    """The jobs' marks moved since the last heartbeat: each job's latest slot handled, written
    at the next one (`flush`) in one `StateStore.set_marks` for them all, however many jobs
    ran (1,000 jobs every second: one statement a beat, not 1,000). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, datetime] = {}

    def moved(self, job: str, slot: datetime) -> None:
        """A run of `job` for `slot` ended (an earlier slot than one noted leaves it)."""
        with self._lock:
            self._note(job, slot)

    def moved_many(self, ends: Iterable[tuple[str, datetime]]) -> None:
        """`moved` for each (job, slot) of a batch of ended runs: one lock round."""
        with self._lock:
            for job, slot in ends:
                self._note(job, slot)

    def _note(self, job: str, slot: datetime) -> None:
        """`moved`'s rule, the lock held."""
        known = self._slots.get(job)
        if known is None or slot > known:
            self._slots[job] = slot

    def flush(self, store: StateStore) -> None:
        """Write the marks noted; a store that fails raises, and they are kept for the next
        flush (merged with the slots noted meanwhile)."""
        with self._lock:
            slots, self._slots = self._slots, {}
        if not slots:
            return
        try:
            store.set_marks(slots)
        except Exception:
            self.moved_many(slots.items())
            raise


def mark_unmarked(store: StateStore, jobs: Iterable[Job], now: datetime) -> int:
    """Give every enabled job that has slots (interval, cron, calendar, a one-off) and no mark
    yet the mark `now`: handled up to here. From then on a downtime shows as a missed range,
    and `catch_up` makes it up — for a one-off too, whose only slot would otherwise never
    leave a mark if no node was up at it. Returns how many marks were written."""
    marks = store.marks()
    unmarked = {
        job.name: now
        for job in jobs
        if job.name not in marks and job.enabled and job.trigger is not None
    }
    store.set_marks(unmarked)  # one statement for all (a first start with 1,000 jobs)
    return len(unmarked)


def prune_history(store: StateStore, retention: Retention, now: datetime, node: str) -> int:
    """`StateStore.prune` as `retention` says; a store that fails is logged (0)."""
    try:
        gone = store.prune(older_than=now - retention.max_age, keep_per_job=retention.keep_per_job)
    except Exception as exc:
        log.error("node %s: pruning the history failed: %s", node, exc)
        return 0
    if gone:
        log.info("node %s: pruned %d old run records", node, gone)
    return gone
