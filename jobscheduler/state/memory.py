"""`MemoryStateStore`: the state store of one process, bounded, lost when it exits."""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime

from .base import StoreClosedError
from .records import RunKey, RunRecord, RunState

__all__ = ["DEFAULT_HISTORY_LIMIT", "DEFAULT_OUTPUT_LIMIT", "MemoryStateStore"]

DEFAULT_HISTORY_LIMIT = 1000
# Characters of output kept per record: the last screenful or two. 1,000 records of ASCII
# output then hold at most ~4 MB, whatever the jobs print (a run's own tail, up to its job's
# output_limit, still goes whole to its handlers and alerts).
DEFAULT_OUTPUT_LIMIT = 4096

_RUNNING = RunState.RUNNING


class MemoryStateStore:
    """Runs kept in this process's memory: claims, outcomes, a bounded history.

    - **Claims** succeed unless the run's key was already taken (see `StateStore`): within
      one process a slot runs at most once. The store remembers the keys of the records it
      keeps (running ones and the kept history); a slot older than every kept record could be
      claimed again, which one process never asks for (its slots only move forward). It does
      not see other processes: two schedulers sharing nothing run each slot twice, which only
      a shared store prevents.
    - **Memory is bounded**: at most `limit` finished records in all and `per_job` (default:
      `limit`) of each job, each with at most `output_limit` characters of output (the end is
      kept). When the whole is full, the oldest record of the job holding the most goes, so a
      busy job cannot push a quiet job's last runs out. Running runs are kept until they
      finish (the workers bound how many there are) and do not count.
    - Thread-safe: one lock, held briefly by each write (a `history` call copies the list of
      kept records under it, and filters and sorts outside it).
    """

    def __init__(
        self,
        limit: int = DEFAULT_HISTORY_LIMIT,
        *,
        per_job: int | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> None:
        _check_count("limit", limit, 1)
        if per_job is not None:
            _check_count("per_job", per_job, 1)
        _check_count("output_limit", output_limit, 0)
        self._limit = limit
        self._per_job = limit if per_job is None else per_job
        self._output_limit = output_limit
        self._lock = threading.Lock()
        # Every kept record (running and finished) by run id, in the order first written.
        self._runs: dict[str, RunRecord] = {}
        # The keys of kept runs of slots; a run outside the schedule is keyed by its id (above).
        self._slots: dict[RunKey, str] = {}
        # Per job: the ids of its kept finished records, oldest first.
        self._finished: dict[str, list[str]] = {}
        # Jobs by how many finished records they hold (ordered: the first to reach a size
        # goes first among equals); `_largest` is the highest size held.
        self._sizes: dict[int, OrderedDict[str, None]] = {}
        self._largest = 0
        self._count = 0
        self._closed = False

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def per_job(self) -> int:
        return self._per_job

    @property
    def output_limit(self) -> int:
        return self._output_limit

    # -- writes --------------------------------------------------------------------------

    def claim(
        self,
        job: str,
        slot: datetime | None,
        trigger: str,
        run_id: str,
        *,
        node: str,
        attempt: int = 1,
        started: datetime,
    ) -> bool:
        record = RunRecord(
            run_id=run_id,
            job=job,
            slot=slot,
            trigger=trigger,
            attempt=attempt,
            node=node,
            state=_RUNNING,
            started=started,
        )
        with self._lock:
            if self._closed:
                raise StoreClosedError("the state store is closed")
            if not self._free(record):
                return False
            self._add(record)
            return True

    def finish(self, record: RunRecord) -> bool:
        if record.state is _RUNNING:
            raise ValueError(f"run {record.run_id}: finish needs a final state, not running")
        with self._lock:
            if self._closed:
                raise StoreClosedError("the state store is closed")
            claimed = self._runs.get(record.run_id)
            if claimed is None or claimed.state is not _RUNNING:
                return False
            if claimed.job != record.job:
                raise ValueError(
                    f"run {record.run_id} was claimed for job {claimed.job!r}, not {record.job!r}"
                )
            values = dict(claimed.__dict__)
            values["state"] = record.state
            values["ended"] = record.ended
            values["exit_code"] = record.exit_code
            values["reason"] = record.reason
            values["output_tail"] = self._tail(record.output_tail)
            finished = RunRecord._of(values)  # both halves were checked when they were made
            self._runs[record.run_id] = finished  # keeps its place in the write order
            self._keep(finished)
            return True

    def record(self, record: RunRecord) -> bool:
        if record.state is _RUNNING:
            raise ValueError(f"run {record.run_id}: record needs a final state, not running")
        tail = record.output_tail
        if len(tail) > self._output_limit:
            values = dict(record.__dict__)
            values["output_tail"] = self._tail(tail)
            record = RunRecord._of(values)
        with self._lock:
            if self._closed:
                raise StoreClosedError("the state store is closed")
            if not self._free(record):
                return False
            self._add(record)
            self._keep(record)
            return True

    def close(self) -> None:
        """Refuse writes from now on; what is kept stays readable."""
        with self._lock:
            self._closed = True

    # -- reads ---------------------------------------------------------------------------

    def history(
        self, job: str | None = None, *, limit: int = 100, since: datetime | None = None
    ) -> list[RunRecord]:
        if limit <= 0:
            return []
        if since is not None and (since.tzinfo is None or since.utcoffset() is None):
            raise ValueError(f"since must be an aware datetime, not {since.isoformat()}")
        with self._lock:
            records = list(reversed(self._runs.values()))
        if job is not None:
            records = [r for r in records if r.job == job]
        if since is not None:
            records = [r for r in records if r.started >= since]
        # Stable: among runs started at the same instant, the later written stays first.
        records.sort(key=_started, reverse=True)
        return records[:limit]

    def __len__(self) -> int:
        """How many records are kept, running ones included."""
        with self._lock:
            return len(self._runs)

    def __repr__(self) -> str:
        return f"MemoryStateStore(limit={self._limit}, per_job={self._per_job}, kept={len(self)})"

    # -- internals (lock held) -----------------------------------------------------------

    def _tail(self, text: str) -> str:
        limit = self._output_limit
        if len(text) <= limit:
            return text
        return text[len(text) - limit :] if limit else ""

    def _free(self, record: RunRecord) -> bool:
        if record.run_id in self._runs:
            return False
        return record.slot is None or record.key not in self._slots

    def _add(self, record: RunRecord) -> None:
        self._runs[record.run_id] = record
        if record.slot is not None:
            self._slots[record.key] = record.run_id

    def _keep(self, record: RunRecord) -> None:
        """Count `record` (just made final) in its job's history, then trim to the bounds."""
        job = record.job
        ids = self._finished.get(job)
        if ids is None:
            ids = self._finished[job] = []
        ids.append(record.run_id)
        self._count += 1
        self._moved(job, len(ids) - 1, len(ids))
        if len(ids) > self._per_job:
            self._drop(job)
        if self._count > self._limit:
            self._drop(next(iter(self._sizes[self._largest])))

    def _drop(self, job: str) -> None:
        """Forget the oldest finished record of `job`."""
        ids = self._finished[job]
        run_id = ids.pop(0)
        if not ids:
            del self._finished[job]
        self._count -= 1
        self._moved(job, len(ids) + 1, len(ids))
        record = self._runs.pop(run_id)
        if record.slot is not None and self._slots.get(record.key) == run_id:
            del self._slots[record.key]

    def _moved(self, job: str, old: int, new: int) -> None:
        """`job` now holds `new` finished records instead of `old` (they differ by one)."""
        sizes = self._sizes
        if old:
            jobs = sizes[old]
            del jobs[job]
            if not jobs:
                del sizes[old]
                if self._largest == old and new < old:
                    self._largest = new
        if new:
            bucket = sizes.get(new)
            if bucket is None:
                bucket = sizes[new] = OrderedDict()
            bucket[job] = None
            if new > self._largest:
                self._largest = new


def _check_count(name: str, value: int, least: int) -> None:
    if value.__class__ is not int or value < least:
        raise ValueError(f"{name} must be a whole number >= {least}, not {value!r}")


def _started(record: RunRecord) -> datetime:
    return record.started
