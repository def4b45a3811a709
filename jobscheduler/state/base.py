"""The `StateStore` protocol: where a scheduler keeps what ran and what runs.

The engine asks the store to *claim* a run right before starting it, and the scheduler writes
every run's outcome into it; `history` reads it back as `RunRecord`s. A store takes plain
values only (strings, datetimes, numbers, a `RunState`), never the engine's or a runner's
objects, so a store built on a database writes its arguments into columns and needs nothing
from the layers above it.

Implementations: `MemoryStateStore` (one process, bounded, lost on exit). SQLite and
PostgreSQL stores implement this same protocol, and the tests in ``tests/test_state_store.py``
run over each of them. Nodes and heartbeats, the queue of submitted runs, the alert outbox and
per-job marks will be added to this protocol with the stores that need them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from .records import RunRecord, RunState

__all__ = ["StateStore", "StoreClosedError"]


class StoreClosedError(RuntimeError):
    """A write reached a store after its `close`."""


@runtime_checkable
class StateStore(Protocol):
    """What ran, what runs, and the history of runs.

    Every method is thread-safe: the scheduler's workers call them concurrently. Datetimes are
    aware (naive ones are refused); records come back in UTC.

    **Keys.** A run of a slot is keyed by (job, slot, attempt): a store accepts a slot's
    attempt at most once, by construction (a unique key, not a check followed by a write), so
    two nodes sharing a store never both run it. A run outside the schedule (``run_now``, a
    dependence, a submitted run; its slot is None) is keyed by its run id. `claim` and
    `record` return False when the key is taken; the caller then leaves the run alone.
    """

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
        """Insert the run, in state ``running``, under its key; False if the key is taken.

        Called right before the run starts. A claimed run shows in `history` at once; its
        outcome is written by `finish`. The same run id claimed twice is a taken key too.
        """
        ...

    def finish(
        self,
        run_id: str,
        *,
        state: RunState,
        ended: datetime,
        exit_code: int | None = None,
        reason: str | None = None,
        output_tail: str = "",
    ) -> bool:
        """Write the outcome of the claimed run `run_id`: its final `state` (not ``running``),
        when it `ended`, its `exit_code`, `reason` and `output_tail` (which the store may
        shorten to its bound, keeping the end). The rest stays as claimed.

        False when no running run has this id: it never claimed (write it with `record`
        instead), or it is already final (another node found it abandoned), which this does
        not overwrite.
        """
        ...

    def record(
        self,
        job: str,
        slot: datetime | None,
        trigger: str,
        run_id: str,
        *,
        node: str,
        attempt: int = 1,
        state: RunState,
        started: datetime,
        ended: datetime,
        exit_code: int | None = None,
        reason: str | None = None,
        output_tail: str = "",
        last_slot: datetime | None = None,
    ) -> bool:
        """Insert the final record of a run that never claimed; False if its key is taken.

        For a run refused before its claim (``not_started``: limits, a dependence not met,
        shutdown), a slot not run by a policy (``skipped``), a range of slots no node was up
        for (``missed``: `slot` is the first, `last_slot` the last, keyed by the first). The
        `state` must be final.
        """
        ...

    def history(
        self, job: str | None = None, *, limit: int = 100, since: datetime | None = None
    ) -> list[RunRecord]:
        """Runs kept by the store, newest first (by ``started``; ties: the later written
        first), running ones included, in state ``running``.

        `job`: that job's runs only (a name the store has no record of gives an empty list);
        `limit`: at most that many (0 or less: none); `since`: only runs started at or after
        it. Still answers after `close`.
        """
        ...

    def close(self) -> None:
        """Release what the store holds (connections, threads). Idempotent.

        After it, `claim`, `finish` and `record` raise `StoreClosedError`; `history` still
        answers. A scheduler closes the store it opened from a URL (or ``"memory"``), never a
        store instance it was given.
        """
        ...
