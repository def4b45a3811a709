"""`CheckedStore`: the argument checks every state store shares, made once.

A store's public method that takes values from its caller (`claim`, `finish`, `set_mark`,
`submit`, ...) is defined here: it checks them and converts them (datetimes to UTC, an
alert's text to bytes, a run's output to the store's bound), then calls the store's storage
method of the same name with a leading underscore (`_claim`, `_finish`, ...), which only
stores. The methods that take nothing to check (`now`, `heartbeat`, `nodes`, `look`, ...) a
store implements directly. `MemoryStateStore` and `SqlStateStore` derive from it (listed
last among their bases, after the mixins holding their storage methods).

The claim path stays cheap: the engine's usual values (text, a whole attempt, UTC
datetimes) pass a few class tests and go on as they are; anything else goes through
`record_values`, which converts it or raises the precise error.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from .base import ALERT_HOLD
from .records import TRIGGERS, RunRecord, RunState, aware_utc, record_values
from .values import (
    KEEP,
    QUEUE_FINAL,
    QUEUE_STATES,
    JobMark,
    JobPause,
    Keep,
    NodeInfo,
    PendingAlert,
    QueuedRun,
    TakeClaims,
    WaitingRun,
    Within,
    args_json,
)

__all__ = ["CheckedStore", "Claims", "LimitedClaims"]

_RUNNING = RunState.RUNNING

#: `claim_many`'s argument: (job, slot, trigger, run_id, node, attempt, started) each.
Claims = Sequence[tuple[str, datetime | None, str, str, str, int, datetime]]
#: `claim_many_within`'s argument: a claim's fields, then its limit and skip reason.
LimitedClaims = Sequence[tuple[str, datetime | None, str, str, str, int, datetime, int, str | None]]


class CheckedStore(ABC):
    """The checking half of a state store (see the module's docstring)."""

    _output_limit: int | None

    # -- runs ------------------------------------------------------------------------------

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
        if not _usual(job, slot, trigger, run_id, node, attempt, started):
            job, slot, trigger, run_id, node, attempt, started = _checked_claim(
                job, slot, trigger, run_id, node, attempt, started
            )
        return self._claim(job, slot, trigger, run_id, node, attempt, started)

    def claim_many(self, claims: Claims) -> list[bool]:
        checked: list[tuple[str, datetime | None, str, str, str, int, datetime]] | None = None
        for n, claim in enumerate(claims):
            if not _usual(*claim):
                if checked is None:  # copied only when a claim needs converting
                    checked = list(claims)
                checked[n] = _checked_claim(*claim)
        return self._claim_many(claims if checked is None else checked)

    def claim_within(
        self,
        job: str,
        slot: datetime | None,
        trigger: str,
        run_id: str,
        *,
        node: str,
        attempt: int = 1,
        started: datetime,
        limit: int,
        skip: str | None = None,
    ) -> Within:
        claim = _checked_limited(job, slot, trigger, run_id, node, attempt, started, limit, skip)
        return self._claim_within(*claim)

    def claim_many_within(self, claims: LimitedClaims, *, yielding: bool = False) -> list[Within]:
        checked = [_checked_limited(*claim) for claim in claims]
        return self._claim_many_within(checked, yielding) if checked else []

    def wait_in_line(
        self,
        job: str,
        slot: datetime | None,
        run_id: str,
        *,
        node: str,
        started: datetime,
        skip: str,
    ) -> Within:
        job, slot, _trigger, run_id, node, _attempt, started, _limit, reason = _checked_limited(
            job, slot, "schedule", run_id, node, 1, started, 1, skip
        )
        if not reason:
            raise ValueError("wait_in_line needs the reason of a skipped slot")
        return self._wait_in_line(job, slot, run_id, node, started, reason)

    def leave_line(self, job: str, run_id: str) -> bool:
        if not isinstance(job, str) or not isinstance(run_id, str):
            raise TypeError(f"leave_line takes a job and a run id, not {job!r}, {run_id!r}")
        return self._leave_line(job, run_id)

    def wait_for_room(
        self,
        job: str,
        slot: datetime | None,
        run_id: str,
        *,
        node: str,
        attempt: int,
        started: datetime,
    ) -> None:
        job, slot, _trigger, run_id, node, attempt, started = _checked_claim(
            job, slot, "rerun", run_id, node, attempt, started
        )
        self._wait_for_room(job, slot, run_id, node, attempt, started)

    def waiting_runs(self, job: str | None = None) -> list[WaitingRun]:
        if job is not None and not isinstance(job, str):
            raise TypeError(f"job must be a string or None, not {job!r}")
        return self._waiting_runs(job)

    def finish(
        self,
        run_id: str,
        *,
        state: RunState,
        ended: datetime,
        exit_code: int | None = None,
        reason: str | None = None,
        output_tail: str = "",
        settle: int | None = None,
        wait: bool = True,
        started: datetime | None = None,
    ) -> bool:
        if state.__class__ is not RunState or state is _RUNNING:
            raise ValueError(f"run {run_id}: finish needs a final RunState, not {state!r}")
        if ended.__class__ is not datetime or ended.tzinfo is not UTC:
            ended = aware_utc(ended, "ended")
        if started is not None and (started.__class__ is not datetime or started.tzinfo is not UTC):
            started = aware_utc(started, "started")
        if exit_code is not None and exit_code.__class__ is not int:
            raise TypeError(f"exit_code must be an int or None, not {exit_code!r}")
        if reason is not None and reason.__class__ is not str:
            raise TypeError(f"reason must be a string or None, not {reason!r}")
        if output_tail.__class__ is not str:
            raise TypeError(f"output_tail must be a string, not {output_tail!r}")
        limit = self._output_limit
        if limit is not None and len(output_tail) > limit:
            output_tail = self._tail(output_tail)
        return self._finish(
            run_id, state, ended, exit_code, reason, output_tail, settle, wait, started
        )

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
        if state is _RUNNING:
            raise ValueError(f"run {run_id}: record needs a final state, not running")
        limit = self._output_limit
        if limit is not None and output_tail.__class__ is str and len(output_tail) > limit:
            output_tail = self._tail(output_tail)
        values = record_values(
            run_id,
            job,
            slot,
            trigger,
            attempt,
            node,
            state,
            started,
            ended,
            exit_code,
            reason,
            output_tail,
            last_slot,
        )
        return self._record(values)

    def history(
        self,
        job: str | None = None,
        *,
        limit: int = 100,
        since: datetime | None = None,
        state: RunState | None = None,
    ) -> list[RunRecord]:
        if limit <= 0:
            return []
        # In UTC: PEP 495 makes a time in a fold compare badly across zones.
        return self._history(
            job,
            limit,
            None if since is None else aware_utc(since, "since"),
            None if state is None else RunState(state),
        )

    def prune(self, *, older_than: datetime, keep_per_job: int) -> int:
        older_than = aware_utc(older_than, "older_than")
        if keep_per_job.__class__ is not int or keep_per_job < 0:
            raise ValueError(f"keep_per_job must be a whole number >= 0, not {keep_per_job!r}")
        return self._prune(older_than, keep_per_job)

    def set_process(self, run_id: str, *, pid: int, process_started: float) -> bool:
        return self._set_process(run_id, int(pid), float(process_started))

    def set_output(self, run_id: str, output: str) -> bool:
        if output.__class__ is not str:
            raise TypeError(f"output must be a string, not {output!r}")
        return self._set_output(run_id, self._tail(output))

    def _tail(self, text: str) -> str:
        """The end of `text` the store keeps: at most its output limit (None: all of it)."""
        limit = self._output_limit
        if limit is None or len(text) <= limit:
            return text
        return text[len(text) - limit :] if limit else ""

    # -- nodes -----------------------------------------------------------------------------

    def join(self, node: NodeInfo, *, lease: timedelta) -> None:
        if not isinstance(node, NodeInfo):
            raise TypeError(f"join needs a NodeInfo, not {node!r}")
        if not node.name or not isinstance(node.name, str):
            raise ValueError(f"a node needs a name, not {node.name!r}")
        started = aware_utc(node.started, "started")
        if started is not node.started:
            node = replace(node, started=started)
        self._join(node, lease)

    # -- marks -----------------------------------------------------------------------------

    def set_mark(
        self,
        job: str,
        *,
        last_slot: datetime | Keep | None = KEEP,
        failures: int | Keep = KEEP,
        paused_reason: str | Keep | None = KEEP,
    ) -> JobMark:
        if isinstance(last_slot, datetime):
            last_slot = aware_utc(last_slot, "last_slot")
        if not isinstance(failures, Keep) and (failures.__class__ is not int or failures < 0):
            raise ValueError(f"failures must be a whole number >= 0, not {failures!r}")
        if not isinstance(paused_reason, Keep | str | None):
            raise TypeError(f"paused_reason must be a string or None, not {paused_reason!r}")
        return self._set_mark(job, last_slot, failures, paused_reason)

    def set_marks(self, last_slots: Mapping[str, datetime]) -> None:
        slots = {job: aware_utc(slot, "last_slot") for job, slot in last_slots.items()}
        if slots:
            self._set_marks(slots)

    # -- pauses ----------------------------------------------------------------------------

    def pause(
        self,
        jobs: Sequence[str],
        *,
        node: str,
        paused_at: datetime,
        note: str | None = None,
        until: datetime | None = None,
    ) -> None:
        names = _job_names(jobs)
        if not isinstance(node, str):
            raise TypeError(f"node must be a string, not {node!r}")
        if note is not None and not isinstance(note, str):
            raise TypeError(f"note must be a string or None, not {note!r}")
        paused_at = aware_utc(paused_at, "paused_at")
        if until is not None:
            until = aware_utc(until, "until")
        if names:
            self._pause(names, node, paused_at, note, until)

    def resume(self, jobs: Sequence[str] | None = None) -> list[str]:
        return self._resume(None if jobs is None else _job_names(jobs))

    def count_outcome(
        self,
        job: str,
        *,
        failed: bool,
        limit: int,
        node: str,
        at: datetime,
        note: str,
        until: datetime | None = None,
        started: datetime | None = None,
    ) -> JobPause | None:
        if not isinstance(job, str) or not job:
            raise ValueError(f"a job name must be a non-empty string, not {job!r}")
        if limit.__class__ is not int or limit < 1:
            raise ValueError(f"limit must be a whole number >= 1, not {limit!r}")
        at = aware_utc(at, "at")
        if until is not None:
            until = aware_utc(until, "until")
        if started is not None:
            started = aware_utc(started, "started")
        return self._count_outcome(job, bool(failed), limit, node, at, note, until, started)

    # -- the queue ---------------------------------------------------------------------------

    def submit(
        self,
        job: str,
        args: dict[str, Any] | None = None,
        *,
        priority: int = 0,
        host: str | None = None,
    ) -> int:
        text = args_json(args)
        if not isinstance(job, str) or not job:
            raise ValueError(f"a queued run needs a job name, not {job!r}")
        if priority.__class__ is not int:
            raise TypeError(f"priority must be an int, not {priority!r}")
        if host is not None and not isinstance(host, str):
            raise TypeError(f"host must be a pattern (a string) or None, not {host!r}")
        return self._submit(job, text, priority, host)

    def take(
        self,
        node: str,
        *,
        jobs: Collection[str],
        limit: int,
        hostname: str | None = None,
        most: Mapping[str, int] | None = None,
        claims: TakeClaims | None = None,
        limits: Mapping[str, int] | None = None,
    ) -> list[QueuedRun]:
        if limit <= 0 or not jobs:
            return []
        if claims is not None:
            claims = _checked_take_claims(node, claims, limit)
        for name, cap in (limits or {}).items():
            if cap.__class__ is not int or cap < 1:
                raise ValueError(f"the limit of job {name!r} must be an int ≥ 1, not {cap!r}")
        return self._take(node, jobs, limit, hostname, most or {}, claims, limits or {})

    def submit_take(
        self,
        job: str,
        args: dict[str, Any] | None = None,
        *,
        priority: int = 0,
        host: str | None = None,
        node: str,
        jobs: Collection[str],
        limit: int,
        hostname: str | None = None,
        most: Mapping[str, int] | None = None,
        claims: TakeClaims | None = None,
        limits: Mapping[str, int] | None = None,
    ) -> tuple[int, list[QueuedRun]]:
        if limit <= 0 or not jobs:
            return self.submit(job, args, priority=priority, host=host), []
        text = args_json(args)
        if not isinstance(job, str) or not job:
            raise ValueError(f"a queued run needs a job name, not {job!r}")
        if priority.__class__ is not int:
            raise TypeError(f"priority must be an int, not {priority!r}")
        if host is not None and not isinstance(host, str):
            raise TypeError(f"host must be a pattern (a string) or None, not {host!r}")
        if claims is not None:
            claims = _checked_take_claims(node, claims, limit)
        for name, cap in (limits or {}).items():
            if cap.__class__ is not int or cap < 1:
                raise ValueError(f"the limit of job {name!r} must be an int ≥ 1, not {cap!r}")
        row = (job, text, priority, host)
        return self._submit_take(row, node, jobs, limit, hostname, most or {}, claims, limits or {})

    def watch(self, wake: Callable[[bool], None]) -> bool:
        return False  # the stores that can tell (PostgreSQL) say so

    def settle(self, queue_id: int, state: str, run_id: str | None) -> bool:
        if state not in QUEUE_FINAL:
            raise ValueError(f"a settled queue row is one of {sorted(QUEUE_FINAL)}, not {state!r}")
        return self._settle(queue_id, state, run_id)

    def pending_before(
        self, before: datetime, *, excluding: Collection[str] = (), limit: int = 1000
    ) -> list[QueuedRun]:
        before = aware_utc(before, "before")
        if limit <= 0:
            return []
        return self._pending_before(before, excluding, limit)

    def put_back(self, queue_id: int) -> bool:
        return self._put_back(int(queue_id))

    def settle_pending(self, queue_id: int, state: str, run_id: str | None) -> bool:
        if state not in QUEUE_FINAL:
            raise ValueError(f"a settled queue row is one of {sorted(QUEUE_FINAL)}, not {state!r}")
        return self._settle_pending(queue_id, state, run_id)

    def queue(self, *, state: str | None = None, limit: int = 100) -> list[QueuedRun]:
        if state is not None and state not in QUEUE_STATES:
            raise ValueError(f"queue state must be one of {sorted(QUEUE_STATES)}, not {state!r}")
        if limit <= 0:
            return []
        return self._queue(state, limit)

    def pending_count(self, *, limit: int) -> int:
        if limit.__class__ is not int:
            raise TypeError(f"limit must be an int, not {limit!r}")
        return self._pending_count(limit) if limit > 0 else 0

    # -- the outbox --------------------------------------------------------------------------

    def hold_alert(
        self,
        server: str,
        message: bytes | str,
        recipients: Sequence[str],
        *,
        next_attempt: datetime | None = None,
        error: str | None = None,
    ) -> int:
        if isinstance(message, str):
            body = message.encode("utf-8")
        elif isinstance(message, bytes | bytearray | memoryview):
            body = bytes(message)
        else:
            raise TypeError(f"an alert's message must be bytes or text, not {message!r}")
        if next_attempt is not None:
            next_attempt = aware_utc(next_attempt, "next_attempt")
        return self._hold_alert(server, body, tuple(recipients), next_attempt, error)

    def due_alerts(self, *, limit: int, hold: timedelta = ALERT_HOLD) -> list[PendingAlert]:
        if limit <= 0:
            return []
        return self._due_alerts(limit, hold)

    def alert_failed(self, alert_id: int, *, next_attempt: datetime, error: str) -> None:
        self._alert_failed(alert_id, aware_utc(next_attempt, "next_attempt"), error)

    # -- kill requests -----------------------------------------------------------------------

    def request_kill(
        self, *, run_id: str | None = None, job: str | None = None, reason: str | None = None
    ) -> int:
        if run_id is None and job is None:
            raise ValueError("request_kill needs a run_id or a job")
        if reason is not None and (not isinstance(reason, str) or not reason.strip()):
            raise ValueError(f"request_kill: reason must be a non-empty text, not {reason!r}")
        return self._request_kill(run_id, job, reason)

    # -- the storage methods (the values checked as above) -----------------------------------

    @abstractmethod
    def _claim(
        self,
        job: str,
        slot: datetime | None,
        trigger: str,
        run_id: str,
        node: str,
        attempt: int,
        started: datetime,
    ) -> bool: ...

    @abstractmethod
    def _claim_many(self, claims: Claims) -> list[bool]: ...

    @abstractmethod
    def _claim_many_within(self, claims: LimitedClaims, yielding: bool) -> list[Within]: ...

    @abstractmethod
    def _wait_in_line(
        self,
        job: str,
        slot: datetime | None,
        run_id: str,
        node: str,
        started: datetime,
        skip: str,
    ) -> Within: ...

    @abstractmethod
    def _leave_line(self, job: str, run_id: str) -> bool: ...

    @abstractmethod
    def _wait_for_room(
        self,
        job: str,
        slot: datetime | None,
        run_id: str,
        node: str,
        attempt: int,
        started: datetime,
    ) -> None: ...

    @abstractmethod
    def _waiting_runs(self, job: str | None) -> list[WaitingRun]: ...

    @abstractmethod
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
    ) -> Within: ...

    @abstractmethod
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
    ) -> bool: ...

    @abstractmethod
    def _record(self, values: dict[str, Any]) -> bool:
        """`values`: a final record's fields, as `record_values` gives them."""

    @abstractmethod
    def _history(
        self, job: str | None, limit: int, since: datetime | None, state: RunState | None
    ) -> list[RunRecord]:
        """`limit` is 1 or more."""

    @abstractmethod
    def _prune(self, older_than: datetime, keep_per_job: int) -> int: ...

    @abstractmethod
    def _set_process(self, run_id: str, pid: int, process_started: float) -> bool: ...

    @abstractmethod
    def _set_output(self, run_id: str, output: str) -> bool: ...

    @abstractmethod
    def _join(self, node: NodeInfo, lease: timedelta) -> None:
        """`node.started` is in UTC."""

    @abstractmethod
    def _set_mark(
        self,
        job: str,
        last_slot: datetime | Keep | None,
        failures: int | Keep,
        paused_reason: str | Keep | None,
    ) -> JobMark: ...

    @abstractmethod
    def _set_marks(self, last_slots: dict[str, datetime]) -> None:
        """`last_slots` is not empty."""

    @abstractmethod
    def _pause(
        self,
        jobs: list[str],
        node: str,
        paused_at: datetime,
        note: str | None,
        until: datetime | None,
    ) -> None:
        """`jobs` is not empty, without repeats; instants in UTC."""

    @abstractmethod
    def _resume(self, jobs: list[str] | None) -> list[str]: ...

    @abstractmethod
    def _count_outcome(
        self,
        job: str,
        failed: bool,
        limit: int,
        node: str,
        at: datetime,
        note: str,
        until: datetime | None,
        started: datetime | None,
    ) -> JobPause | None: ...

    @abstractmethod
    def _submit(self, job: str, args: str | None, priority: int, host: str | None) -> int:
        """`args`: the arguments as JSON text (`args_json`)."""

    @abstractmethod
    def _take(
        self,
        node: str,
        jobs: Collection[str],
        limit: int,
        hostname: str | None,
        most: Mapping[str, int],
        claims: TakeClaims | None,
        limits: Mapping[str, int],
    ) -> list[QueuedRun]:
        """`jobs` is not empty, `limit` 1 or more; `claims` checked: as many run ids as
        `limit` at least, `started` in UTC; `limits` each 1 or more."""

    @abstractmethod
    def _submit_take(
        self,
        row: tuple[str, str | None, int, str | None],
        node: str,
        jobs: Collection[str],
        limit: int,
        hostname: str | None,
        most: Mapping[str, int],
        claims: TakeClaims | None,
        limits: Mapping[str, int],
    ) -> tuple[int, list[QueuedRun]]:
        """`submit_take`: `row` as `_submit`'s arguments (job, args JSON, priority, host),
        the rest as `_take`'s (checked as there)."""

    @abstractmethod
    def _put_back(self, queue_id: int) -> bool: ...

    @abstractmethod
    def _settle(self, queue_id: int, state: str, run_id: str | None) -> bool: ...

    @abstractmethod
    def _settle_pending(self, queue_id: int, state: str, run_id: str | None) -> bool: ...

    @abstractmethod
    def _pending_before(
        self, before: datetime, excluding: Collection[str], limit: int
    ) -> list[QueuedRun]: ...

    @abstractmethod
    def _queue(self, state: str | None, limit: int) -> list[QueuedRun]: ...

    @abstractmethod
    def _pending_count(self, limit: int) -> int:
        """`limit` is 1 or more."""

    @abstractmethod
    def _hold_alert(
        self,
        server: str,
        message: bytes,
        recipients: tuple[str, ...],
        next_attempt: datetime | None,
        error: str | None,
    ) -> int: ...

    @abstractmethod
    def _due_alerts(self, limit: int, hold: timedelta) -> list[PendingAlert]: ...

    @abstractmethod
    def _alert_failed(self, alert_id: int, next_attempt: datetime, error: str) -> None: ...

    @abstractmethod
    def _request_kill(self, run_id: str | None, job: str | None, reason: str | None) -> int: ...


def _job_names(jobs: Sequence[str]) -> list[str]:
    """`jobs` as a list of names, in order, each once; ValueError for a name that is not a
    non-empty string (and a single string given for a list)."""
    if isinstance(jobs, str):
        raise TypeError(f"jobs must be a list of names, not the string {jobs!r}")
    names: dict[str, None] = {}
    for job in jobs:
        if not isinstance(job, str) or not job:
            raise ValueError(f"a job name must be a non-empty string, not {job!r}")
        names[job] = None
    return list(names)


def _usual(
    job: str,
    slot: datetime | None,
    trigger: str,
    run_id: str,
    node: str,
    attempt: int,
    started: datetime,
) -> bool:
    """Whether a claim's values are as the engine gives them: nothing to convert or refuse.
    A few identity tests, so the engine's own claims take no copy and no conversion (each a
    comparison: the whole is a bool without a call to `bool`)."""
    return (
        run_id.__class__ is str
        and job.__class__ is str
        and node.__class__ is str
        and run_id != ""
        and job != ""
        and node != ""
        and trigger in TRIGGERS
        and attempt.__class__ is int
        and attempt >= 1
        and started.__class__ is datetime
        and started.tzinfo is UTC
        and (slot is None or (slot.__class__ is datetime and slot.tzinfo is UTC))
    )


def _checked_limited(
    job: str,
    slot: datetime | None,
    trigger: str,
    run_id: str,
    node: str,
    attempt: int,
    started: datetime,
    limit: int,
    skip: str | None,
) -> tuple[str, datetime | None, str, str, str, int, datetime, int, str | None]:
    """A claim under a limit (`claim_within`), checked: a claim's values as `_checked_claim`
    makes them, a `limit` of at least 1 and a `skip` reason that is text or None."""
    if limit.__class__ is not int or limit < 1:
        raise ValueError(f"limit must be a whole number >= 1, not {limit!r}")
    if skip is not None and skip.__class__ is not str:
        raise TypeError(f"skip must be a string or None, not {skip!r}")
    if not _usual(job, slot, trigger, run_id, node, attempt, started):
        job, slot, trigger, run_id, node, attempt, started = _checked_claim(
            job, slot, trigger, run_id, node, attempt, started
        )
    return job, slot, trigger, run_id, node, attempt, started, limit, skip


def _checked_claim(
    job: str,
    slot: datetime | None,
    trigger: str,
    run_id: str,
    node: str,
    attempt: int,
    started: datetime,
) -> tuple[str, datetime | None, str, str, str, int, datetime]:
    """A claim's values converted (datetimes to UTC), or the precise error."""
    v = record_values(run_id, job, slot, trigger, attempt, node, _RUNNING, started)
    return v["job"], v["slot"], v["trigger"], v["run_id"], v["node"], v["attempt"], v["started"]


def _checked_take_claims(node: str, claims: TakeClaims, limit: int) -> TakeClaims:
    """A take's claims checked as a claim's values are (`started` to UTC), or the precise
    error; enough run ids for `limit` rows."""
    if len(claims.run_ids) < limit:
        raise ValueError(
            f"a take of {limit} rows that claims their runs needs {limit} run ids, "
            f"not {len(claims.run_ids)}"
        )
    for run_id in claims.run_ids[:limit]:
        if not isinstance(run_id, str) or not run_id:
            raise ValueError(f"a run id is a non-empty string, not {run_id!r}")
    started = _checked_claim("-", None, "submit", claims.run_ids[0], node, 1, claims.started)[6]
    return claims if started is claims.started else replace(claims, started=started)
