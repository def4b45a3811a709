"""The SQL store's marks, queue, outbox, kill requests and retention (a mixin of
`SqlStateStore`, kept apart to keep each module short). Its ``_``-methods store what
`CheckedStore`'s public methods have checked."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from .sqlbatch import Claim, Op, Submit
from .sqldialect import MANY_JOBS, Dialect
from .values import (
    AGING,
    KEEP,
    Beat,
    JobMark,
    Keep,
    Look,
    PendingAlert,
    QueuedRun,
    TakeClaims,
    args_of,
    host_matches,
    lowest_caps,
    read_args,
    within,
)

__all__ = ["SqlShared"]

T = TypeVar("T")
_MANY_JOBS = MANY_JOBS
# Distinct (job, host) pairs of pending rows a `look` reads at most; past them, it answers
# "something pending" and the take sorts it out.
_LOOK_ROWS = 1000


class SqlShared:
    _d: Dialect
    _q: dict[str, str]

    def _write(self, op: Op) -> Any:
        raise NotImplementedError

    def _read(self, fn: Callable[[Any], T], *, fresh: bool = True) -> T:
        raise NotImplementedError

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
        raise NotImplementedError

    def _any(self, query: str) -> bool:
        """Whether query `query` finds a row: a read on the read connection, so that polling
        an empty queue or outbox takes no write lock (on SQLite, the one lock all processes
        share) and no write transaction. Posted writes (finished runs) are not waited for:
        what is polled (pending rows, due alerts) is not what they change."""
        sql = self._q[query]
        found = self._read(lambda cur: self._d.execute(cur, sql, {}).fetchone(), fresh=False)
        return found is not None

    # -- the heartbeat and what follows it (the rest of the nodes' part: sqlstore.py) ------

    def beat(self, name: str, *, lease: timedelta, clock_skew: float | None = None) -> Beat:
        d = self._d
        skew = clock_skew if d.clock_elsewhere else None
        sql, params = self._q["beat"], {"name": name, "lease": d.length(lease), "clock_skew": skew}
        row = self._write(lambda cur: d.execute(cur, sql, params).fetchone())
        if row is None:
            return Beat(alive=False)
        clock = d.datetime(row[4]) if d.clock_elsewhere else None
        return Beat(
            alive=True,
            expired=row[0],
            neighbours=row[1],
            alerts_due=bool(row[2]),
            stale_rows=bool(row[3]),
            clock=clock,
        )

    # -- marks -----------------------------------------------------------------------------

    def _mark_of(self, row: Sequence[Any]) -> JobMark:
        job, last_slot, failures, paused_reason = row
        return JobMark(
            job=job,
            last_slot=self._d.datetime(last_slot),
            failures=failures,
            paused_reason=paused_reason,
        )

    def mark(self, job: str) -> JobMark | None:
        sql = self._q["mark"]
        row = self._read(lambda cur: self._d.execute(cur, sql, {"job": job}).fetchone())
        return None if row is None else self._mark_of(row)

    def marks(self) -> dict[str, JobMark]:
        sql = self._q["marks"]
        rows = self._read(lambda cur: self._d.execute(cur, sql, {}).fetchall())
        return {mark.job: mark for mark in map(self._mark_of, rows)}

    def _set_mark(
        self,
        job: str,
        last_slot: datetime | Keep | None,
        failures: int | Keep,
        paused_reason: str | Keep | None,
    ) -> JobMark:
        slot = last_slot if isinstance(last_slot, datetime) else None
        params = {
            "job": job,
            "last_slot": self._d.instant(slot),
            "failures": 0 if isinstance(failures, Keep) else failures,
            "paused_reason": None if isinstance(paused_reason, Keep) else paused_reason,
            "set_failures": 0 if isinstance(failures, Keep) else 1,
            "set_paused_reason": 0 if isinstance(paused_reason, Keep) else 1,
        }
        sql = self._q["set_mark"]
        row = self._write(lambda cur: self._d.execute(cur, sql, params).fetchone())
        return self._mark_of(row)

    def _set_marks(self, last_slots: dict[str, datetime]) -> None:
        d = self._d
        # In the order of the jobs: nodes writing the same jobs' marks then lock their rows in
        # one order and wait for each other, never in a cycle (PostgreSQL: "deadlock detected").
        rows = [(job, d.instant(slot)) for job, slot in sorted(last_slots.items())]
        template = self._q["set_marks"]
        self._write(lambda cur: d.set_marks(cur, template, rows))

    # -- queue -------------------------------------------------------------------------------

    def _queued_of(
        self, row: Sequence[Any], args: dict[str, Any] | Keep | None = KEEP
    ) -> QueuedRun:
        """A row of the queue's columns; `args` decoded already (`KEEP`: decode them here)."""
        queue_id, job, text, priority, host, submitted, state, run_id, node, reason, attempt = row
        return QueuedRun(
            id=queue_id,
            job=job,
            args=args_of(text) if isinstance(args, Keep) else args,
            priority=priority,
            host=host,
            submitted=self._d.datetime(submitted),  # type: ignore[arg-type]
            state=state,
            run_id=run_id,
            node=node,
            reason=reason,
            attempt=attempt,
        )

    def _submit(self, job: str, args: str | None, priority: int, host: str | None) -> int:
        return int(
            self._write(Submit({"job": job, "args": args, "priority": priority, "host": host}))
        )

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
        if not self._any("any_pending"):
            return []
        taken: list[QueuedRun] = self._write(
            self._take_op(node, jobs, limit, hostname, most, claims, limits)
        )
        return taken

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
        d = self._d
        job, args, priority, host = row
        if (
            claims is not None
            and job in claims.jobs
            and job in jobs
            and job not in limits
            and job not in most
            and host_matches(host, node, hostname)
        ):
            alone = self._submit_taken_alone(row, node, jobs, claims)
            if alone is not None:
                return alone
        sql = self._q["submit"]
        values = {"job": job, "args": args, "priority": priority, "host": host}
        take = self._take_op(node, jobs, limit, hostname, most, claims, limits)

        def op(cur: Any) -> tuple[int, list[QueuedRun]]:
            queue_id = int(d.execute(cur, sql, values).fetchone()[0])
            taken = take(cur)
            if all(r.id != queue_id for r in taken):
                d.notify(cur, "queue")  # left pending: for whichever node frees a worker
            return queue_id, taken

        answer: tuple[int, list[QueuedRun]] = self._write(op)
        return answer

    def _submit_taken_alone(
        self,
        row: tuple[str, str | None, int, str | None],
        node: str,
        jobs: Collection[str],
        claims: TakeClaims,
    ) -> tuple[int, list[QueuedRun]] | None:
        """`_submit_take` of a row that the node may take and whose run its take claims (no
        limit), in one statement where the engine has it (``submit_taken``: one round trip
        on PostgreSQL, in autocommit on a connection of its own, so that it never waits for
        a transaction of the group commit under way; it needs none of the writes queued
        there): the row inserted taken, with its run, when no pending row comes first.
        None: nothing inserted (such a row is pending, or the engine has no such statement)."""
        d = self._d
        sql = self._q.get("submit_taken")
        if sql is None:  # only engines that run a statement alone have it
            return None
        job, args, priority, host = row
        params = {
            "job": job,
            "args": args,
            "priority": priority,
            "host": host,
            "node": node,
            "run_id": claims.run_ids[0],
            "started": claims.started,
            "jobs": sorted(set(jobs)),
            "aging": AGING,
        }

        def insert(cur: Any) -> list[Any]:
            return list(d.execute(cur, sql, params).fetchall())

        inserted: list[Any] = d.statement_only(insert)
        if not inserted:
            return None
        [taken] = inserted
        return int(taken[0]), [self._queued_of(taken, args_of(args))]

    def _take_op(
        self,
        node: str,
        jobs: Collection[str],
        limit: int,
        hostname: str | None,
        most: Mapping[str, int],
        claims: TakeClaims | None,
        limits: Mapping[str, int],
    ) -> Callable[[Any], list[QueuedRun]]:
        """The write of a take (`_take`), run in a transaction's cursor."""
        taken_jobs = set(jobs)
        names = sorted(taken_jobs)
        d = self._d
        limited = {name: cap for name, cap in limits.items() if name in taken_jobs}
        take_rows = self._q["take_rows"]

        def op(cur: Any) -> list[QueuedRun]:
            caps: Mapping[str, int] = most
            wanted = names
            if limited:  # counted over every node in this transaction: full jobs left out
                caps = lowest_caps(most, self.room_within(cur, limited))
                wanted = [name for name in names if caps.get(name) != 0]
                if not wanted:
                    return []
            candidates, params = self._candidates(wanted, limit)
            rows = d.execute(cur, candidates, params).fetchall()
            names_wanted = set(wanted)
            matching = [
                (qid, job)
                for qid, job, host in rows
                if job in names_wanted and host_matches(host, node, hostname)
            ]
            picked = within(matching, limit, caps, lambda row: row[1])
            if not picked:
                return []
            # The run id each row of a job in `claims` gets (written with the take's update).
            run_ids = iter(claims.run_ids) if claims is not None else iter(())
            claimed = claims.jobs if claims is not None else ()
            chosen = [(qid, next(run_ids) if job in claimed else None) for qid, job in picked]
            taken: list[Any] = []
            # In chunks: the engines bound a statement's parameters.
            for at in range(0, len(chosen), _MANY_JOBS // 2):
                chunk = chosen[at : at + _MANY_JOBS // 2]
                ids = ", ".join(d.param(f"id_{n}") for n in range(len(chunk)))
                values: dict[str, Any] = {f"id_{n}": qid for n, (qid, _run) in enumerate(chunk)}
                values["node"] = node
                cases = [
                    f"WHEN {d.param(f'id_{n}')} THEN {d.param(f'run_{n}')}"
                    for n, (_qid, run_id) in enumerate(chunk)
                    if run_id is not None
                ]
                values.update((f"run_{n}", r) for n, (_q, r) in enumerate(chunk) if r is not None)
                sql = take_rows.replace("{ids}", ids).replace(
                    "{cases}", f"CASE id {' '.join(cases)} END" if cases else "NULL"
                )
                taken += d.execute(cur, sql, values).fetchall()
            # RETURNING gives no order: back to the candidates' (priority, then age).
            order = {qid: i for i, (qid, _run) in enumerate(chosen)}
            taken.sort(key=lambda row: order[row[0]])
            rows = self._checked(cur, taken)
            return rows if claims is None else self._claim_taken(cur, rows, node, claims)

        return op

    def _candidates(self, names: list[str], limit: int) -> tuple[str, dict[str, Any]]:
        """The query of a take's candidate rows of jobs `names` (sorted), and its parameters."""
        d = self._d
        # Past _MANY_JOBS names (the engines bound a statement's parameters), the jobs are
        # filtered in Python like the hosts.
        listed = names if len(names) <= _MANY_JOBS else []
        candidates = self._q["take_candidates"].replace(
            "{jobs}",
            f"job IN ({', '.join(d.param(f'job_{n}') for n in range(len(listed)))})"
            if listed
            else "1 = 1",
        )
        # Rows pinned to other hosts are skipped in Python (fnmatch): look a little further.
        params: dict[str, Any] = {f"job_{n}": name for n, name in enumerate(listed)}
        params.update(aging=AGING, limit=limit * 2 + 16)
        return candidates, params

    def room_within(self, cur: Any, limits: Mapping[str, int]) -> dict[str, int]:
        """Inside a write transaction: the runs each job of `limits` (its ``max_instances``)
        may still start, counted over every node: its limit less its live runs and its queue
        rows taken whose runs have not started (a row taken counts from its take; once its run
        is claimed, the run counts instead). On PostgreSQL the jobs' locks are taken first,
        those `claim_within` takes, so that this count and another node's claim under the
        limit never interleave (SQLite: the transaction is the file's one writer). What a take
        asks before it picks rows (one call: what a take that also claims can ask too)."""
        d, q = self._d, self._q
        names = sorted(limits)
        lock = q.get("lock_take_jobs")
        if lock is not None:
            d.execute(cur, lock, {"jobs": json.dumps(names)})
        room = dict(limits)
        for sql, params in self._job_chunks(q["take_limited_live"], names):
            counted = d.execute(cur, sql, params)
            for job, live, submitted, taken in counted.fetchall():
                waiting = max(0, int(taken) - int(submitted))  # taken, not yet claimed
                room[job] = max(0, limits[job] - int(live) - waiting)
        return room

    def _job_chunks(self, sql: str, names: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
        """`sql` with its ``{jobs}`` as ``job IN (…)`` of `names`, with the parameters, a
        `MANY_JOBS` names at a time (the engines bound a statement's parameters)."""
        d = self._d
        for at in range(0, len(names), _MANY_JOBS):
            chunk = names[at : at + _MANY_JOBS]
            listed = ", ".join(d.param(f"job_{n}") for n in range(len(chunk)))
            params: dict[str, Any] = {f"job_{n}": name for n, name in enumerate(chunk)}
            yield sql.replace("{jobs}", f"job IN ({listed})"), params

    def _put_back(self, queue_id: int) -> bool:
        # No notification: the row's job is busy now; the end of its run wakes that node's
        # take (`QueueConsumer.finished`), and the others' polls find the row.
        sql, params = self._q["put_back"], {"queue_id": queue_id}
        return bool(self._write(lambda cur: self._d.execute(cur, sql, params).rowcount == 1))

    def _checked(self, cur: Any, taken: list[Any]) -> list[QueuedRun]:
        """The rows just taken, their arguments read (inside the take's transaction): a row
        whose arguments no run can be given ends ``not_started`` with the reason here, so
        that nothing after the commit can fail on it and strand the rows taken with it."""
        rows: list[QueuedRun] = []
        refuse = self._q["refuse_row"]
        for row in taken:
            try:
                args = read_args(row[2])
            except ValueError as exc:
                reason = f"bad arguments: {exc}"
                self._d.execute(cur, refuse, {"queue_id": row[0], "reason": reason})
                row = (*row[:6], "not_started", None, row[8], reason, row[10])
                args = None
            rows.append(self._queued_of(row, args))
        return rows

    def _claim_taken(
        self, cur: Any, rows: list[QueuedRun], node: str, claims: TakeClaims
    ) -> list[QueuedRun]:
        """Inside the take's transaction: the runs of the rows just taken ``running`` with a
        run id (given by the take's update: see `_take`) claimed, in one statement on
        PostgreSQL; the rows as they are."""
        inserts = [
            self._claim_op(r.job, None, "submit", r.run_id, node, r.attempt, claims.started)
            for r in rows
            if r.state == "running" and r.run_id is not None
        ]
        if inserts:  # fresh run ids and no slot: no key can be taken, every one is inserted
            self._d.insert_claims(cur, self._q["claim"], inserts)
        return rows

    def _requeue(self, cur: Any, dead: str, jobs: Collection[str]) -> None:
        """Inside `take_over`'s transaction: the running rows of node `dead` of `jobs` go
        back to the queue, and the listening nodes are told."""
        d, names = self._d, sorted(set(jobs))
        requeued = 0
        for sql, params in self._job_chunks(self._q["queue_requeue_node"], names):
            requeued += d.execute(cur, sql, {**params, "node": dead}).rowcount
        if requeued:
            d.notify(cur, "queue")

    def look(self, node: str, *, jobs: Collection[str], hostname: str | None = None) -> Look:
        wanted = set(jobs)
        sql, params = self._q["look"], {"pairs": _LOOK_ROWS, "node": node}
        rows = self._read(lambda cur: self._d.execute(cur, sql, params).fetchall())
        pairs = [(job, host) for kind, job, host in rows if kind == "q"]
        mine = frozenset(
            job for job, host in pairs if job in wanted and host_matches(host, node, hostname)
        )
        if len(pairs) >= _LOOK_ROWS:  # too many to tell: the take sorts it out
            return Look(pending=True, kills=len(pairs) < len(rows))
        return Look(pending=bool(mine), kills=len(pairs) < len(rows), jobs=mine)

    def _settle(self, queue_id: int, state: str, run_id: str | None) -> bool:
        sql = self._q["settle"]
        params = {"state": state, "run_id": run_id, "queue_id": queue_id}
        return bool(self._write(lambda cur: self._d.execute(cur, sql, params).rowcount == 1))

    def _settle_pending(self, queue_id: int, state: str, run_id: str | None) -> bool:
        sql = self._q["settle_pending"]
        params = {"state": state, "run_id": run_id, "queue_id": queue_id}
        return bool(self._write(lambda cur: self._d.execute(cur, sql, params).rowcount == 1))

    def _pending_before(
        self, before: datetime, excluding: Collection[str], limit: int
    ) -> list[QueuedRun]:
        d = self._d
        names = sorted(set(excluding))
        listed = names if len(names) <= _MANY_JOBS else []  # past it: filtered in Python
        sql = self._q["pending_before"].replace(
            "{jobs}",
            f"job NOT IN ({', '.join(d.param(f'job_{n}') for n in range(len(listed)))})"
            if listed
            else "1 = 1",
        )
        params: dict[str, Any] = {f"job_{n}": name for n, name in enumerate(listed)}
        params.update(before=d.instant(before), limit=limit)
        rows = self._read(lambda cur: d.execute(cur, sql, params).fetchall())
        left_out = set(names)
        return [r for r in map(self._queued_of, rows) if r.job not in left_out]

    def _queue(self, state: str | None, limit: int) -> list[QueuedRun]:
        sql = self._q["queue_rows" if state is None else "queue_rows_in_state"]
        params = {"state": state, "limit": limit}
        rows = self._read(lambda cur: self._d.execute(cur, sql, params).fetchall())
        return [self._queued_of(row) for row in rows]

    def _pending_count(self, limit: int) -> int:
        sql, params = self._q["pending_count"], {"limit": limit}
        row = self._read(lambda cur: self._d.execute(cur, sql, params).fetchone(), fresh=False)
        return int(row[0])

    # -- outbox ------------------------------------------------------------------------------

    def _hold_alert(
        self,
        server: str,
        message: bytes,
        recipients: tuple[str, ...],
        next_attempt: datetime | None,
        error: str | None,
    ) -> int:
        params = {
            "server": server,
            "message": message,
            "recipients": json.dumps(list(recipients)),
            "attempts": 0 if error is None else 1,
            "next_attempt": self._d.instant(next_attempt),
            "last_error": error,
        }
        sql = self._q["hold_alert"]
        return int(self._write(lambda cur: self._d.execute(cur, sql, params).fetchone()[0]))

    def _due_alerts(self, limit: int, hold: timedelta) -> list[PendingAlert]:
        if not self._any("any_due"):
            return []
        d, q = self._d, self._q
        length = d.length(hold)

        def op(cur: Any) -> list[Any]:
            rows = d.execute(cur, q["due_alerts"], {"limit": limit}).fetchall()
            for row in rows:
                d.execute(cur, q["hold_for"], {"hold": length, "alert_id": row[0]})
            return list(rows)

        dt = d.datetime
        return [
            PendingAlert(
                id=row[0],
                server=row[1],
                message=bytes(row[2]),
                recipients=tuple(json.loads(row[3])),
                attempts=row[4],
                next_attempt=dt(row[5]),  # type: ignore[arg-type]
                created=dt(row[6]),  # type: ignore[arg-type]
                last_error=row[7],
            )
            for row in self._write(op)
        ]

    def alert_sent(self, alert_id: int) -> None:
        sql = self._q["alert_sent"]
        self._write(lambda cur: self._d.execute(cur, sql, {"alert_id": alert_id}))

    def _alert_failed(self, alert_id: int, next_attempt: datetime, error: str) -> None:
        due = self._d.instant(next_attempt)
        sql = self._q["alert_failed"]
        params = {"next_attempt": due, "last_error": error, "alert_id": alert_id}
        self._write(lambda cur: self._d.execute(cur, sql, params))

    # -- kill requests -----------------------------------------------------------------------

    def _request_kill(self, run_id: str | None, job: str | None, reason: str | None) -> int:
        sql = self._q["request_kill"]
        params = {"run_id": run_id, "job": job, "reason": reason}
        return int(self._write(lambda cur: self._d.execute(cur, sql, params).rowcount))

    def kill_requests(self, node: str) -> list[tuple[int, str, str | None]]:
        sql = self._q["kill_requests"]
        rows = self._read(lambda cur: self._d.execute(cur, sql, {"node": node}).fetchall())
        return [(int(request_id), run_id, reason) for request_id, run_id, reason in rows]

    def kill_done(self, request_id: int) -> None:
        sql = self._q["kill_done"]
        self._write(lambda cur: self._d.execute(cur, sql, {"request_id": request_id}))

    # -- retention ---------------------------------------------------------------------------

    def _prune(self, older_than: datetime, keep_per_job: int) -> int:
        d, q = self._d, self._q
        before = d.instant(older_than)

        def op(cur: Any) -> int:
            params = {"before": before, "keep": keep_per_job}
            gone = int(d.execute(cur, q["prune_runs"], params).rowcount)
            d.execute(cur, q["prune_queue"], params)
            d.execute(cur, q["prune_kills"], {})
            d.execute(cur, q["prune_nodes"], params)
            d.execute(cur, q["prune_pauses"], params)
            return gone

        return int(self._write(op))
