"""`MemoryStateStore`: the state store of one process, bounded, lost when it exits."""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..clock import Clock, SystemClock
from .checked import CheckedStore, Claims, LimitedClaims
from .memory_pauses import MemoryPauses
from .memory_shared import MemoryShared
from .memoryrow import Row
from .records import RunKey, RunRecord, RunState, lost_reason, queue_state_of, record_values
from .values import (
    BUSY,
    CLAIMED,
    DEFAULT_HISTORY_LIMIT,
    SKIPPED_BY_LIMIT,
    TAKEN,
    WAITING,
    WaitingRun,
    Within,
)

__all__ = ["DEFAULT_HISTORY_LIMIT", "DEFAULT_OUTPUT_LIMIT", "MemoryStateStore"]

# A record's output is kept as the run kept it (its job's output_limit, 64 KiB by default), so
# memory is bounded by the records kept times that; `output_limit` may bound it further.
DEFAULT_OUTPUT_LIMIT: int | None = None

_RUNNING = RunState.RUNNING

_POST_BATCH = 64
"""Posted finishes beyond which a poster waits for the lock to write them."""

# A posted finish: the arguments of `MemoryStateStore._write_finish`.
_Finish = tuple[str, RunState, datetime, int | None, str | None, str, int | None, datetime | None]

# A kept run: the fields of its RunRecord, in a `Row` (changed in place when it finishes).
_Entry = Row


class MemoryStateStore(MemoryShared, MemoryPauses, CheckedStore):
    """Runs kept in this process's memory: claims, outcomes, a bounded history.

    - **Claims** succeed unless the run's key was already taken (see `StateStore`): within
      one process a slot runs at most once. The store remembers the keys of the records it
      keeps (running ones and the kept history); a slot older than every kept record could be
      claimed again, which one process never asks for (its slots only move forward). It does
      not see other processes: two schedulers sharing nothing run each slot twice, which only
      a shared store prevents.
    - **Memory is bounded**: at most `limit` finished records in all and `per_job` (default:
      `limit`) of each job, each with the output its run kept (its job's ``output_limit``),
      or at most `output_limit` characters of it if given (the end is kept). When the whole
      is full, the oldest record of the job holding the most goes, so a busy job cannot push
      a quiet job's last runs out. Running runs are kept until they
      finish (the workers bound how many there are) and do not count.
    - Thread-safe: one lock, held briefly by each write but `claim`, and by a `history` call
      while it filters, sorts and copies the kept runs (at most `limit`, plus the running
      ones). `claim` takes no lock: it runs on every worker right before its run, and workers
      queued on one lock behind whichever lost the GIL holding it (a burst of 10,000 runs
      made up to 15,000 context switches instead of ~250). Its key is taken with
      ``dict.setdefault``, one atomic test-and-set under the GIL; the code holding the lock
      walks copies of the kept runs (``_snapshot``), never the dict a claim may grow. A claim
      racing `close` may still be kept (it counts as made before the close).
    - **Finishes not waited for** (``finish(wait=False)``, a run that claimed) are written
      at once when the lock is free, else posted without it and written together by
      whichever thread next takes it: a poster that finds it free, one that takes it anyway
      every `_POST_BATCH` posts, and every read and write before its own work, so whatever
      reads through the store sees them. Ten workers finishing runs no longer queue up on
      the lock one run at a time.
    - Its clock (`now`, heartbeats, leases, the queue's aging) is `clock` (default: the
      system clock), so tests drive it with a `FakeClock`. Nodes, marks, the queue, the
      outbox and kill requests are kept too (``memory_shared.py``), unbounded but for `prune`.
    """

    in_process = True  # see `StateStore.in_process`

    def __init__(
        self,
        limit: int = DEFAULT_HISTORY_LIMIT,
        *,
        per_job: int | None = None,
        output_limit: int | None = DEFAULT_OUTPUT_LIMIT,
        clock: Clock | None = None,
    ) -> None:
        _check_count("limit", limit, 1)
        if per_job is not None:
            _check_count("per_job", per_job, 1)
        if output_limit is not None:
            _check_count("output_limit", output_limit, 0)
        self._limit = limit
        self._per_job = limit if per_job is None else per_job
        self._output_limit = output_limit
        self._lock = threading.Lock()
        # Every kept run (running and finished) by run id, in the order first written; each
        # as a `Row` of its fields (a RunRecord is made from it when history is read).
        self._runs: dict[str, _Entry] = {}
        # The keys of kept runs of slots; a run outside the schedule is keyed by its id (above).
        self._slots: dict[RunKey, str] = {}
        # Per job: its kept finished records, oldest first.
        self._finished: dict[str, list[_Entry]] = {}
        # Jobs by how many finished records they hold (ordered: the first to reach a size
        # goes first among equals); `_largest` is the highest size held.
        self._sizes: dict[int, OrderedDict[str, None]] = {}
        self._largest = 0
        self._count = 0
        self._closed = False
        self._clock: Clock = SystemClock() if clock is None else clock
        # Posted finishes (see the class notes): the arguments of `_write_finish`, in order.
        self._posted: deque[_Finish] = deque()
        # Per job: its one waiting slot (`wait_in_line`); by run id: reruns waiting for room.
        self._waiting: dict[str, WaitingRun] = {}
        self._waiting_reruns: dict[str, WaitingRun] = {}
        self._init_shared()
        self._init_pauses()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def per_job(self) -> int:
        return self._per_job

    @property
    def output_limit(self) -> int | None:
        return self._output_limit

    # -- writes --------------------------------------------------------------------------

    def _claim(
        self,
        job: str,
        slot: datetime | None,
        trigger: str,
        run_id: str,
        node: str,
        attempt: int,
        started: datetime,
    ) -> bool:
        # No lock (see the class notes): every worker claims right before its run, and ten
        # workers taking one lock queued up behind whichever lost the GIL while holding it.
        # `setdefault` is one atomic test-and-set of the key under the GIL.
        if self._closed:
            self._open()  # (raises: asked only when closed, this runs for every run)
        entry = Row(run_id, job, slot, trigger, attempt, node, started)
        key = None if slot is None else (job, slot, attempt)
        runs = self._runs
        if run_id in runs:
            return False
        if key is None:
            return runs.setdefault(run_id, entry) is entry
        if self._slots.setdefault(key, run_id) is not run_id:
            return False
        if runs.setdefault(run_id, entry) is not entry:  # the same run id, claimed meanwhile
            self._free_key(key, run_id)
            return False
        return True

    def _claim_many(self, claims: Claims) -> list[bool]:
        claim = self._claim
        return [claim(*c) for c in claims]

    def _claim_within(
        self,
        job: str,
        slot: datetime | None,
        trigger: str,
        run_id: str,
        node: str,
        attempt: int,
        started: datetime,
        limit: int,
        skip: str | None,
    ) -> Within:
        # Under the lock, unlike `claim`: every claim of a job with a limit comes here, so
        # two of them never both pass the count. The count walks the kept runs: a claim of
        # a job with a limit is rare against the runs of others (and a process alone on
        # this store decides its limits in its engine, before it asks).
        with self._lock:
            self._open()
            self._write_posted()
            key = None if slot is None else (job, slot, attempt)
            if run_id in self._runs or (key is not None and key in self._slots):
                return TAKEN
            live = sum(1 for e in list(self._runs.values()) if e.job == job and e.state is _RUNNING)
            live += self._waiting_other(job, run_id)
            if live < limit:
                return (
                    CLAIMED
                    if self._claim(job, slot, trigger, run_id, node, attempt, started)
                    else TAKEN
                )
            if skip is None:
                return BUSY
            values = record_values(
                run_id, job, slot, trigger, attempt, node, RunState.SKIPPED, started, started,
                None, skip,
            )  # fmt: skip
            entry = Row.of(values)
            if key is not None and self._slots.setdefault(key, run_id) is not run_id:
                return TAKEN
            self._runs[run_id] = entry
            self._keep(entry)
            return SKIPPED_BY_LIMIT

    def _claim_many_within(self, claims: LimitedClaims, yielding: bool) -> list[Within]:
        # One lock for everything: a claim is never left to another one (`yielding` unused).
        return [self._claim_within(*c) for c in claims]

    def _waiting_other(self, job: str, run_id: str) -> int:
        """1 if a slot of `job` other than `run_id`'s waits and is in force (lock held)."""
        waiting = self._waiting.get(job)
        if waiting is None or waiting.run_id == run_id:
            return 0
        return 1 if self._in_force(waiting) else 0

    def _in_force(self, waiting: WaitingRun) -> bool:
        """Whether `waiting` still waits: its run has not claimed, its node is up (lock
        held)."""
        if waiting.run_id in self._runs:
            return False
        node = self._nodes.get(waiting.node)
        return node is not None and node.state == "up"

    def _wait_in_line(
        self,
        job: str,
        slot: datetime | None,
        run_id: str,
        node: str,
        started: datetime,
        skip: str,
    ) -> Within:
        with self._lock:
            self._open()
            self._write_posted()
            waiting = self._waiting.get(job)
            if waiting is not None and not self._in_force(waiting):
                waiting = None  # claimed since, or its node is gone: not in force
            if waiting is None:
                self._waiting[job] = WaitingRun(
                    job=job, slot=slot, run_id=run_id, node=node, since=started
                )
                return WAITING
            if waiting.run_id == run_id or (slot is not None and waiting.slot == slot):
                return TAKEN
            key = None if slot is None else (job, slot, 1)
            if run_id in self._runs or (key is not None and key in self._slots):
                return TAKEN
            values = record_values(
                run_id, job, slot, "schedule", 1, node, RunState.SKIPPED, started, started,
                None, skip,
            )  # fmt: skip
            entry = Row.of(values)
            if key is not None:
                self._slots[key] = run_id
            self._runs[run_id] = entry
            self._keep(entry)
            return SKIPPED_BY_LIMIT

    def _leave_line(self, job: str, run_id: str) -> bool:
        with self._lock:
            rerun = self._waiting_reruns.get(run_id)
            if rerun is not None and rerun.job == job:
                del self._waiting_reruns[run_id]
                return True
            waiting = self._waiting.get(job)
            if waiting is None or waiting.run_id != run_id:
                return False
            del self._waiting[job]
            return True

    def _wait_for_room(
        self,
        job: str,
        slot: datetime | None,
        run_id: str,
        node: str,
        attempt: int,
        started: datetime,
    ) -> None:
        with self._lock:
            self._open()
            self._waiting_reruns.setdefault(
                run_id,
                WaitingRun(
                    job=job, slot=slot, run_id=run_id, node=node, since=started,
                    trigger="rerun", attempt=attempt,
                ),
            )  # fmt: skip

    def _waiting_runs(self, job: str | None) -> list[WaitingRun]:
        with self._lock:
            self._write_posted()
            waits = [*self._waiting.values(), *self._waiting_reruns.values()]
            shown = [w for w in waits if (job is None or w.job == job) and self._in_force(w)]
        return sorted(shown, key=lambda w: (w.since, w.job, w.run_id))

    def _abandon_waits(self, dead: str, now: datetime) -> list[RunRecord]:
        """In `take_over` (lock held): the waits of node `dead` end; those whose runs never
        claimed are recorded abandoned, certainly never started."""
        ended = [w for w in self._waiting.values() if w.node == dead]
        ended += [w for w in self._waiting_reruns.values() if w.node == dead]
        for w in ended:
            if w.trigger == "rerun":
                del self._waiting_reruns[w.run_id]
            else:
                del self._waiting[w.job]
        taken: list[RunRecord] = []
        for w in ended:
            key = None if w.slot is None else (w.job, w.slot, w.attempt)
            if w.run_id in self._runs or (key is not None and key in self._slots):
                continue  # claimed: its run is abandoned as any run
            values = record_values(
                w.run_id, w.job, w.slot, w.trigger, w.attempt, dead, RunState.ABANDONED,
                w.since, max(now, w.since), None, lost_reason(dead, ran=False),
            )  # fmt: skip
            entry = Row.of(values)
            if key is not None:
                self._slots[key] = w.run_id
            self._runs[w.run_id] = entry
            self._keep(entry)
            taken.append(RunRecord._of(dict(values)))
        return taken

    def release(self, run_ids: Sequence[str]) -> int:
        released = 0
        with self._lock:
            self._write_posted()
            for run_id in run_ids:
                entry = self._runs.get(run_id)
                if entry is None or entry.state is not _RUNNING:
                    continue
                del self._runs[run_id]
                if entry.slot is not None:
                    self._free_key((entry.job, entry.slot, entry.attempt), run_id)
                released += 1
        return released

    def _finish(
        self,
        run_id: str,
        state: RunState,
        ended: datetime,
        exit_code: int | None,
        reason: str | None,
        output_tail: str,
        settle: int | None,
        wait: bool,
        started: datetime | None,
    ) -> bool:
        lock = self._lock
        if not wait and settle is None:
            if self._closed:
                self._open()  # (raises: asked only when closed, this runs for every run)
            if lock.acquire(False):
                # Free: written now, after any posted before it (as a post would be, without
                # its tuple and queue: a run alone, or the first of a burst's posters). False:
                # never claimed, or ended (see `StateStore.finish`).
                try:
                    if self._posted:
                        self._write_posted()
                    return self._write_finish(
                        run_id, state, ended, exit_code, reason, output_tail, None, started
                    )
                finally:
                    lock.release()
            entry = self._runs.get(run_id)  # one atomic read: claims add runs without the lock
            if entry is None or entry.state is not _RUNNING:
                return False  # never claimed: the caller records it (see `StateStore.finish`)
            posted = self._posted
            # Atomic under the GIL.
            posted.append((run_id, state, ended, exit_code, reason, output_tail, None, started))
            # Written by this thread when the lock is free (a burst's posts then come in
            # batches), or when enough wait that the lock must be waited for.
            while posted and lock.acquire(len(posted) >= _POST_BATCH):
                try:
                    self._write_posted()
                finally:
                    lock.release()
            return True
        with lock:
            self._open()
            self._write_posted()
            return self._write_finish(
                run_id, state, ended, exit_code, reason, output_tail, settle, started
            )

    def _write_posted(self) -> None:
        """Write the posted finishes (lock held)."""
        posted = self._posted
        while posted:
            try:
                finish = posted.popleft()
            except IndexError:  # (only this thread takes: the lock is held)
                return
            self._write_finish(*finish)

    def _write_finish(
        self,
        run_id: str,
        state: RunState,
        ended: datetime,
        exit_code: int | None,
        reason: str | None,
        output_tail: str,
        settle: int | None,
        started: datetime | None,
    ) -> bool:
        """Write one finish (lock held)."""
        entry = self._runs.get(run_id)
        if entry is None or entry.state is not _RUNNING:
            return False
        # Changed in place: it keeps its place in the write order, and a reader copies
        # entries under the lock.
        entry.finish(state, ended, exit_code, reason, output_tail, started)
        self._keep(entry)
        if settle is not None:
            row = self._queue_rows.get(settle)
            if row is not None and row.state == "running":
                self._queue_rows[settle] = replace(row, state=queue_state_of(state), run_id=run_id)
        return True

    def _record(self, values: dict[str, Any]) -> bool:
        entry = Row.of(values)
        run_id, slot = entry.run_id, entry.slot
        key = None if slot is None else (entry.job, slot, entry.attempt)
        with self._lock:
            self._open()
            self._write_posted()
            # The key as `claim` takes it (atomically: claims take no lock).
            if run_id in self._runs or (
                key is not None and self._slots.setdefault(key, run_id) is not run_id
            ):
                return False
            self._runs[run_id] = entry
            self._keep(entry)
            return True

    def _prune(self, older_than: datetime, keep_per_job: int) -> int:
        with self._lock:
            self._open()
            self._write_posted()
            gone = 0
            for records in self._finished.values():
                # Newest first by start; ties: the later written first (as history reads).
                newest = sorted(reversed(records), key=_started, reverse=True)
                for n, entry in enumerate(newest):
                    if n >= keep_per_job or entry.started < older_than:
                        self._forget(entry)
                        gone += 1
            # Recount what stays, in the order written (nothing is over a bound now).
            kept = [e for e in self._snapshot() if e.state is not _RUNNING]
            self._finished, self._sizes, self._largest, self._count = {}, {}, 0, 0
            for entry in kept:
                self._keep(entry)
            self._prune_shared(older_than)
            self._prune_pauses(older_than)
            return gone

    def close(self) -> None:
        """Refuse writes from now on; what is kept stays readable."""
        with self._lock:
            self._write_posted()
            self._closed = True

    # -- reads ---------------------------------------------------------------------------

    def _history(
        self, job: str | None, limit: int, since: datetime | None, state: RunState | None
    ) -> list[RunRecord]:
        with self._lock:
            entries = [
                e
                for e in reversed(self._snapshot())
                if (job is None or e.job == job)
                and (since is None or e.started >= since)
                and (state is None or e.state is state)
            ]
            # Stable: among runs started at the same instant, the later written stays first.
            entries.sort(key=_started, reverse=True)
            # Copied under the lock: a running entry changes when it finishes.
            return [e.record() for e in entries[:limit]]

    def run(self, run_id: str) -> RunRecord | None:
        with self._lock:
            self._write_posted()  # a read sees every finish posted before it
            entry = self._runs.get(run_id)
            return None if entry is None else entry.record()

    def _set_output(self, run_id: str, output: str) -> bool:
        with self._lock:
            self._open()
            self._write_posted()  # a run whose finish is posted has ended: not written over
            entry = self._runs.get(run_id)
            if entry is None or entry.state is not _RUNNING:
                return False
            entry.set_output(output)
            return True

    def __len__(self) -> int:
        """How many records are kept, running ones included."""
        with self._lock:
            self._write_posted()
            return len(self._runs)

    def __repr__(self) -> str:
        return f"MemoryStateStore(limit={self._limit}, per_job={self._per_job}, kept={len(self)})"

    # -- internals (lock held) -----------------------------------------------------------

    def _keep(self, record: _Entry) -> None:
        """Count `record` (just made final) in its job's history, then trim to the bounds.

        Written out rather than split in helpers: it runs for every run a scheduler makes."""
        job = record.job
        finished = self._finished
        sizes = self._sizes
        kept = finished.get(job)
        if kept is None:
            size = 0
        else:
            size = len(kept)
            if size >= self._per_job or (size == self._largest and self._count >= self._limit):
                # The job would go over a bound and be the one to give a record up: it trades
                # its oldest for this one. Its size stays; it is now the last to have come to it.
                self._forget(kept.pop(0))
                kept.append(record)
                sizes[size].move_to_end(job)
                return
        # The job grows by one.
        if kept is None:
            finished[job] = [record]
        else:
            kept.append(record)
            self._left(job, size)
        grown = size + 1
        bucket = sizes.get(grown)
        if bucket is None:
            bucket = sizes[grown] = OrderedDict()
        bucket[job] = None
        if grown > self._largest:
            self._largest = grown
        if self._count < self._limit:
            self._count += 1
            return
        # Full: the job holding the most (the first to come to that size) gives up its oldest.
        largest = self._largest
        victim = next(iter(sizes[largest]))
        kept = finished[victim]
        self._forget(kept.pop(0))
        self._left(victim, largest)
        if kept:
            bucket = sizes.get(largest - 1)
            if bucket is None:
                bucket = sizes[largest - 1] = OrderedDict()
            bucket[victim] = None
        else:
            del finished[victim]

    def _left(self, job: str, size: int) -> None:
        """`job` no longer holds `size` records (it holds one more or one less)."""
        sizes = self._sizes
        bucket = sizes[size]
        del bucket[job]
        if not bucket:
            del sizes[size]
            if self._largest == size:
                # Only a job that shrank can empty the largest size: it now holds one less.
                self._largest = size - 1

    def _forget(self, record: _Entry) -> None:
        """Remove `record` (no longer counted) from the kept records and keys."""
        run_id = record.run_id
        del self._runs[run_id]
        slot = record.slot
        if slot is not None:
            key = (record.job, slot, record.attempt)
            if self._slots.get(key) == run_id:  # as `_free_key` does, without its call
                del self._slots[key]

    def _snapshot(self) -> list[_Entry]:
        """The kept runs, in the order first written, as a list (lock held), the posted
        finishes written first.

        `claim` adds runs without the lock, so a walk over ``_runs`` itself could meet a dict
        that changed size under it; copying its values is one C call that runs no Python code,
        which no other thread interrupts (the GIL)."""
        self._write_posted()
        return list(self._runs.values())

    def _free_key(self, key: RunKey, run_id: str) -> None:
        """Free `key` if `run_id` holds it. No claim can take the key between the look and
        the ``del``: it is held until then, and only its holder's run frees it."""
        if self._slots.get(key) == run_id:
            del self._slots[key]


def _check_count(name: str, value: int, least: int) -> None:
    if value.__class__ is not int or value < least:
        raise ValueError(f"{name} must be a whole number >= {least}, not {value!r}")


def _started(entry: _Entry) -> datetime:
    return entry.started
