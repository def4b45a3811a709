"""The `StateStore` protocol: where a scheduler keeps what ran and what runs.

The engine asks the store to *claim* a run right before starting it, and the scheduler writes
every run's outcome into it; `history` reads it back as `RunRecord`s. A store takes plain
values only (strings, datetimes, numbers, a `RunState`), never the engine's or a runner's
objects, so a store built on a database writes its arguments into columns and needs nothing
from the layers above it.

The protocol is cut by concern: `RunStore` (runs and claims), `NodeStore` (the clock and the
nodes), `MarkStore`, `PauseStore`, `QueueStore`, `OutboxStore`, `KillStore`; `StateStore` is
all of them, plus `prune` and `close`, which span them. Code that needs one concern may ask for its
protocol alone (a test double then implements only that).

Implementations: `MemoryStateStore` (one process, bounded, lost on exit), `SqliteStateStore`
and `PostgresStateStore`; the tests in ``tests/test_state_store.py`` run over each of them.
They check their arguments in one place, `checked.CheckedStore` (see docs/state.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from ..errors import JobActionError
from .records import RunRecord, RunState
from .values import (
    KEEP,
    Beat,
    JobMark,
    JobPause,
    Keep,
    Look,
    NodeInfo,
    PendingAlert,
    QueuedRun,
    TakeClaims,
    WaitingRun,
    Within,
)

__all__ = [
    "ALERT_HOLD",
    "KillStore",
    "MarkStore",
    "NodeNameTakenError",
    "NodeStore",
    "OutboxStore",
    "PauseStore",
    "QueueStore",
    "RunStore",
    "StateStore",
    "StoreClosedError",
    "StoreError",
    "StoreUnavailableError",
]


# How long `due_alerts` holds an alert it hands out before another node may get it.
ALERT_HOLD = timedelta(minutes=1)


class StoreClosedError(RuntimeError):
    """A write reached a store after its `close`."""


class StoreError(JobActionError):
    """A state store cannot be opened or used: a bad or unreachable URL, a schema newer than
    this code, a read-only file. Its message is one line naming the URL, password masked."""


class StoreUnavailableError(StoreError):
    """The store's database cannot be reached right now (connection lost, locked for too
    long). Nothing was written by the call that raised it; the caller may try again later.
    """


class NodeNameTakenError(StoreError):
    """`join` under the name of a live node (its heartbeat within its lease)."""


@runtime_checkable
class RunStore(Protocol):
    """Runs: claims, outcomes, records of runs never claimed, history, run processes.

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

    def claim_many(
        self, claims: Sequence[tuple[str, datetime | None, str, str, str, int, datetime]]
    ) -> list[bool]:
        """Several claims at once, each a tuple (job, slot, trigger, run_id, node, attempt,
        started), answered in order as `claim` answers (a key or run id repeated in the list:
        the first wins). A SQL store writes them in one transaction: what an engine starting
        many runs in one tick may use instead of a `claim` each."""
        ...

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
        """`claim`, only while `job` has fewer than `limit` live runs on every node sharing
        the store (``max_instances``, ``overlap``): decided in the claim's transaction, so
        two nodes claiming at once never both pass the count.

        A *live* run is one in state ``running``, whichever node holds it: a dead node's runs
        count until it is taken over (they then become ``abandoned``). Answers `CLAIMED`
        (inserted ``running``), `TAKEN` (the key or run id is taken: another node has the
        slot), `BUSY` (the job has `limit` live runs: nothing written), or, when `skip` is
        given, `SKIPPED_BY_LIMIT` instead of `BUSY`: the run's final record was written in
        state ``skipped`` with `skip` as its reason, ended when `started` (its key taken:
        `TAKEN`). `limit` is at least 1.
        """
        ...

    def claim_many_within(
        self,
        claims: Sequence[
            tuple[str, datetime | None, str, str, str, int, datetime, int, str | None]
        ],
        *,
        yielding: bool = False,
    ) -> list[Within]:
        """Several `claim_within` at once, each a tuple (job, slot, trigger, run_id, node,
        attempt, started, limit, skip), answered in order; one after another, so a claim
        counts the runs claimed before it in the list. A SQL store writes them in one
        transaction (what an engine starting a burst of such runs uses).

        `yielding`: a claim whose job another transaction is claiming right now (a store
        that locks each job, PostgreSQL: its lock is held) is not waited for: it answers
        `LOCKED` and nothing of it is written (asking again later decides it). A store whose
        writes hold the whole store (SQLite, memory) never answers `LOCKED`."""
        ...

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
        """After `claim_within` answered `BUSY` for a slot of an ``overlap: queue`` or
        ``replace`` job: make it the job's one waiting slot across the cluster, or skip it.

        Answers `WAITING`: no other slot waits for the job; this one (`run_id`, on `node`)
        does now, and `claim_within` counts it as a live run for every other run of the job
        until it claims (with this `run_id`) or `leave_line`; `TAKEN`: this very slot waits
        already (another node's worker asked first; drop it here); `SKIPPED_BY_LIMIT`:
        another slot waits, and this slot's ``skipped`` record (reason `skip`, ended when
        `started`) was written (its key taken: `TAKEN`). A waiting slot whose run claimed
        since, or whose node is no longer ``up`` (left, or taken over), waits no longer."""
        ...

    def leave_line(self, job: str, run_id: str) -> bool:
        """The slot (or rerun) `run_id` no longer waits for `job` (it claimed, or its wait
        ended); False when it was not waiting."""
        ...

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
        """A rerun (after a node loss) of `job` waits, in a worker of `node` since `started`,
        for room under the job's limit: shown by `waiting_runs` until `leave_line`, counted
        by no claim. Asking again for the same `run_id` changes nothing."""
        ...

    def waiting_runs(self, job: str | None = None) -> list[WaitingRun]:
        """The runs waiting for their busy job (of `job`, or of every job), oldest first:
        each job's one waiting slot (`wait_in_line`) and the reruns waiting for room
        (`wait_for_room`). Only the waits in force: of nodes still ``up`` (a lost node's,
        its lease expired, until it is taken over), whose runs have not claimed yet."""
        ...

    def release(self, run_ids: Sequence[str]) -> int:
        """Delete the claims of `run_ids` that are still ``running`` (runs that never started:
        an engine's claims made ahead of their slots, whose runs did not come), freeing their
        keys, as if never claimed. A run id not found, or final, is left alone. Returns how
        many were deleted."""
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
        settle: int | None = None,
        wait: bool = True,
        started: datetime | None = None,
    ) -> bool:
        """Write the outcome of the claimed run `run_id`: its final `state` (not ``running``),
        when it `ended`, its `exit_code`, `reason` and `output_tail` (kept as given unless the
        store was given an `output_limit`: then shortened to it, keeping the end), and when it
        `started` if given (a run claimed ahead of its slot has its slot as its start until
        then). The rest stays as claimed. `settle`: the id
        of the queue row the run was taken from, settled in the same transaction (as `settle`
        does, with `queue_state_of(state)` and this run id) when the finish is written.

        False when no running run has this id: it never claimed (write it with `record`
        instead), or it is already final (another node found it abandoned), which this does
        not overwrite; the queue row is then left as it is.

        `wait=False`: the caller knows the run claimed and does not need the answer; a store
        may then write it a moment later, sharing a transaction with other writes, and
        answers True at once (an error is logged, not raised). Reads through the same store
        object see it; a crash before it is written leaves the run ``running`` until its
        node is taken over (then ``abandoned``).
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
        self,
        job: str | None = None,
        *,
        limit: int = 100,
        since: datetime | None = None,
        state: RunState | None = None,
    ) -> list[RunRecord]:
        """Runs kept by the store, newest first (by ``started``; ties: the later written
        first), running ones included, in state ``running``.

        `job`: that job's runs only (a name the store has no record of gives an empty list);
        `limit`: at most that many (0 or less: none); `since`: only runs started at or after
        it; `state`: only runs in that state. Still answers after `close`.
        """
        ...

    def set_process(self, run_id: str, *, pid: int, process_started: float) -> bool:
        """The running run `run_id` launched a process group led by `pid`, a process that
        started at `process_started` (seconds since the epoch, as `NodeInfo`'s). False when
        no running run has that id. What a node restarted under the same name reads back
        (`processes`) to stop the groups its lost runs left behind."""
        ...

    def processes(self, node: str) -> list[tuple[str, int, float]]:
        """(run id, pid, process start time) of `node`'s runs still ``running`` that
        recorded a process group (`set_process`), oldest first."""
        ...

    def run(self, run_id: str) -> RunRecord | None:
        """The record of run `run_id` (running or final), or None when the store keeps none
        under that id. Still answers after `close`."""
        ...

    def set_output(self, run_id: str, output: str) -> bool:
        """The output so far of the running run `run_id`, replacing what was written before
        (shortened to the store's bound as `finish` does); `finish` writes the last. What
        lets every node show a run's output while it runs. False when no running run has
        that id."""
        ...


@runtime_checkable
class NodeStore(Protocol):
    """The store's clock and the nodes sharing the store: heartbeats, leases, take-over."""

    #: True for a store that lives in this process's memory: never out of reach, and no other
    #: process can take its runs over, so a node on it has nothing to fence.
    in_process: bool

    def now(self) -> datetime:
        """The store's clock, aware UTC: the database's ``now()`` for SQL stores, the given
        `Clock` for the memory store. Heartbeats and leases are measured on it."""
        ...

    def join(self, node: NodeInfo, *, lease: timedelta) -> None:
        """Register `node` as up, its heartbeat now (the store's time; `node.heartbeat` and
        `node.state` are ignored). A node of that name that is not live (left, dead, or its
        heartbeat older than `lease`) is replaced. Raises `NodeNameTakenError` if a live node
        has the name."""
        ...

    def heartbeat(self, name: str, *, lease: timedelta) -> bool:
        """Renew the lease of node `name` (its heartbeat: now). False when the node is not
        up (taken over, left, unknown) or its lease had already expired: it is dead, must
        not start anything, stops what it runs, and joins again. Never revives a node."""
        ...

    def beat(self, name: str, *, lease: timedelta, clock_skew: float | None = None) -> Beat:
        """`heartbeat`, and in the same statement what the node looks at after it: how many
        other nodes' leases expired, how many other live nodes share its host, whether an
        alert of the outbox is due, the database's clock (see `Beat`). One transaction per
        heartbeat, so that an idle node costs the database little (docs/state.md).
        `clock_skew` (seconds, measured at the previous beat) is kept as the node's
        `NodeInfo.clock_skew`."""
        ...

    def set_definitions(self, name: str, *, digest: str | None, jobs: Sequence[str]) -> bool:
        """Node `name`'s definitions changed: their `digest` (None: not compared, a store
        only its own process sees) and the names of its `jobs` (sorted) replace what it
        published (at `join`, from its `NodeInfo`). False when the node is not ``up``."""
        ...

    def leave(self, name: str) -> None:
        """Node `name` is going away (state ``left``); its runs are its own to finish first."""
        ...

    def nodes(self) -> list[NodeInfo]:
        """Every node the store knows (up, left or dead), by name."""
        ...

    def expired_nodes(self, *, lease: timedelta) -> list[NodeInfo]:
        """Nodes still ``up`` whose heartbeat is older than `lease` (the store's time)."""
        ...

    def take_over(self, dead: str, *, by: str, requeue: Collection[str] = ()) -> list[RunRecord]:
        """Atomically: node `dead` becomes ``dead`` (its next `heartbeat` is False), its runs
        still ``running`` become ``abandoned`` (ended now, reason "node lost, may have run:
        DEAD", or "node lost: DEAD" for a slot claimed ahead that is not due yet and has no
        process recorded: certainly never started; `records.lost_reason`), and its
        taken queue rows of the jobs in `requeue` (those with ``on_node_loss: rerun``) go back
        to ``pending`` (their `args`, `priority` and `submitted` kept, `attempt` one more,
        any listening node told), its other taken rows ``failed``. Returns the abandoned
        runs, once: a second caller gets []. The slots and reruns that waited in its workers
        (`waiting_runs`) and never claimed wait no longer: each is recorded ``abandoned``
        "node lost: DEAD" (certainly never started), returned with the others. `by` (the
        live node doing it) is logged by the caller; a node restarting under its old name
        calls it on itself before `join`."""
        ...


@runtime_checkable
class MarkStore(Protocol):
    """Per-job marks: the last slot handled, consecutive failures, a pause by failures."""

    def mark(self, job: str) -> JobMark | None:
        """`job`'s mark, or None if none was set."""
        ...

    def marks(self) -> dict[str, JobMark]:
        """Every job's mark, by job name."""
        ...

    def set_mark(
        self,
        job: str,
        *,
        last_slot: datetime | Keep | None = KEEP,
        failures: int | Keep = KEEP,
        paused_reason: str | Keep | None = KEEP,
    ) -> JobMark:
        """Set the given fields of `job`'s mark (made if missing); the fields left at `KEEP`
        stay as they are. `last_slot` never moves backwards (an earlier slot, or None, leaves
        it). Returns the mark as now stored."""
        ...

    def set_marks(self, last_slots: Mapping[str, datetime]) -> None:
        """Move the `last_slot` of each job in `last_slots` forward to the slot given (a mark
        is made if missing; an earlier slot leaves it), in one transaction and as few
        statements as the engine allows: a node writes its marks so once per heartbeat.
        `failures` and `paused_reason` stay as they are."""
        ...


@runtime_checkable
class PauseStore(Protocol):
    """Pauses: the jobs no node runs for now, the same on every node of the store (see
    `JobPause`), and `pause_after_failures`' count decided in the store."""

    def pauses(self) -> dict[str, JobPause]:
        """Every pause kept, by job name; those whose `until` has passed included (they are
        not in force: `JobPause.in_force`)."""
        ...

    def pause_of(self, job: str) -> JobPause | None:
        """`job`'s pause (in force or not), or None."""
        ...

    def pause(
        self,
        jobs: Sequence[str],
        *,
        node: str,
        paused_at: datetime,
        note: str | None = None,
        until: datetime | None = None,
    ) -> None:
        """Pause every job of `jobs` (one transaction), replacing a pause it had: by `node`,
        at `paused_at`, with `note`, until `until` (None: until resumed). Every watcher
        (`watch_pauses`) is told; `pause_version` moves."""
        ...

    def resume(self, jobs: Sequence[str] | None = None) -> list[str]:
        """End the pauses of `jobs` (None: of every job) and reset their counts of
        consecutive failures (one transaction); the jobs that had a pause (in force or not).
        Watchers are told and `pause_version` moves when one had."""
        ...

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
        """Count a final outcome of a run of `job` toward `pause_after_failures: limit`, in
        one transaction: a failure adds one to the job's count of consecutive failures, a
        success sets it to 0; the failure that brings it to `limit` pauses the job (by
        `node`, at `at`, with `note`, until `until`) and sets the count to 0 again, and that
        pause is returned (else None). While a pause of the job is in force at `at`, nothing
        is counted (a run that started before the pause and ended after it: the cluster
        paused after exactly `limit`); nor is the outcome of a run that `started` before the
        job's pause was made, once that pause has ended by its `until` (a run of the streak
        that paused the job does not count toward the next one). A pause ended by `resume`
        is gone: what ends after it counts. Nodes counting at once are counted one after the
        other."""
        ...

    def pause_version(self) -> int:
        """A number that changes with every change of the pauses: a cheap read (no write
        transaction) for a node that polls for them."""
        ...

    def watch_pauses(self, wake: Callable[[], None]) -> bool:
        """Call `wake` (from a thread of the store's, or the writer's, until the store
        closes) when the pauses may have changed, by any process, and once when it starts
        (or starts again) listening. True when the store does (PostgreSQL: ``LISTEN``; the
        memory store: in process), False when it cannot: the caller polls `pause_version`."""
        ...


@runtime_checkable
class QueueStore(Protocol):
    """The queue of runs asked for on demand (`submit`, the CLI, a row another program
    inserts)."""

    def submit(
        self,
        job: str,
        args: dict[str, Any] | None = None,
        *,
        priority: int = 0,
        host: str | None = None,
    ) -> int:
        """Queue a run of `job` (state ``pending``); its queue id."""
        ...

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
        """Take at most `limit` pending rows of the given `jobs` for `node` (they become
        ``running``, `node` set), each row taken once whoever asks at the same time, in one
        transaction. Order: the highest priority first, a row gaining one point per
        `values.AGING` seconds it waited, then the oldest. A row with a `host` pattern is
        taken only if it matches (as `fnmatch`) `node` or `hostname`. `most`: at most that
        many rows of each job named there (the room its ``max_instances`` leaves), passed
        over rows of it staying pending. `limits`: the ``max_instances`` of jobs named there,
        counted in the take's transaction over every node sharing the store: a job's rows are
        taken only while its live runs (``running`` records, whichever node holds them) and
        its rows taken whose runs have not started are fewer than its limit; the rest of its
        rows stay pending, and the rows of other jobs are taken in their place.

        A row whose arguments no run can be given (`values.read_args` refuses them: too
        large, not JSON, nested too deep) ends ``not_started`` with that `reason` in the
        same transaction, and comes back in that state (counted in `limit`): the caller
        runs only the ``running`` rows, and the others taken with it are not held back.

        `claims`: the runs of the rows taken are claimed in the same transaction (see
        `TakeClaims`): such a row comes back with its `run_id`, its run ``running`` on
        `node`; the caller then starts the run without claiming it again, and ends it with
        `finish` (its row settled with it) even when it never starts."""
        ...

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
        """`submit` and `take` in one transaction: the row of `job` queued (``pending``),
        then taken for `node` as `take` takes with the same arguments right after, seeing
        the new row with every other pending one: the new row's id, and the rows taken.
        The new row is among them when it comes first (by priority, then age) and `job` is
        one of `jobs`; else other rows are, and it stays ``pending`` (the listening nodes are
        told of it, as after `submit`). One commit where `submit` then `take` make two: a
        node's own submit while it has a free worker. `limit` 0 or no `jobs`: `submit`
        alone, no row taken."""
        ...

    def look(self, node: str, *, jobs: Collection[str], hostname: str | None = None) -> Look:
        """Whether there is anything for `node` to do, in one read: a pending row it could
        `take` (of `jobs`, its host pattern matching `node` or `hostname`), an open kill
        request for one of its runs (see `Look`). A node's periodic poll; the work itself
        (`take`, `kill_requests`) only when it says so."""
        ...

    def watch(self, wake: Callable[[bool], None]) -> bool:
        """Call `wake` (from a thread of the store's, until it closes) when a row may have been
        queued or a kill requested, by any process: ``wake(True)`` for a kill request, and
        once when it starts listening. True when the store does (PostgreSQL: ``LISTEN``), so
        its consumer need not poll often; False when it cannot (the caller polls)."""
        ...

    def settle(self, queue_id: int, state: str, run_id: str | None) -> bool:
        """A taken row's end: `state` is ``succeeded``, ``failed`` or ``not_started``;
        `run_id` links it to its run record. False if the row is not ``running`` (settled
        already, or back in the queue after its node was taken over)."""
        ...

    def pending_before(
        self, before: datetime, *, excluding: Collection[str] = (), limit: int = 1000
    ) -> list[QueuedRun]:
        """Pending rows submitted before `before` whose job is not one of `excluding`, oldest
        first, at most `limit`: the rows a node looks through for jobs no live node
        defines."""
        ...

    def put_back(self, queue_id: int) -> bool:
        """Make taken row `queue_id` (``running``) pending again, as it was before its take
        (its node and run id cleared; its `attempt` kept): its run was not claimed (its job at its
        ``max_instances`` on some node, or paused). False when the row is not ``running``."""
        ...

    def settle_pending(self, queue_id: int, state: str, run_id: str | None) -> bool:
        """Settle a row no node took (``pending``) as `state`, linked to `run_id` (a run
        record the caller writes): a row of a job no live node defines. False when the row
        is not pending any more (a node took it meanwhile)."""
        ...

    def queue(self, *, state: str | None = None, limit: int = 100) -> list[QueuedRun]:
        """Queue rows, newest first (by id), only those in `state` if given."""
        ...

    def pending_count(self, *, limit: int) -> int:
        """How many rows are ``pending``, counted up to `limit` (more answer `limit`): the
        queue's depth, read without reading the rows (a `submit`'s check of a full queue)."""
        ...


@runtime_checkable
class OutboxStore(Protocol):
    """Alerts not yet delivered, retried until sent, across restarts."""

    def hold_alert(
        self,
        server: str,
        message: bytes | str,
        recipients: Sequence[str],
        *,
        next_attempt: datetime | None = None,
        error: str | None = None,
    ) -> int:
        """Keep an alert to deliver (text is stored as UTF-8), due at `next_attempt` (None:
        now), with the `error` of a first failed try if any. Its id."""
        ...

    def due_alerts(self, *, limit: int, hold: timedelta = ALERT_HOLD) -> list[PendingAlert]:
        """At most `limit` alerts due now, the earliest due first. Each is held for `hold`
        (its `next_attempt` moved that far on), so another node asking meanwhile does not get
        it too; `alert_sent` or `alert_failed` follows."""
        ...

    def alert_sent(self, alert_id: int) -> None:
        """The alert was delivered: it goes."""
        ...

    def alert_failed(self, alert_id: int, *, next_attempt: datetime, error: str) -> None:
        """A delivery failed: one more attempt counted, due again at `next_attempt`."""
        ...


@runtime_checkable
class KillStore(Protocol):
    """Requests to stop running runs, carried out by the node running each."""

    def request_kill(
        self, *, run_id: str | None = None, job: str | None = None, reason: str | None = None
    ) -> int:
        """Ask the nodes running run `run_id` (or every running run of `job`) to stop it,
        with `reason` (None: an operator's kill, the run ends FAILED "killed"; an
        ``overlap: replace`` slot gives "replaced"). How many running
        runs it reached (0: none running)."""
        ...

    def kill_requests(self, node: str) -> list[tuple[int, str, str | None]]:
        """The open kill requests for runs on `node`: (request id, run id, reason given to
        `request_kill`), oldest first."""
        ...

    def kill_done(self, request_id: int) -> None:
        """The request was carried out (or its run had already ended): it is closed."""
        ...


@runtime_checkable
class StateStore(
    RunStore, NodeStore, MarkStore, PauseStore, QueueStore, OutboxStore, KillStore, Protocol
):
    """What ran, what runs, and the history of runs: every concern above, in one store.

    Every method is thread-safe: the scheduler's workers call them concurrently. Datetimes are
    aware (naive ones are refused); records come back in UTC. The stores of this package
    check their arguments in one place (`checked.CheckedStore`) and only store.
    """

    def prune(self, *, older_than: datetime, keep_per_job: int) -> int:
        """Delete finished run records started before `older_than`, and those beyond the
        newest `keep_per_job` of their job (running runs always stay); also settled queue rows
        submitted before `older_than`, closed kill requests, nodes that left or died with a
        heartbeat before it, and pauses that ended (their `until`) before it. Returns how many
        run records went."""
        ...

    def close(self) -> None:
        """Release what the store holds (connections, threads). Idempotent.

        After it, `claim`, `finish` and `record` raise `StoreClosedError`; `history` still
        answers. A scheduler closes the store it opened from a URL (or ``"memory"``), never a
        store instance it was given.
        """
        ...
