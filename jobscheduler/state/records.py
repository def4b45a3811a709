"""`RunRecord`: what the state store keeps about one run, and `RunState`, where the run is.

A record is a value: frozen, checked when made, its datetimes aware and in UTC. Every store
(memory today; SQLite and PostgreSQL next) keeps and returns the same fields, which are also
what ``jobscheduler history --json`` prints.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..model.event import Event
from ..model.execution import Execution

__all__ = [
    "TRIGGERS",
    "RunKey",
    "RunRecord",
    "RunState",
    "aware_utc",
    "lost_reason",
    "outcome_of",
    "queue_state_of",
    "record_values",
    "run_key",
]


class RunState(enum.StrEnum):
    """Where a run is. ``running`` is the only state a run leaves; the others are final."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    NOT_STARTED = "not_started"  # could not be launched, or was refused: `reason` says why
    SKIPPED = "skipped"  # not run by a policy (overlap: skip); no event, no alert
    MISSED = "missed"  # no node was up: one record for a range of slots (`slot` … `last_slot`)
    ABANDONED = "abandoned"  # its node died (or lost its lease) while it ran

    @property
    def finished(self) -> bool:
        return self is not RunState.RUNNING


# Final states of a run that never ran: it has no duration.
_NEVER_RAN = frozenset({RunState.NOT_STARTED, RunState.SKIPPED, RunState.MISSED})

# What started a run (``JOBSCHEDULER_TRIGGER``): the schedule, `run_now`, a dependence, and
# a submitted run, a retry, a catch-up run, a rerun after a node loss, a backfill.
TRIGGERS = frozenset(
    {"schedule", "run_now", "dependence", "submit", "retry", "catch_up", "rerun", "backfill"}
)

# A run's unique key in a store: (job, slot, attempt) for a run of a slot, its run id for a
# run outside the schedule (run_now, dependence, submit), whose slot is None.
RunKey = tuple[str, datetime, int] | str

_new = object.__new__
_set = object.__setattr__


def run_key(job: str, slot: datetime | None, attempt: int, run_id: str) -> RunKey:
    """The key a store keeps unique: a slot is run at most once per attempt, by construction.

    Attempt 1 is the slot's first run; a retry or a rerun of the same slot claims the next
    attempt. A run outside the schedule has no slot and is keyed by its run id.
    """
    return run_id if slot is None else (job, slot, attempt)


def aware_utc(value: object, name: str) -> datetime:
    """`value` in UTC; a `TypeError` if it is no datetime, a `ValueError` naming `name` if
    it is naive."""
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime, not {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime, not the naive {value.isoformat()}")
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def _text(value: object, name: str, *, optional: bool = False, empty: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {value!r}")
    if not value and not empty:
        raise ValueError(f"{name} must not be empty")


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One run as the state store keeps it.

    - `run_id`: the run's id (text); `job`: the job's name.
    - `slot`: the scheduled instant the run belongs to, aware UTC; None for a run outside the
      schedule (``run_now``, a dependence, a submitted run).
    - `trigger`: what started it (one of `TRIGGERS`); `attempt`: 1 for a slot's first run,
      then 2, 3, … for retries and reruns of the same slot.
    - `node`: the scheduler process that ran it (or recorded it).
    - `state`: a `RunState`; `started` and `ended` (None while running), aware UTC.
    - `exit_code` (external commands), `reason` (why a run failed, did not start, was
      skipped or missed), `output_tail` (the end of its output; each store bounds it).
    - `last_slot`: for a ``missed`` record only, the last slot of the missed range (`slot` is
      the first, and `reason` gives the count); None otherwise.

    Datetimes given in another zone are converted to UTC; naive ones are refused. A running
    record has no `ended` and no `exit_code`; a finished one has `ended`.
    """

    run_id: str
    job: str
    slot: datetime | None
    trigger: str
    attempt: int
    node: str
    state: RunState
    started: datetime
    ended: datetime | None = None
    exit_code: int | None = None
    reason: str | None = None
    output_tail: str = ""
    last_slot: datetime | None = None

    def __post_init__(self) -> None:
        _text(self.run_id, "run_id")
        _text(self.job, "job")
        _text(self.node, "node")
        if self.trigger not in TRIGGERS:
            raise ValueError(
                f"trigger must be one of {', '.join(sorted(TRIGGERS))}, not {self.trigger!r}"
            )
        attempt = self.attempt
        if attempt.__class__ is not int or attempt < 1:
            raise ValueError(f"attempt must be a whole number >= 1, not {attempt!r}")
        state = RunState(self.state)  # a plain "succeeded" is accepted; anything else refused
        _set(self, "state", state)
        _set(self, "started", aware_utc(self.started, "started"))
        for name in ("slot", "ended", "last_slot"):
            value = getattr(self, name)
            if value is not None:
                _set(self, name, aware_utc(value, name))
        if self.exit_code is not None and self.exit_code.__class__ is not int:
            raise TypeError(f"exit_code must be an int or None, not {self.exit_code!r}")
        _text(self.reason, "reason", optional=True, empty=True)
        _text(self.output_tail, "output_tail", empty=True)
        if state is RunState.RUNNING:
            if self.ended is not None or self.exit_code is not None:
                raise ValueError("a running record has no ended time and no exit code")
        elif self.ended is None:
            raise ValueError(f"a {state} record needs its ended time")
        if self.last_slot is not None:
            if state is not RunState.MISSED:
                raise ValueError(f"only a missed record has a last_slot, not a {state} one")
            if self.slot is None or self.last_slot < self.slot:
                raise ValueError("a missed range needs a slot (its first) before its last_slot")

    @property
    def key(self) -> RunKey:
        """The key a store keeps unique for this run (see `run_key`)."""
        return run_key(self.job, self.slot, self.attempt, self.run_id)

    @property
    def duration(self) -> float | None:
        """Seconds from start to end; None while running, and for a run that never started
        (not started, skipped, missed)."""
        if self.ended is None or self.state in _NEVER_RAN:
            return None
        return (self.ended - self.started).total_seconds()

    @classmethod
    def _of(cls, values: dict[str, Any]) -> RunRecord:
        """A record whose fields are `values` (exactly the field names, already checked, as
        `record_values` makes them), made without ``__init__``; the record owns the dict."""
        record = _new(cls)
        _set(record, "__dict__", values)
        return record

    @classmethod
    def from_execution(
        cls,
        execution: Execution,
        *,
        node: str,
        attempt: int = 1,
        trigger: str | None = None,
        output_limit: int | None = None,
    ) -> RunRecord:
        """The record of `execution` (running or finished), run on `node`.

        `trigger` defaults to the execution's. The state and reason are `outcome_of`'s. With
        `output_limit`, only the last that many characters of the output are kept.
        """
        state, reason = outcome_of(execution)
        tail = execution.output_tail
        if output_limit is not None and len(tail) > output_limit:
            tail = tail[len(tail) - output_limit :] if output_limit > 0 else ""
        return cls._of(
            record_values(
                str(execution.run_id),
                execution.job_name,
                execution.slot,
                execution.trigger if trigger is None else trigger,
                attempt,
                node,
                state,
                execution.started,
                execution.ended,
                execution.exit_code,
                reason,
                tail,
            )
        )


def outcome_of(execution: Execution) -> tuple[RunState, str | None]:
    """The state and reason a store records for `execution`.

    SUCCESSFUL → succeeded, FAILED → failed, NOT_STARTED → not_started, no event yet →
    running. The reason carries the error text when there is one (``"raised ValueError:
    boom"``), since a record has no separate error field.
    """
    event = execution.event
    # Identity tests, not a dict: an Enum member's hash is a Python-level call.
    if event is Event.SUCCESSFUL:
        state = RunState.SUCCEEDED
    elif event is Event.FAILED:
        state = RunState.FAILED
    elif event is Event.NOT_STARTED:
        state = RunState.NOT_STARTED
    elif event is None:
        state = RunState.RUNNING
    else:
        raise ValueError(f"an execution cannot end with {event}")
    error = execution.error
    return state, execution.reason if error is None else _reason(execution.reason, error)


def lost_reason(node: str, *, ran: bool = True) -> str:
    """The reason of a run abandoned when `node` was taken over: ``"node lost, may have run:
    NODE"`` (it may have started, even ended: a finish not yet written dies with its node, so
    its outcome is unknown), or ``"node lost: NODE"`` with `ran` False (certainly never
    started: a slot claimed ahead, not due yet, no process launched)."""
    return f"node lost, may have run: {node}" if ran else f"node lost: {node}"


def queue_state_of(state: RunState) -> str:
    """The state a queue row is settled with when its run ends in the final `state`:
    succeeded, not_started, else failed (an abandoned or skipped run did not succeed)."""
    if state is RunState.SUCCEEDED:
        return "succeeded"
    return "not_started" if state is RunState.NOT_STARTED else "failed"


def record_values(
    run_id: str,
    job: str,
    slot: datetime | None,
    trigger: str,
    attempt: int,
    node: str,
    state: RunState,
    started: datetime,
    ended: datetime | None = None,
    exit_code: int | None = None,
    reason: str | None = None,
    output_tail: str = "",
    last_slot: datetime | None = None,
) -> dict[str, Any]:
    """A record's fields, checked as ``RunRecord(...)`` checks them (datetimes turned to UTC),
    as a new dict that `RunRecord._of` can take.

    Stores write a run with it: the usual values pass a few cheap tests; anything else goes
    through the full checks, which convert it or raise the precise error.
    """
    if (
        run_id.__class__ is str
        and job.__class__ is str
        and node.__class__ is str
        and run_id
        and job
        and node
        and trigger in TRIGGERS
        and attempt.__class__ is int
        and attempt >= 1
        and state.__class__ is RunState
        and started.__class__ is datetime
        and started.tzinfo is not None
        and (slot is None or (slot.__class__ is datetime and slot.tzinfo is not None))
        and last_slot is None
        and output_tail.__class__ is str
        and (reason is None or reason.__class__ is str)
        and (
            (ended is None and exit_code is None)
            if state is RunState.RUNNING
            else (
                ended.__class__ is datetime
                and ended.tzinfo is not None
                and (exit_code is None or exit_code.__class__ is int)
            )
        )
    ):
        # Aware datetimes, only their zone may need changing.
        if started.tzinfo is not UTC:
            started = aware_utc(started, "started")
        if slot is not None and slot.tzinfo is not UTC:
            slot = aware_utc(slot, "slot")
        if ended is not None and ended.tzinfo is not UTC:
            ended = aware_utc(ended, "ended")
        return {
            "run_id": run_id,
            "job": job,
            "slot": slot,
            "trigger": trigger,
            "attempt": attempt,
            "node": node,
            "state": state,
            "started": started,
            "ended": ended,
            "exit_code": exit_code,
            "reason": reason,
            "output_tail": output_tail,
            "last_slot": None,
        }
    checked = RunRecord(  # raises the precise error, or converts what it may
        run_id=run_id,
        job=job,
        slot=slot,
        trigger=trigger,
        attempt=attempt,
        node=node,
        state=state,
        started=started,
        ended=ended,
        exit_code=exit_code,
        reason=reason,
        output_tail=output_tail,
        last_slot=last_slot,
    )
    return dict(checked.__dict__)


def _reason(reason: str | None, error: str | None) -> str | None:
    """The run's reason with its error text: ``raised ValueError`` and the error
    ``ValueError: boom`` make ``raised ValueError: boom``; others are joined in brackets."""
    if error is None or (reason is not None and error in reason):
        return reason
    if reason is None:
        return error
    if reason == f"raised {error.partition(':')[0]}":
        return f"raised {error}"
    return f"{reason} ({error})"
