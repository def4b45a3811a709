"""`SqlStateStore`: the `StateStore` protocol over a SQL database, whatever the engine.

The engines (``sqlite.py``, ``postgres.py``) give a `Dialect`: how to connect, begin and
commit, how instants and lengths of time are written, the SQL of the store's clock, and how a
batch of claims is inserted. Every query here is written once with ``?`` placeholders and
``{now}``-style fragments the dialect fills in. Writes go through `GroupCommit` (concurrent
writes share a transaction); reads use a connection of their own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from .base import NodeNameTakenError, StoreClosedError
from .memory_shared import check_node
from .records import RunRecord, RunState, aware_utc, queue_state_of, record_values
from .sqlbatch import Claim, Finish, GroupCommit, Op, Submit
from .sqldialect import Dialect
from .sqlqueries import RUN_COLUMNS, Q
from .sqlshared import SqlShared
from .values import NodeInfo

__all__ = ["DEFAULT_OUTPUT_LIMIT", "SqlStateStore"]

T = TypeVar("T")
D = TypeVar("D", Claim, Finish)
DEFAULT_OUTPUT_LIMIT: int | None = None  # a run's output is kept as the run kept it
_RUNNING = RunState.RUNNING

POST_LINGER = 0.05
"""Seconds the group commit lets posted writes (runs' outcomes) gather before it writes them:
a burst's outcomes go in one statement after the burst (see `sqlbatch`)."""


class SqlStateStore(SqlShared):
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
        self._q = {name: dialect.sql(text) for name, text in Q.items()}
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
        d = self._d
        claims = [op for op in ops if isinstance(op, Claim)]
        finishes = [op for op in ops if isinstance(op, Finish)]
        first, repeats = _distinct(claims)
        final, again = _distinct(finishes)
        if len(claims) == len(ops):
            won = d.claims_only(first)
            if won is not None:
                return [op.run_id in won and id(op) not in repeats for op in claims]
        if len(finishes) == len(ops) and not any(f.settle for f in final):
            done = d.finishes_only(final)
            if done is not None:
                return [op.run_id in done and id(op) not in again for op in finishes]
        submits = [op for op in ops if isinstance(op, Submit)]
        if len(submits) == len(ops):
            ids = d.submits_only(self._q["submit"], submits)
            if ids is not None:
                return list(ids)
        with d.transaction() as cur:
            won = d.insert_claims(cur, self._q["claim"], first) if first else set()
            done = d.finish_many(cur, self._q["finish"], final) if final else set()
            settles = [
                (f.settle[1], f.run_id, f.settle[0])
                for f in final
                if f.settle is not None and f.run_id in done
            ]
            if settles:
                d.settle_many(cur, self._q["settle"], settles)
            new = iter(d.insert_submits(cur, self._q["submit"], submits) if submits else [])
            answers: list[Any] = []
            for op in ops:
                if isinstance(op, Claim):
                    answers.append(op.run_id in won and id(op) not in repeats)
                elif isinstance(op, Finish):
                    answers.append(op.run_id in done and id(op) not in again)
                elif isinstance(op, Submit):
                    answers.append(next(new))
                else:
                    answers.append(op(cur))
            return answers

    def _read(self, fn: Callable[[Any], T], *, fresh: bool = True) -> T:
        """`fn(cursor)` on the read connection; `fresh`: after the writes posted so far are
        written (this process reads what it wrote, see `finish`)."""
        if fresh and self._group.posted:
            self._group.flush()
        with self._read_lock:
            return self._d.read(fn, closed=self._closed)

    def _tail(self, text: str) -> str:
        limit = self._output_limit
        if limit is None or len(text) <= limit:
            return text
        return text[len(text) - limit :] if limit else ""

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
        if self._closed:
            raise StoreClosedError("the state store is closed")
        return bool(
            self._group.run(self._claim_op(job, slot, trigger, run_id, node, attempt, started))
        )

    def claim_many(
        self, claims: Sequence[tuple[str, datetime | None, str, str, str, int, datetime]]
    ) -> list[bool]:
        """Claim several runs in one transaction: (job, slot, trigger, run_id, node, attempt,
        started) each; an answer per claim, as `claim` gives it."""
        if self._closed:
            raise StoreClosedError("the state store is closed")
        if not claims:
            return []
        ops = [self._claim_op(*c) for c in claims]
        return [bool(a) for a in self._group.run_many(ops)]

    def release(self, run_ids: Sequence[str]) -> int:
        sql = self._q["release"]
        d = self._d

        def delete(cur: Any) -> int:
            return sum(d.execute(cur, sql, (run_id,)).rowcount for run_id in run_ids)

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
        v = record_values(run_id, job, slot, trigger, attempt, node, _RUNNING, started)
        t = self._d.instant
        slot = v["slot"]
        values = (run_id, job, t(slot), attempt, trigger, node, _RUNNING.value, t(v["started"]))
        return Claim(run_id, None if slot is None else (job, values[2], attempt), values)

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
        ended = aware_utc(ended, "ended")
        t = self._d.instant
        first = None if started is None else t(aware_utc(started, "started"))
        if exit_code is not None and exit_code.__class__ is not int:
            raise TypeError(f"exit_code must be an int or None, not {exit_code!r}")
        if reason is not None and reason.__class__ is not str:
            raise TypeError(f"reason must be a string or None, not {reason!r}")
        if output_tail.__class__ is not str:
            raise TypeError(f"output_tail must be a string, not {output_tail!r}")
        values = (state.value, t(ended), exit_code, reason, self._tail(output_tail), first, run_id)
        if self._closed:
            raise StoreClosedError("the state store is closed")
        row = None if settle is None else (settle, queue_state_of(state))
        if not wait:
            self._group.post(Finish(run_id, values, row))
            return True
        return bool(self._group.run(Finish(run_id, values, row)))

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
        if output_tail.__class__ is str:
            output_tail = self._tail(output_tail)
        v = record_values(
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
        t = self._d.instant
        params = (
            run_id,
            job,
            t(v["slot"]),
            attempt,
            trigger,
            node,
            RunState(v["state"]).value,
            t(v["started"]),
            t(v["ended"]),
            exit_code,
            reason,
            v["output_tail"],
            t(v["last_slot"]),
        )
        sql = self._q["record"]
        return bool(self._write(lambda cur: self._d.execute(cur, sql, params).rowcount == 1))

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
        where: list[str] = []
        params: list[Any] = []
        if job is not None:
            where.append("job = ?")
            params.append(job)
        if since is not None:
            where.append("started >= ?")
            params.append(self._d.instant(aware_utc(since, "since")))
        if state is not None:
            where.append("state = ?")
            params.append(RunState(state).value)
        sql = self._d.sql(
            f"SELECT {RUN_COLUMNS} FROM jobscheduler_runs"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + " ORDER BY started DESC, seq DESC LIMIT ?"
        )
        params.append(limit)
        rows = self._read(lambda cur: self._d.execute(cur, sql, params).fetchall())
        return [self._run_record(row) for row in rows]

    def run(self, run_id: str) -> RunRecord | None:
        sql = self._q["run"]
        row = self._read(lambda cur: self._d.execute(cur, sql, (run_id,)).fetchone())
        return None if row is None else self._run_record(row)

    def set_output(self, run_id: str, output: str) -> bool:
        if output.__class__ is not str:
            raise TypeError(f"output must be a string, not {output!r}")
        if self._closed:
            raise StoreClosedError("the state store is closed")
        params, sql = (self._tail(output), run_id), self._q["set_output"]
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
        value = self._read(lambda cur: self._d.execute(cur, sql, ()).fetchone()[0])
        result = self._d.datetime(value)
        assert result is not None
        return result

    def join(self, node: NodeInfo, *, lease: timedelta) -> None:
        check_node(node)
        d = self._d
        params = (
            node.name,
            node.host,
            node.pid,
            float(node.process_started),
            d.instant(aware_utc(node.started, "started")),
            node.max_workers,
            d.length(lease),
        )
        sql, holder = self._q["join"], self._q["node"]

        def op(cur: Any) -> Any:
            if d.execute(cur, sql, params).fetchone() is not None:
                return None
            return d.execute(cur, holder, (node.name,)).fetchone()

        taken = self._write(op)
        if taken is not None:
            raise NodeNameTakenError(
                f"node name {node.name!r} is taken by a live node (host {taken[1]}, pid "
                f"{taken[2]}): choose another name (--node) or stop that node"
            )

    def heartbeat(self, name: str, *, lease: timedelta) -> bool:
        params, sql = (name, self._d.length(lease)), self._q["heartbeat"]
        return bool(self._write(lambda cur: self._d.execute(cur, sql, params).rowcount == 1))

    def leave(self, name: str) -> None:
        sql = self._q["leave"]
        self._write(lambda cur: self._d.execute(cur, sql, (name,)))

    def nodes(self) -> list[NodeInfo]:
        sql = self._q["nodes"]
        return [self._node(r) for r in self._read(lambda c: self._d.execute(c, sql, ()).fetchall())]

    def expired_nodes(self, *, lease: timedelta) -> list[NodeInfo]:
        sql, params = self._q["expired_nodes"], (self._d.length(lease),)
        rows = self._read(lambda cur: self._d.execute(cur, sql, params).fetchall())
        return [self._node(row) for row in rows]

    def _node(self, row: Sequence[Any]) -> NodeInfo:
        dt = self._d.datetime
        name, host, pid, process_started, started, heartbeat, max_workers, state = row
        return NodeInfo(
            name=name,
            host=host,
            pid=pid,
            process_started=process_started,
            started=dt(started),  # type: ignore[arg-type]
            heartbeat=dt(heartbeat),
            max_workers=max_workers,
            state=state,
        )

    def take_over(self, dead: str, *, by: str) -> list[RunRecord]:
        d, q = self._d, self._q
        reason = f"node lost: {dead}"

        def op(cur: Any) -> list[Any]:
            d.execute(cur, q["node_dead"], (dead,))
            rows = d.execute(cur, q["abandon"], (reason, dead)).fetchall()
            d.execute(cur, q["queue_fail_node"], (dead,))
            return list(rows)

        records = [self._run_record(row) for row in self._write(op)]
        records.sort(key=lambda r: r.started)
        return records

    # -- run processes (schema 2) --------------------------------------------------------------

    def set_process(self, run_id: str, *, pid: int, process_started: float) -> bool:
        params, sql = (int(pid), float(process_started), run_id), self._q["set_process"]
        return bool(self._write(lambda cur: self._d.execute(cur, sql, params).rowcount == 1))

    def processes(self, node: str) -> list[tuple[str, int, float]]:
        sql = self._q["processes"]
        rows = self._read(lambda cur: self._d.execute(cur, sql, (node,)).fetchall())
        return [(str(r[0]), int(r[1]), float(r[2] or 0.0)) for r in rows]


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
