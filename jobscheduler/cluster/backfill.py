"""Backfill: a job's slots in a range of the past (or future) run on demand, with trigger
``backfill``, each under its (job, slot) key.

`plan` decides, slot by slot, from the runs the state store keeps of them: ``missing`` runs
the slots no run ever started for (none kept, or only missed, skipped or not started ones);
``failed`` those too, and the slots whose last run failed or was abandoned; ``all`` every
slot. A slot whose run is still going is left alone. A slot run again gets its next attempt
(the key (job, slot, attempt) is unique in the store), so two backfills of one range, even
from two processes at once, run each slot once: the second finds it run, or loses its claim.

`Backfill.run` starts the runs oldest first, at most `max_parallel` at a time, through the
engine (so the job's limits, overlap, timeout and policies apply as to any run), and waits
for each to end in the store (whoever ran it). `check_range` refuses bad input before
anything runs.
"""

from __future__ import annotations

import fnmatch
import socket
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Final

from ..clock import Clock
from ..errors import JobActionError
from ..model.job import Job
from ..state.base import StateStore
from ..state.records import RunRecord, RunState, aware_utc

__all__ = [
    "BACKFILL",
    "MAX_SLOTS",
    "MAX_SPAN",
    "REPROCESS",
    "Backfill",
    "BackfillError",
    "SlotDecision",
    "check_range",
    "plan",
    "slots_between",
]

BACKFILL: Final = "backfill"
REPROCESS: Final = ("missing", "failed", "all")
MAX_SPAN: Final = timedelta(days=366)  # a longer range needs `yes`
MAX_SLOTS: Final = 100_000  # slots in one backfill, whatever the range
POLL: Final = 0.2  # seconds between two looks at the store for the runs' ends
_TICK: Final = timedelta(microseconds=1)
_NOT_RUN = frozenset({RunState.MISSED, RunState.SKIPPED, RunState.NOT_STARTED})
_FAILED = frozenset({RunState.FAILED, RunState.ABANDONED})

StartRun = Callable[[Job, datetime, int], None]


class BackfillError(JobActionError):
    """A backfill refused before anything ran: a range backwards or too long, an unknown
    reprocess mode, a job with no schedule."""


@dataclass(frozen=True)
class SlotDecision:
    """What a backfill does with one slot: `action` ``run`` (as `attempt`) or ``skip``, and
    why (`reason`); once run, the run's final `state` (``succeeded``, ``failed``, …) and
    `run_id` (the run that took the slot's key: this backfill's, or another's)."""

    slot: datetime
    action: str
    attempt: int
    reason: str
    state: str | None = None
    run_id: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "slot": self.slot.isoformat(),
            "action": self.action,
            "attempt": self.attempt,
            "reason": self.reason,
            "state": self.state,
            "run_id": self.run_id,
        }


def check_range(
    job: Job,
    start: datetime,
    end: datetime,
    *,
    reprocess: str,
    max_parallel: int,
    yes: bool,
    node: str,
) -> tuple[datetime, datetime]:
    """`start` and `end` in UTC, once the input is found good; `BackfillError` otherwise."""
    if reprocess not in REPROCESS:
        raise BackfillError(f"reprocess must be one of {', '.join(REPROCESS)}, not {reprocess!r}")
    if max_parallel.__class__ is not int or max_parallel < 1:
        raise BackfillError(f"max_parallel must be a whole number >= 1, not {max_parallel!r}")
    try:
        start, end = aware_utc(start, "start"), aware_utc(end, "end")
    except (TypeError, ValueError) as exc:
        raise BackfillError(f"backfill {job.name}: {exc}") from None
    if end < start:
        raise BackfillError(
            f"backfill {job.name}: the range is backwards ({start.isoformat()} is after "
            f"{end.isoformat()})"
        )
    if job.on_demand or job.dependence is not None:
        kind = "on demand" if job.on_demand else "after another job"
        raise BackfillError(f"backfill {job.name}: the job has no schedule (it runs {kind})")
    if end - start > MAX_SPAN and not yes:
        raise BackfillError(
            f"backfill {job.name}: the range spans more than a year "
            f"({(end - start).days} days); confirm it (--yes)"
        )
    if job.host is not None and not any(
        fnmatch.fnmatchcase(name, job.host) for name in (node, socket.gethostname())
    ):
        raise BackfillError(
            f"backfill {job.name}: the job runs only on hosts matching {job.host!r}, "
            f"and this node ({node}) does not"
        )
    return start, end


def slots_between(job: Job, start: datetime, end: datetime) -> list[datetime]:
    """The job's slots in [`start`, `end`], oldest first, in UTC; `BackfillError` beyond
    `MAX_SLOTS`."""
    found: list[datetime] = []
    slot = job.next_after(start - _TICK)
    while slot is not None and slot <= end:
        if len(found) == MAX_SLOTS:
            raise BackfillError(
                f"backfill {job.name}: more than {MAX_SLOTS:,} slots in the range; "
                "backfill it in parts"
            )
        found.append(slot.astimezone(UTC))
        slot = job.next_after(slot)
    return found


def plan(
    slots: Sequence[datetime], records: Sequence[RunRecord], reprocess: str
) -> list[SlotDecision]:
    """The decision for each of `slots` (oldest first), given `records`: the store's runs of
    the job (any order; runs of other slots are ignored). Pure: the store is read by the
    caller."""
    by_slot: dict[datetime, list[RunRecord]] = {}
    wanted = set(slots)
    for record in records:
        if record.slot in wanted:
            by_slot.setdefault(record.slot, []).append(record)
    decisions = []
    for slot in slots:
        kept = by_slot.get(slot, [])
        attempt = max((r.attempt for r in kept), default=0) + 1
        # A missed range's record (keyed by its first slot) counts only if nothing else ran.
        ran = [r for r in kept if r.state is not RunState.MISSED] or kept
        last = max(ran, key=lambda r: (r.attempt, r.started), default=None)
        decisions.append(_decide(slot, attempt, last, reprocess))
    return decisions


def _decide(slot: datetime, attempt: int, last: RunRecord | None, reprocess: str) -> SlotDecision:
    if last is None:
        return SlotDecision(slot, "run", attempt, "never ran")
    state = last.state
    if state is RunState.RUNNING:
        return SlotDecision(slot, "skip", attempt, f"running now (run {last.run_id})")
    if state in _NOT_RUN:
        return SlotDecision(slot, "run", attempt, f"did not run ({state})")
    if reprocess == "all" or (reprocess == "failed" and state in _FAILED):
        return SlotDecision(slot, "run", attempt, f"ran before ({state}): run again")
    return SlotDecision(slot, "skip", attempt, f"already ran ({state})")


class Backfill:
    """Runs the decided slots of one job: `run`."""

    def __init__(self, store: StateStore, clock: Clock, start_run: StartRun) -> None:
        self._store = store
        self._clock = clock
        self._start_run = start_run  # one engine run of (job, slot, attempt), trigger backfill

    def decide(
        self, job: Job, start: datetime, end: datetime, reprocess: str
    ) -> list[SlotDecision]:
        """`plan` over the job's slots in [`start`, `end`] and the store's runs of them."""
        slots = slots_between(job, start, end)
        if not slots:
            return []
        # A run of a slot starts at (claimed ahead) or after it; a day's margin for clocks.
        records = self._store.history(job.name, since=slots[0] - timedelta(days=1), limit=10**7)
        return plan(slots, records, reprocess)

    def run(
        self, job: Job, decisions: Sequence[SlotDecision], *, max_parallel: int
    ) -> list[SlotDecision]:
        """Start the ``run`` decisions oldest first, at most `max_parallel` at once, and wait
        for each to end in the store; the decisions with the outcomes filled in."""
        began = self._store.now() - timedelta(minutes=1)  # another process's claims count too
        pending = deque(d for d in decisions if d.action == "run")
        waiting: dict[tuple[datetime, int], SlotDecision] = {}
        ended: dict[tuple[datetime, int], SlotDecision] = {}
        while pending or waiting:
            while pending and len(waiting) < max_parallel:
                decision = pending.popleft()
                self._start_run(job, decision.slot, decision.attempt)
                waiting[(decision.slot, decision.attempt)] = decision
            self._clock.sleep(POLL)
            for record in self._store.history(job.name, since=began, limit=10**6):
                key = (record.slot, record.attempt)
                if record.state.finished and key in waiting:
                    decision = waiting.pop(key)
                    ended[key] = replace(decision, state=str(record.state), run_id=record.run_id)
        return [ended.get((d.slot, d.attempt), d) for d in decisions]
