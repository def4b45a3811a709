"""Backfill: a job's slots in a range of the past (or future) run on demand, with trigger
``backfill``, each under its (job, slot) key.

`plan` decides, slot by slot, from the runs the state store keeps of them: ``missing`` runs
the slots no run ever started for (none kept, or only missed, skipped or not started ones);
``failed`` those too, and the slots whose last run failed or was abandoned; ``all`` every
slot. A slot whose run is still going is left alone. A slot run again gets its next attempt
(the key (job, slot, attempt) is unique in the store), so two backfills of one range, even
from two processes at once, run each slot once: the second finds it run, or loses its claim.

`Backfill.run` starts the runs oldest first, at most `max_parallel` at a time and never
beyond the job's limit (`limit_of`: ``max_instances``, or one at a time for a job with an
`overlap` policy), counted over the job's live runs in the store (every node's, its
scheduled runs too): a slot waits for room, it is never refused, skipped or made to replace
a run for it. Runs go through the engine (so timeout, retry and the other policies apply as
to any run), and each is waited for until it ended in the store (whoever ran it) or this
node reported it: a run refused (the job paused, the scheduler stopping) is its slot's
outcome. `check_range` refuses bad input before anything runs.
"""

from __future__ import annotations

import fnmatch
import socket
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Final

from ..clock import Clock
from ..errors import JobActionError
from ..model.execution import Execution
from ..model.job import Job
from ..state.base import StateStore
from ..state.records import RunRecord, RunState, aware_utc, outcome_of
from .limits import ALREADY_RUNNING  # a refusal for the job's limit (engine, claims)

__all__ = [
    "BACKFILL",
    "MAX_SLOTS",
    "MAX_SPAN",
    "REPROCESS",
    "Backfill",
    "BackfillError",
    "LongRangeError",
    "SlotDecision",
    "check_range",
    "limit_of",
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


class LongRangeError(BackfillError):
    """A range over a year (`MAX_SPAN`) without `yes`. Its text names how to confirm it in
    the caller's words (`confirm_with`): ``yes=True`` in Python."""

    def __init__(self, job: str, days: int, confirm: str = "yes=True") -> None:
        self.job = job
        self.days = days
        super().__init__(
            f"backfill {job}: the range spans more than a year ({days} days); "
            f"confirm it ({confirm})"
        )

    def confirm_with(self, confirm: str) -> LongRangeError:
        """The same error, telling to confirm with `confirm` (``--yes``, ``"yes": true``)."""
        return LongRangeError(self.job, self.days, confirm)


@dataclass(frozen=True)
class SlotDecision:
    """What a backfill does with one slot: `action` ``run`` (as `attempt`) or ``skip``, and
    why (`reason`); once run, the run's final `state` (``succeeded``, ``failed``,
    ``not_started``, …), `run_id` (the run that took the slot's key: this backfill's, or
    another's) and `run_reason` (its record's reason: why it failed or did not start)."""

    slot: datetime
    action: str
    attempt: int
    reason: str
    state: str | None = None
    run_id: str | None = None
    run_reason: str | None = None

    def outcome(self) -> str:
        """The run's end in words, as the command line prints it and the daemon logs it: its
        `state`, with its `run_reason` unless it succeeded; ``not answered (stopped)`` when
        the scheduler stopped before the run ended (`state` None)."""
        said = self.state or "not answered (stopped)"
        return f"{said} ({self.run_reason})" if self.run_reason and said != "succeeded" else said

    def to_json(self) -> dict[str, object]:
        return {
            "slot": self.slot.isoformat(),
            "action": self.action,
            "attempt": self.attempt,
            "reason": self.reason,
            "state": self.state,
            "run_id": self.run_id,
            "run_reason": self.run_reason,
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
        raise LongRangeError(job.name, (end - start).days)
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
    """Runs the decided slots of one job: `run`. Thread-safe: `heard` comes from the threads
    that report runs."""

    def __init__(
        self,
        store: StateStore,
        clock: Clock,
        start_run: StartRun,
        running: Callable[[], bool] = lambda: True,
    ) -> None:
        self._store = store
        self._clock = clock
        self._start_run = start_run  # one engine run of (job, slot, attempt), trigger backfill
        self._running = running  # False once the scheduler stopped: the backfill ends
        self._cond = threading.Condition()
        self._heard: dict[tuple[datetime, int], Execution] = {}  # reported here, by key

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

    def heard(self, execution: Execution) -> None:
        """A run of this node ended (or did not start): a backfill run's end wakes `run` at
        once, and answers its slot even when the store could not record it."""
        if execution.trigger != BACKFILL or execution.slot is None:
            return
        with self._cond:
            self._heard[(execution.slot.astimezone(UTC), execution.attempt)] = execution
            self._cond.notify_all()

    def run(
        self, job: Job, decisions: Sequence[SlotDecision], *, max_parallel: int
    ) -> list[SlotDecision]:
        """Start the ``run`` decisions oldest first and wait for each to end (in the store,
        whoever ran it, or reported here); the decisions with the outcomes filled in.

        At most `max_parallel` at once, and never beyond the job's limit (`limit_of`) counted
        over the job's live runs in the store, every node's and every trigger's: a slot
        waits for room, however long; never skipped or made to replace a run. A run refused
        all the same ("already running": a run of the job started between the look and the
        start) waits for room again, as the slot's next attempt. Every other refusal is its
        slot's outcome. Once the scheduler stops, the slots not answered are returned
        without an outcome (`state` None)."""
        began = self._store.now() - timedelta(minutes=1)  # another process's claims count too
        limit = limit_of(job)
        pending = deque(d for d in decisions if d.action == "run")
        waiting: dict[tuple[datetime, int], SlotDecision] = {}
        done: dict[datetime, SlotDecision] = {}
        refused = False  # a run was refused for the limit: the next start waits a poll
        while (pending or waiting) and self._running():
            free = 0 if refused else max_parallel - len(waiting)
            refused = False
            if pending and free > 0 and limit is not None:
                free = min(free, self._room(job, limit, waiting))
            while pending and free > 0:
                decision = pending.popleft()
                waiting[(decision.slot, decision.attempt)] = decision
                self._start_run(job, decision.slot, decision.attempt)
                free -= 1
            with self._cond:
                if not self._heard:
                    self._clock.wait(self._cond, POLL)
            for key, state, run_id, reason in self._answers(job, began, waiting):
                decision = waiting.pop(key)
                if state is RunState.NOT_STARTED and reason == ALREADY_RUNNING:
                    again, follow = self._again(job, began, decision)
                    if follow is not None:  # another process's run of the slot answers
                        waiting[(follow.slot, follow.attempt)] = follow
                    else:  # its turn comes again, as its next attempt
                        pending.appendleft(again)
                        refused = True
                    continue
                done[decision.slot] = replace(
                    decision, state=str(state), run_id=run_id, run_reason=reason
                )
        return [done.get(d.slot, d) for d in decisions]

    def _again(
        self, job: Job, began: datetime, refused: SlotDecision
    ) -> tuple[SlotDecision, SlotDecision | None]:
        """After `refused` was refused for the job's limit: the slot's next attempt to run,
        or (second) the run of it made meanwhile by another process (a backfill of the same
        range), whose end then answers the slot: a slot is never run twice so."""
        runs = [
            r for r in self._store.history(job.name, since=began, limit=10**6)
            if r.slot == refused.slot and r.attempt >= refused.attempt
        ]  # fmt: skip
        ran = [r for r in runs if r.state not in _NOT_RUN]
        if ran:
            last = max(ran, key=lambda r: r.attempt)
            return refused, replace(refused, attempt=last.attempt)
        attempt = max((r.attempt for r in runs), default=refused.attempt) + 1
        return replace(refused, attempt=attempt), None

    def _room(self, job: Job, limit: int, waiting: dict[tuple[datetime, int], SlotDecision]) -> int:
        """How many more runs of `job` may start now under `limit`: its live runs in the
        store (every node's, any trigger) and this backfill's runs started and not ended
        (those not claimed yet are not in the store) count."""
        live = self._store.history(job.name, state=RunState.RUNNING, limit=limit + len(waiting))
        others = sum(1 for r in live if r.slot is None or (r.slot, r.attempt) not in waiting)
        return limit - others - len(waiting)

    def _answers(
        self, job: Job, began: datetime, waiting: dict[tuple[datetime, int], SlotDecision]
    ) -> list[tuple[tuple[datetime, int], RunState, str | None, str | None]]:
        """The ends of the `waiting` runs: (key, state, run id, reason), from the store (any
        node's run of the key) or heard here."""
        found: dict[tuple[datetime, int], tuple[RunState, str | None, str | None]] = {}
        with self._cond:
            heard, self._heard = self._heard, {}
        for key, execution in heard.items():
            if key in waiting:
                state, reason = outcome_of(execution)
                found[key] = (state, execution.run_id, reason)
        if len(found) < len(waiting):
            for record in self._store.history(job.name, since=began, limit=10**6):
                if record.slot is None or not record.state.finished:
                    continue
                key = (record.slot, record.attempt)
                if key in waiting and key not in found:
                    found[key] = (record.state, record.run_id, record.reason)
        return [(key, *answer) for key, answer in found.items()]


def limit_of(job: Job) -> int | None:
    """How many runs of `job` a backfill lets run at once (None: no limit but its own
    `max_parallel`): ``max_instances``; else 1 for a job whose `overlap` is not ``allow``
    (such a job runs one at a time: a backfill slot waits for it, never skipped or
    replacing a run)."""
    if job.max_instances is not None:
        return job.max_instances
    return None if job.overlap == "allow" else 1
