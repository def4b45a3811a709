"""`SqlStateStore`: the `StateStore` protocol over a SQL database, whatever the engine.

The engines (``sqlite.py``, ``postgres.py``) give a `Dialect`: how to connect, begin and
commit, how instants and lengths of time are written, and how a batch of claims is inserted.
The queries are named, in ``sql/*.sql`` (see ``sqlqueries.py``), with named parameters.
Writes go through `GroupCommit` (concurrent writes share a transaction); reads use a
connection of their own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from .base import NodeNameTakenError, StoreClosedError
from .checked import CheckedStore, Claims, LimitedClaims
from .records import RunRecord, RunState, lost_reason, queue_state_of, record_values
from .sqlbatch import Claim, Finish, GroupCommit, LimitedClaim, Op, Submit
from .sqldialect import Dialect
from .sqlpauses import SqlPauses
from .sqlqueries import QUERIES
from .sqlshared import SqlShared
from .values import (
    BUSY,
    CLAIMED,
    LOCKED,
    SKIPPED_BY_LIMIT,
    TAKEN,
    WAITING,
    NodeInfo,
    Within,
    jobs_json,
    jobs_of,
)

__all__ = ["DEFAULT_OUTPUT_LIMIT", "SqlStateStore"]

T = TypeVar("T")
D = TypeVar("D", Claim, Finish)
DEFAULT_OUTPUT_LIMIT: int | None = None  # a run's output is kept as the run kept it
_RUNNING = RunState.RUNNING

POST_LINGER = 0.05
"""Seconds the group commit lets posted writes (runs' outcomes) gather before it writes them:
a burst's outcomes go in one statement after the burst (see `sqlbatch`)."""


class SqlStateStore(SqlShared, SqlPauses, CheckedStore):
    """Runs, nodes, marks, queue, outbox and kill requests in SQL tables (docs/state.md).

    History is not bounded by count here: `prune` (by age and count per job) keeps it in
    bounds. A record's output is kept as the run kept it (its job's ``output_limit``);
    `output_limit`, if given, bounds it further (the end is kept).
    """

    in_process = False  # see `StateStore.in_process`: other processes share it

    def __init__(
        self, dialect: Dialect, *, output_limit: int | None = DEFAULT_OUTPUT_LIMIT
    ) -> None:
        if output_limit is not None and (output_limit.__class__ is not int or output_limit < 0):
            raise ValueError(f"output_limit must be a whole number >= 0, not {output_limit!r}")
        self._d = dialect
        self._output_limit = output_limit
        self._q = QUERIES[dialect.engine]
        self._closed = False
        self._group = GroupCommit(self._run_batch, linger=POST_LINGER)
        self._read_lock = threading.Lock()

    @property
    def url(self) -> str:
        """The store's URL, password masked."""
        return self._d.masked_url

    @property
    def output_limit(self) -> int | None:
        return self._output_limit

    @property
    def batches(self) -> int:
        """Write transactions run so far (group commit: one may hold many writes)."""
        return self._group.batches

    @property
    def statements(self) -> int:
        """Statements sent to the database so far (reads and writes)."""
        return self._d.statements

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # -- plumbing --------------------------------------------------------------------------

    def _write(self, op: Op) -> Any:
        if self._closed:
            raise StoreClosedError("the state store is closed")
        return self._group.run(op)

    def _run_batch(self, ops: Sequence[Op]) -> list[Any]:
        """One transaction for `ops`: the claims first (one multi-row insert), then the
        finishes (one multi-row update) and the queue rows they settle, the submitted rows
        (one multi-row insert), then the other writes in order. Each caller's own ops keep
        their order: a caller claims, then finishes."""
        batch = _Batch(ops)
        answers = self._one_kind(batch)
        if answers is not None:
            return answers
        with self._d.transaction() as cur:
            return self._write_mixed(cur, batch)

    def _one_kind(self, batch: _Batch) -> list[Any] | None:
        """The answers of a batch of one kind of op that the dialect writes its fastest way;
        None when the batch is mixed or the dialect has no such way."""
        d, count = self._d, len(batch.ops)
        if len(batch.claims) == count:
            won = d.claims_only(batch.first)
            if won is not None:
                return [batch.claimed(op, won) for op in batch.claims]
        if len(batch.finishes) == count and not batch.settling:
            done = d.finishes_only(batch.final)
            if done is not None:
                return [batch.finished(op, done) for op in batch.finishes]
        if len(batch.submits) == count:
            ids = d.submits_only(self._q["submit"], batch.submits)
            if ids is not None:
                return list(ids)
        return None

    def _write_mixed(self, cur: Any, batch: _Batch) -> list[Any]:
        d, q = self._d, self._q
        # (SQLite's BEGIN IMMEDIATE holds the whole database already: nothing is locked)
        locked = d.lock_jobs(cur, batch.limited) if batch.limited else set()
        won = d.insert_claims(cur, q["claim"], batch.first) if batch.first else set()
        done = self._write_finishes(cur, batch.final)
        ids = d.insert_submits(cur, q["submit"], batch.submits) if batch.submits else []
        within = self._write_limited(cur, batch.limited, locked) if batch.limited else {}
        return batch.answers(cur, won, done, iter(ids), within)

    def _write_limited(
        self, cur: Any, limited: list[LimitedClaim], locked: set[str]
    ) -> dict[int, Within]:
        """The claims under a limit the dialect writes together (by `id()` of the op): the
        first of each job, and the skipped records of those that find their job busy, in one
        statement (a statement's count does not see its own inserts). The others
        (a job's second claim in the batch; every claim, where the dialect writes none
        together) write themselves, in order, when answered. The claims of the jobs left
        unlocked (`locked`: every claim of them yielding) write nothing: `LOCKED`."""
        d = self._d
        answers: dict[int, Within] = {id(op): LOCKED for op in limited if op.job in locked}
        first: list[LimitedClaim] = []
        seen: set[str] = set(locked)
        for op in limited:
            if op.job not in seen:
                seen.add(op.job)
                first.append(op)
        written = d.write_within(cur, first) if first else {}
        if written is None:
            return answers
        for op in first:
            answers[id(op)] = written[op.run_id]
        return answers

    def _write_finishes(self, cur: Any, final: list[Finish]) -> set[str]:
        """Write the finishes and settle the queue rows of those written: their run ids."""
        if not final:
            return set()
        done = self._d.finish_many(cur, self._q["finish"], final)
        settles = [
            {"state": f.settle[1], "run_id": f.run_id, "queue_id": f.settle[0]}
            for f in final
            if f.settle is not None and f.run_id in done
        ]
        if settles:
            self._d.settle_many(cur, self._q["settle"], settles)
        return done

    def _read(self, fn: Callable[[Any], T], *, fresh: bool = True) -> T:
        """`fn(cursor)` on the read connection; `fresh`: after the writes posted so far are
        written (this process reads what it wrote, see `finish`)."""
        if fresh and self._group.posted:
            self._group.flush()
        with self._read_lock:
            return self._d.read(fn, closed=self._closed)

    # -- runs ------------------------------------------------------------------------------

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
        if self._closed:
            raise StoreClosedError("the state store is closed")
        return bool(
            self._group.run(self._claim_op(job, slot, trigger, run_id, node, attempt, started))
        )

    def _claim_many(self, claims: Claims) -> list[bool]:
        """Claim several runs in one transaction."""
        if self._closed:
            raise StoreClosedError("the state store is closed")
        if not claims:
            return []
        ops = [self._claim_op(*c) for c in claims]
        return [bool(a) for a in self._group.run_many(ops)]

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
        if self._closed:
            raise StoreClosedError("the state store is closed")
        op = self._limited_op(job, slot, trigger, run_id, node, attempt, started, limit, skip)
        answer: Within = self._group.run(op)
        return answer

    def _claim_many_within(self, claims: LimitedClaims, yielding: bool) -> list[Within]:
        if self._closed:
            raise StoreClosedError("the state store is closed")
        ops = [self._limited_op(*c, yielding=yielding) for c in claims]
        return list(self._group.run_many(ops))

    def _limited_op(
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
        *,
        yielding: bool = False,
    ) -> LimitedClaim:
        """The write of one `claim_within`, run in the transaction of its batch (after the
        batch's plain claims and finishes, once the batch holds its jobs' locks; `yielding`:
        see `LimitedClaim`)."""
        d, q = self._d, self._q
        values = {**self._claim_op(job, slot, trigger, run_id, node, attempt, started).values}
        values["limit"] = limit

        def write(cur: Any) -> Within:
            if d.execute(cur, q["claim_within"], values).rowcount == 1:
                return CLAIMED
            if skip is not None:  # busy, or the key taken: then this insert is refused too
                return self._write_skipped(cur, values, skip)
            live, taken = d.execute(cur, q["live_runs"], values).fetchone()
            return TAKEN if taken or int(live) < limit else BUSY

        return LimitedClaim(job, run_id, values, skip, write, yielding)

    def _wait_in_line(
        self,
        job: str,
        slot: datetime | None,
        run_id: str,
        node: str,
        started: datetime,
        skip: str,
    ) -> Within:
        d, q, t = self._d, self._q, self._d.instant
        values = {"job": job, "slot": t(slot), "run_id": run_id, "node": node}
        values["started"] = t(started)

        def write(cur: Any) -> Within:
            d.execute(cur, q["drop_stale_waiting"], values)
            for _ in range(2):  # the waiting row may leave between the insert and the read
                if d.execute(cur, q["wait_in_line"], values).rowcount == 1:
                    return WAITING
                row = d.execute(cur, q["waiting_slot"], values).fetchone()
                if row is not None:
                    break
            else:
                return TAKEN  # another slot comes and goes: leave this one to it
            waiting_slot, waiting_run, _node = row
            if waiting_run == run_id or (slot is not None and waiting_slot == values["slot"]):
                return TAKEN
            return self._write_skipped(cur, {**values, "attempt": 1, "trigger": "schedule"}, skip)

        answer: Within = self._write(write)
        return answer

    def _write_skipped(self, cur: Any, claim: dict[str, Any], skip: str) -> Within:
        """The ``skipped`` record of a slot whose `claim` (its values) found its job busy (with
        `skip` as its reason), in the claim's transaction; `TAKEN` when the key is taken."""
        record = {
            **claim,
            "state": RunState.SKIPPED.value,
            "ended": claim["started"],
            "exit_code": None,
            "reason": skip,
            "output_tail": "",
            "last_slot": None,
        }
        written = self._d.execute(cur, self._q["record"], record).rowcount == 1
        return SKIPPED_BY_LIMIT if written else TAKEN

    def _leave_line(self, job: str, run_id: str) -> bool:
        d, sql = self._d, self._q["leave_line"]
        params = {"job": job, "run_id": run_id}
        return bool(self._write(lambda cur: d.execute(cur, sql, params).rowcount == 1))

    def release(self, run_ids: Sequence[str]) -> int:
        sql = self._q["release"]
        d = self._d

        def delete(cur: Any) -> int:
            return sum(d.execute(cur, sql, {"run_id": run_id}).rowcount for run_id in run_ids)

        return int(self._write(delete)) if run_ids else 0

    def _claim_op(
        self,
        job: str,
        slot: datetime | None,
        trigger: str,
        run_id: str,
        node: str,
        attempt: int,
        started: datetime,
    ) -> Claim:
        t = self._d.instant
        at = t(slot)
        values = {
            "run_id": run_id,
            "job": job,
            "slot": at,
            "attempt": attempt,
            "trigger": trigger,
            "node": node,
            "state": _RUNNING.value,
            "started": t(started),
        }
        return Claim(run_id, None if slot is None else (job, at, attempt), values)

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
        t = self._d.instant
        first = None if started is None else t(started)
        values = {
            "state": state.value,
            "ended": t(ended),
            "exit_code": exit_code,
            "reason": reason,
            "output_tail": output_tail,
            "started": first,
            "run_id": run_id,
        }
        if self._closed:
            raise StoreClosedError("the state store is closed")
        row = None if settle is None else (settle, queue_state_of(state))
        if not wait:
            self._group.post(Finish(run_id, values, row))
            return True
        return bool(self._group.run(Finish(run_id, values, row)))

    def _record(self, values: dict[str, Any]) -> bool:
        v, t = values, self._d.instant
        params = {
            **v,
            "slot": t(v["slot"]),
            "state": RunState(v["state"]).value,
            "started": t(v["started"]),
            "ended": t(v["ended"]),
            "last_slot": t(v["last_slot"]),
        }
        sql = self._q["record"]
        return bool(self._write(lambda cur: self._d.execute(cur, sql, params).rowcount == 1))

    def _history(
        self, job: str | None, limit: int, since: datetime | None, state: RunState | None
    ) -> list[RunRecord]:
        query = (
            "history"
            + ("" if job is None else "_of_job")
            + ("" if since is None else "_since")
            + ("" if state is None else "_in_state")
        )
        sql = self._q[query]
        params = {
            "job": job,
            "since": self._d.instant(since),
            "state": None if state is None else state.value,
            "limit": limit,
        }
        rows = self._read(lambda cur: self._d.execute(cur, sql, params).fetchall())
        return [self._run_record(row) for row in rows]

    def run(self, run_id: str) -> RunRecord | None:
        sql, params = self._q["run"], {"run_id": run_id}
        row = self._read(lambda cur: self._d.execute(cur, sql, params).fetchone())
        return None if row is None else self._run_record(row)

    def _set_output(self, run_id: str, output: str) -> bool:
        if self._closed:
            raise StoreClosedError("the state store is closed")
        sql, params = self._q["set_output"], {"output_tail": output, "run_id": run_id}
        return bool(self._write(lambda cur: self._d.execute(cur, sql, params).rowcount == 1))

    def _run_record(self, row: Sequence[Any]) -> RunRecord:
        dt = self._d.datetime
        run_id, job, slot, attempt, trigger, node, state, started, ended = row[:9]
        exit_code, reason, tail, last_slot = row[9:13]
        return RunRecord._of(
            record_values(
                run_id,
                job,
                dt(slot),
                trigger,
                attempt,
                node,
                RunState(state),
                dt(started),  # type: ignore[arg-type]
                dt(ended),
                exit_code,
                reason,
                tail,
                dt(last_slot),
            )
        )

    def close(self) -> None:
        """Refuse writes from now on and release the connections; `history` still answers
        (through a connection opened for the call)."""
        if self._closed:
            return
        self._closed = True
        # Writes already queued (their callers checked before the flag) are answered first,
        # posted ones too: the write connection is not closed under a transaction.
        self._group.close()
        self._group.drain()
        with self._read_lock:
            self._d.close()

    # -- the clock and the nodes ----------------------------------------------------------------

    def now(self) -> datetime:
        sql = self._q["now"]
        value = self._read(lambda cur: self._d.execute(cur, sql, {}).fetchone()[0])
        result = self._d.datetime(value)
        assert result is not None
        return result

    def _join(self, node: NodeInfo, lease: timedelta) -> None:
        d = self._d
        params = {
            "name": node.name,
            "host": node.host,
            "pid": node.pid,
            "process_started": float(node.process_started),
            "started": d.instant(node.started),
            "max_workers": node.max_workers,
            "lease": d.length(lease),
            "lease_seconds": lease.total_seconds(),
            "definitions_digest": node.definitions_digest,
            "defined_jobs": jobs_json(node.defined_jobs),
        }
        sql, holder = self._q["join"], self._q["node"]

        def op(cur: Any) -> Any:
            if d.execute(cur, sql, params).fetchone() is not None:
                return None
            return d.execute(cur, holder, {"name": node.name}).fetchone()

        taken = self._write(op)
        if taken is not None:
            raise NodeNameTakenError(
                f"node name {node.name!r} is taken by a live node (host {taken[1]}, pid "
                f"{taken[2]}): choose another name (--node) or stop that node"
            )

    def heartbeat(self, name: str, *, lease: timedelta) -> bool:
        params, sql = {"name": name, "lease": self._d.length(lease)}, self._q["heartbeat"]
        return bool(self._write(lambda cur: self._d.execute(cur, sql, params).rowcount == 1))

    def set_definitions(self, name: str, *, digest: str | None, jobs: Sequence[str]) -> bool:
        sql = self._q["set_definitions"]
        params = {"name": name, "definitions_digest": digest, "defined_jobs": jobs_json(jobs)}
        return bool(self._write(lambda cur: self._d.execute(cur, sql, params).rowcount == 1))

    def leave(self, name: str) -> None:
        sql = self._q["leave"]
        self._write(lambda cur: self._d.execute(cur, sql, {"name": name}))

    def nodes(self) -> list[NodeInfo]:
        sql = self._q["nodes"]
        return [
            self._node_of(r) for r in self._read(lambda c: self._d.execute(c, sql, {}).fetchall())
        ]

    def expired_nodes(self, *, lease: timedelta) -> list[NodeInfo]:
        sql, params = self._q["expired_nodes"], {"lease": self._d.length(lease)}
        rows = self._read(lambda cur: self._d.execute(cur, sql, params).fetchall())
        return [self._node_of(row) for row in rows]

    def _node_of(self, row: Sequence[Any]) -> NodeInfo:
        dt = self._d.datetime
        name, host, pid, process_started, started, heartbeat, max_workers, state = row[:8]
        lease, digest, jobs, skew = row[8:12]
        return NodeInfo(
            name=name,
            host=host,
            pid=pid,
            process_started=process_started,
            started=dt(started),  # type: ignore[arg-type]
            heartbeat=dt(heartbeat),
            max_workers=max_workers,
            state=state,
            lease=None if lease is None else timedelta(seconds=lease),
            definitions_digest=digest,
            defined_jobs=jobs_of(jobs),
            clock_skew=None if skew is None else float(skew),
        )

    def take_over(self, dead: str, *, by: str, requeue: Collection[str] = ()) -> list[RunRecord]:
        d, q = self._d, self._q
        params = {"reason": lost_reason(dead), "unstarted": lost_reason(dead, ran=False)}

        def op(cur: Any) -> list[Any]:
            d.execute(cur, q["node_dead"], {"name": dead})
            rows = d.execute(cur, q["abandon"], {**params, "node": dead}).fetchall()
            if requeue:
                self._requeue(cur, dead, requeue)
            d.execute(cur, q["queue_fail_node"], {"node": dead})
            return list(rows)

        records = [self._run_record(row) for row in self._write(op)]
        records.sort(key=lambda r: r.started)
        return records

    # -- run processes (schema 2) --------------------------------------------------------------

    def _set_process(self, run_id: str, pid: int, process_started: float) -> bool:
        params = {"pid": pid, "pid_started": process_started, "run_id": run_id}
        sql = self._q["set_process"]
        return bool(self._write(lambda cur: self._d.execute(cur, sql, params).rowcount == 1))

    def processes(self, node: str) -> list[tuple[str, int, float]]:
        sql = self._q["processes"]
        rows = self._read(lambda cur: self._d.execute(cur, sql, {"node": node}).fetchall())
        return [(str(r[0]), int(r[1]), float(r[2] or 0.0)) for r in rows]


class _Batch:
    """The ops of one batch by kind; a claim or finish repeated in it loses (`_distinct`)."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.ops = ops
        self.claims = [op for op in ops if isinstance(op, Claim)]
        self.finishes = [op for op in ops if isinstance(op, Finish)]
        self.submits = [op for op in ops if isinstance(op, Submit)]
        self.limited = [op for op in ops if isinstance(op, LimitedClaim)]
        self.first, self.repeats = _distinct(self.claims)
        self.final, self.again = _distinct(self.finishes)

    @property
    def settling(self) -> bool:
        """Whether a finish settles a queue row."""
        return any(f.settle for f in self.final)

    def answers(
        self,
        cur: Any,
        won: set[str],
        done: set[str],
        new: Iterator[int],
        within: dict[int, Within],
    ) -> list[Any]:
        """The answer of each op, in order, once the claims, finishes and submits are written
        (`won`, `done`, `new`: what they wrote; `within`: the claims under a limit written
        together, by `id()`); the other ops are run here."""
        answers: list[Any] = []
        for op in self.ops:
            if isinstance(op, Claim):
                answers.append(self.claimed(op, won))
            elif isinstance(op, Finish):
                answers.append(self.finished(op, done))
            elif isinstance(op, Submit):
                answers.append(next(new))
            elif isinstance(op, LimitedClaim):
                answer = within.get(id(op))
                answers.append(op.write(cur) if answer is None else answer)
            else:
                answers.append(op(cur))
        return answers

    def claimed(self, op: Claim, won: set[str]) -> bool:
        return op.run_id in won and id(op) not in self.repeats

    def finished(self, op: Finish, done: set[str]) -> bool:
        return op.run_id in done and id(op) not in self.again


def _distinct(ops: list[D]) -> tuple[list[D], set[int]]:
    """The claims (or finishes) of one batch each key and run id once, and the ids (`id()`)
    of the repeats, which lose (as they would in the next batch)."""
    seen_ids: set[str] = set()
    seen_keys: set[tuple[Any, ...]] = set()
    first: list[D] = []
    repeats: set[int] = set()
    for op in ops:
        key = op.key if isinstance(op, Claim) else None
        if op.run_id in seen_ids or (key is not None and key in seen_keys):
            repeats.add(id(op))
            continue
        seen_ids.add(op.run_id)
        if key is not None:
            seen_keys.add(key)
        first.append(op)
    return first, repeats
