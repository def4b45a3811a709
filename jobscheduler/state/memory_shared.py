"""What `MemoryStateStore` keeps beside the runs: nodes, marks, queue, outbox, kill requests.

A mixin of the memory store (it shares the store's lock and runs), kept apart so the hot path
of claims and outcomes in ``memory.py`` stays short to read. Its ``_``-methods store what
`CheckedStore`'s public methods have checked.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ..clock import Clock
from .base import NodeNameTakenError, StoreClosedError
from .memoryrow import Row
from .records import RunRecord, RunState, aware_utc, lost_reason
from .values import (
    AGING,
    QUEUE_FINAL,
    Beat,
    JobMark,
    Keep,
    Look,
    NodeInfo,
    PendingAlert,
    QueuedRun,
    TakeClaims,
    args_of,
    host_matches,
    lowest_caps,
    within,
)

__all__ = ["MemoryShared"]


class MemoryShared:
    """Nodes, marks, queue, outbox and kill requests in memory (see `StateStore`)."""

    _lock: threading.Lock
    _clock: Clock
    _runs: dict[str, Row]
    _closed: bool

    def _init_shared(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._marks: dict[str, JobMark] = {}
        self._queue_rows: dict[int, QueuedRun] = {}
        self._alerts: dict[int, PendingAlert] = {}
        # id -> [run_id, node, open]
        self._kills: dict[int, list[Any]] = {}
        self._next_id = 0
        self._procs: dict[str, tuple[int, float]] = {}  # run id -> (pid, its start time)

    def _keep(self, record: Row) -> None:  # pragma: no cover - the store's
        raise NotImplementedError

    def _abandon_waits(self, dead: str, now: datetime) -> list[RunRecord]:  # pragma: no cover
        raise NotImplementedError  # the store's

    def _write_posted(self) -> None:  # pragma: no cover - the store's
        raise NotImplementedError

    def _snapshot(self) -> list[Row]:  # pragma: no cover - the store's
        raise NotImplementedError

    def _claim(  # pragma: no cover - the store's
        self,
        job: str,
        slot: datetime | None,
        trigger: str,
        run_id: str,
        node: str,
        attempt: int,
        started: datetime,
    ) -> bool:
        raise NotImplementedError

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _open(self) -> None:
        if self._closed:
            raise StoreClosedError("the state store is closed")

    def now(self) -> datetime:
        return aware_utc(self._clock.now(), "now")

    # -- nodes -----------------------------------------------------------------------------

    def _join(self, node: NodeInfo, lease: timedelta) -> None:
        with self._lock:
            self._open()
            now = self.now()
            old = self._nodes.get(node.name)
            if old is not None and _live(old, now, lease):
                raise NodeNameTakenError(
                    f"node name {node.name!r} is taken by a live node (host {old.host}, "
                    f"pid {old.pid}): choose another name (--node) or stop that node"
                )
            self._nodes[node.name] = replace(node, heartbeat=now, state="up", lease=lease)

    def heartbeat(self, name: str, *, lease: timedelta) -> bool:
        with self._lock:
            self._open()
            now = self.now()
            node = self._nodes.get(name)
            if node is None or not _live(node, now, lease):
                return False
            self._nodes[name] = replace(node, heartbeat=now)
            return True

    def beat(self, name: str, *, lease: timedelta, clock_skew: float | None = None) -> Beat:
        # No clock of its own: the node's is the store's (`Beat.clock` None, no skew kept).
        with self._lock:
            self._open()
            now = self.now()
            node = self._nodes.get(name)
            if node is None or not _live(node, now, lease):
                return Beat(alive=False)
            self._nodes[name] = replace(node, heartbeat=now)
            host = node.host
            others = [n for n in self._nodes.values() if n.state == "up" and n.name != name]
            return Beat(
                alive=True,
                expired=sum(not _live(n, now, lease) for n in others),
                neighbours=sum(n.host == host for n in others),
                alerts_due=any(a.next_attempt <= now for a in self._alerts.values()),
                stale_rows=any(
                    row.state == "pending" and now - row.submitted > lease
                    for row in self._queue_rows.values()
                ),
            )

    def set_definitions(self, name: str, *, digest: str | None, jobs: Sequence[str]) -> bool:
        with self._lock:
            self._open()
            node = self._nodes.get(name)
            if node is None or node.state != "up":
                return False
            self._nodes[name] = replace(node, definitions_digest=digest, defined_jobs=tuple(jobs))
            return True

    def leave(self, name: str) -> None:
        with self._lock:
            self._open()
            node = self._nodes.get(name)
            if node is not None and node.state == "up":
                self._nodes[name] = replace(node, state="left")

    def nodes(self) -> list[NodeInfo]:
        with self._lock:
            return [self._nodes[name] for name in sorted(self._nodes)]

    def expired_nodes(self, *, lease: timedelta) -> list[NodeInfo]:
        with self._lock:
            now = self.now()
            return [
                node
                for name, node in sorted(self._nodes.items())
                if node.state == "up" and not _live(node, now, lease)
            ]

    def take_over(self, dead: str, *, by: str, requeue: Collection[str] = ()) -> list[RunRecord]:
        with self._lock:
            self._open()
            now = self.now()
            node = self._nodes.get(dead)
            if node is not None:
                self._nodes[dead] = replace(node, state="dead")
            lost = [
                e for e in self._snapshot() if e["node"] == dead and e["state"] is RunState.RUNNING
            ]
            taken: list[RunRecord] = []
            for entry in lost:
                slot = entry["slot"]
                unstarted = entry["run_id"] not in self._procs and slot is not None and slot > now
                entry["state"] = RunState.ABANDONED
                entry["ended"] = max(now, entry["started"])
                entry["reason"] = lost_reason(dead, ran=not unstarted)
                taken.append(RunRecord._of(dict(entry)))
                self._keep(entry)
            taken += self._abandon_waits(dead, now)
            rerun = set(requeue)
            for queue_id, row in list(self._queue_rows.items()):
                if row.node == dead and row.state == "running":
                    if row.job in rerun:  # back to the queue, as submitted
                        again = replace(
                            row, state="pending", node=None, run_id=None, attempt=row.attempt + 1
                        )
                        self._queue_rows[queue_id] = again
                    else:
                        self._queue_rows[queue_id] = replace(row, state="failed")
            return taken

    # -- marks -------------------------------------------------------------------------------

    def mark(self, job: str) -> JobMark | None:
        with self._lock:
            return self._marks.get(job)

    def marks(self) -> dict[str, JobMark]:
        with self._lock:
            return dict(self._marks)

    def _set_mark(
        self,
        job: str,
        last_slot: datetime | Keep | None,
        failures: int | Keep,
        paused_reason: str | Keep | None,
    ) -> JobMark:
        with self._lock:
            self._open()
            old = self._marks.get(job) or JobMark(job=job)
            new = old
            if isinstance(last_slot, datetime) and (
                old.last_slot is None or last_slot > old.last_slot
            ):
                new = replace(new, last_slot=last_slot)
            if not isinstance(failures, Keep):
                new = replace(new, failures=failures)
            if not isinstance(paused_reason, Keep):
                new = replace(new, paused_reason=paused_reason)
            self._marks[job] = new
            return new

    def _set_marks(self, last_slots: dict[str, datetime]) -> None:
        with self._lock:
            self._open()
            marks = self._marks
            for job, slot in last_slots.items():
                old = marks.get(job)
                # Made directly, not by `replace`: a beat after a burst sets thousands.
                if old is None:
                    marks[job] = JobMark(job=job, last_slot=slot)
                elif old.last_slot is None or slot > old.last_slot:
                    failures, paused = old.failures, old.paused_reason
                    marks[job] = JobMark(
                        job=job, last_slot=slot, failures=failures, paused_reason=paused
                    )

    # -- queue -------------------------------------------------------------------------------

    def _submit(self, job: str, args: str | None, priority: int, host: str | None) -> int:
        with self._lock:
            self._open()
            return self._insert_row(job, args, priority, host)

    def _insert_row(self, job: str, args: str | None, priority: int, host: str | None) -> int:
        """Lock held: a new pending row; its id."""
        queue_id = self._new_id()
        self._queue_rows[queue_id] = QueuedRun(
            id=queue_id,
            job=job,
            args=args_of(args),
            priority=priority,
            host=host,
            submitted=self.now(),
            state="pending",
        )
        return queue_id

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
        with self._lock:
            self._open()
            return self._take_rows(node, jobs, limit, hostname, most, claims, limits)

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
        with self._lock:  # one step, as the SQL stores' one transaction
            self._open()
            queue_id = self._insert_row(*row)
            taken = self._take_rows(node, jobs, limit, hostname, most, claims, limits)
            return queue_id, taken

    def _take_rows(
        self,
        node: str,
        jobs: Collection[str],
        limit: int,
        hostname: str | None,
        most: Mapping[str, int],
        claims: TakeClaims | None,
        limits: Mapping[str, int],
    ) -> list[QueuedRun]:
        """Lock held: `_take`."""
        wanted = set(jobs)
        now = self.now()
        caps = lowest_caps(most, self._room_within(limits, wanted))
        pending = [
            row
            for row in self._queue_rows.values()
            if row.state == "pending"
            and row.job in wanted
            and host_matches(row.host, node, hostname)
        ]
        pending.sort(
            key=lambda r: (
                -(r.priority + (now - r.submitted).total_seconds() / AGING),
                r.submitted,
                r.id,
            )
        )
        chosen = within(pending, limit, caps, lambda row: row.job)
        taken = [replace(row, state="running", node=node) for row in chosen]
        if claims is not None:  # their runs claimed under the same lock (see `take`)
            run_ids = iter(claims.run_ids)
            for n, row in enumerate(taken):
                if row.job in claims.jobs:
                    run_id = next(run_ids)
                    taken[n] = row = replace(row, run_id=run_id)
                    job, attempt, started = row.job, row.attempt, claims.started
                    self._claim(job, None, "submit", run_id, node, attempt, started)
        for row in taken:
            self._queue_rows[row.id] = row
        return taken

    def look(self, node: str, *, jobs: Collection[str], hostname: str | None = None) -> Look:
        wanted = set(jobs)
        with self._lock:
            mine = frozenset(
                row.job
                for row in self._queue_rows.values()
                if row.state == "pending"
                and row.job in wanted
                and host_matches(row.host, node, hostname)
            )
            kills = any(r[1] == node and r[2] for r in self._kills.values())
            return Look(pending=bool(mine), kills=kills, jobs=mine)

    def _settle(self, queue_id: int, state: str, run_id: str | None) -> bool:
        with self._lock:
            self._open()
            row = self._queue_rows.get(queue_id)
            if row is None or row.state != "running":
                return False
            self._queue_rows[queue_id] = replace(row, state=state, run_id=run_id)
            return True

    def _room_within(self, limits: Mapping[str, int], jobs: set[str]) -> dict[str, int]:
        """Lock held: as the SQL stores' `room_within`, for the jobs of `limits` in `jobs`."""
        limited = {name: cap for name, cap in limits.items() if name in jobs}
        if not limited:
            return {}
        self._write_posted()  # the runs' ends posted and not yet written
        live = dict.fromkeys(limited, 0)
        submitted = dict.fromkeys(limited, 0)
        for entry in list(self._runs.values()):
            if entry.job in live and entry.state is RunState.RUNNING:
                live[entry.job] += 1
                submitted[entry.job] += entry.trigger == "submit"
        taken = dict.fromkeys(limited, 0)
        for row in self._queue_rows.values():
            if row.state == "running" and row.job in taken:
                taken[row.job] += 1
        return {
            name: max(0, cap - live[name] - max(0, taken[name] - submitted[name]))
            for name, cap in limited.items()
        }

    def _put_back(self, queue_id: int) -> bool:
        with self._lock:
            self._open()
            row = self._queue_rows.get(queue_id)
            if row is None or row.state != "running":
                return False
            self._queue_rows[queue_id] = replace(row, state="pending", node=None, run_id=None)
            return True

    def _settle_pending(self, queue_id: int, state: str, run_id: str | None) -> bool:
        with self._lock:
            self._open()
            row = self._queue_rows.get(queue_id)
            if row is None or row.state != "pending":
                return False
            self._queue_rows[queue_id] = replace(row, state=state, run_id=run_id)
            return True

    def _pending_before(
        self, before: datetime, excluding: Collection[str], limit: int
    ) -> list[QueuedRun]:
        left_out = set(excluding)
        with self._lock:
            rows = [
                self._queue_rows[i]
                for i in sorted(self._queue_rows)
                if self._queue_rows[i].state == "pending"
                and self._queue_rows[i].submitted < before
                and self._queue_rows[i].job not in left_out
            ]
            return rows[:limit]

    def _queue(self, state: str | None, limit: int) -> list[QueuedRun]:
        with self._lock:
            rows = [
                self._queue_rows[i]
                for i in sorted(self._queue_rows, reverse=True)
                if state is None or self._queue_rows[i].state == state
            ]
            return rows[:limit]

    def _pending_count(self, limit: int) -> int:
        with self._lock:
            return min(limit, sum(row.state == "pending" for row in self._queue_rows.values()))

    # -- outbox ------------------------------------------------------------------------------

    def _hold_alert(
        self,
        server: str,
        message: bytes,
        recipients: tuple[str, ...],
        next_attempt: datetime | None,
        error: str | None,
    ) -> int:
        with self._lock:
            self._open()
            now = self.now()
            alert_id = self._new_id()
            self._alerts[alert_id] = PendingAlert(
                id=alert_id,
                server=server,
                message=message,
                recipients=recipients,
                attempts=0 if error is None else 1,
                next_attempt=now if next_attempt is None else next_attempt,
                created=now,
                last_error=error,
            )
            return alert_id

    def _due_alerts(self, limit: int, hold: timedelta) -> list[PendingAlert]:
        with self._lock:
            self._open()
            now = self.now()
            due = sorted(
                (a for a in self._alerts.values() if a.next_attempt <= now),
                key=lambda a: (a.next_attempt, a.id),
            )[:limit]
            for alert in due:
                self._alerts[alert.id] = replace(alert, next_attempt=now + hold)
            return due

    def alert_sent(self, alert_id: int) -> None:
        with self._lock:
            self._open()
            self._alerts.pop(alert_id, None)

    def _alert_failed(self, alert_id: int, next_attempt: datetime, error: str) -> None:
        with self._lock:
            self._open()
            alert = self._alerts.get(alert_id)
            if alert is not None:
                self._alerts[alert_id] = replace(
                    alert, attempts=alert.attempts + 1, next_attempt=next_attempt, last_error=error
                )

    # -- kill requests -----------------------------------------------------------------------

    def _request_kill(self, run_id: str | None, job: str | None, reason: str | None) -> int:
        with self._lock:
            self._open()
            running = [
                e
                for e in self._snapshot()
                if e["state"] is RunState.RUNNING
                and (run_id is None or e["run_id"] == run_id)
                and (job is None or e["job"] == job)
            ]
            for entry in running:
                self._kills[self._new_id()] = [entry["run_id"], entry["node"], True, reason]
            return len(running)

    def kill_requests(self, node: str) -> list[tuple[int, str, str | None]]:
        with self._lock:
            return [
                (request_id, run_id, reason)
                for request_id, (run_id, on, is_open, reason) in sorted(self._kills.items())
                if on == node and is_open
            ]

    def kill_done(self, request_id: int) -> None:
        with self._lock:
            self._open()
            request = self._kills.get(request_id)
            if request is not None:
                request[2] = False

    # -- retention of the shared parts (the store prunes its runs) ---------------------------

    def _prune_shared(self, older_than: datetime) -> None:
        for queue_id, row in list(self._queue_rows.items()):
            if row.state in QUEUE_FINAL and row.submitted < older_than:
                del self._queue_rows[queue_id]
        for request_id, request in list(self._kills.items()):
            if not request[2]:
                del self._kills[request_id]
        for name, node in list(self._nodes.items()):
            if node.state != "up" and node.heartbeat is not None and node.heartbeat < older_than:
                del self._nodes[name]

    # -- run processes -------------------------------------------------------------------------

    def _set_process(self, run_id: str, pid: int, process_started: float) -> bool:
        with self._lock:
            self._open()
            self._write_posted()
            entry = self._runs.get(run_id)
            if entry is None or entry["state"] is not RunState.RUNNING:
                return False
            if len(self._procs) > 1000:  # forget the processes of runs that ended
                for old in [r for r in self._procs if not self._running(r)]:
                    del self._procs[old]
            self._procs[run_id] = (pid, process_started)
            return True

    def processes(self, node: str) -> list[tuple[str, int, float]]:
        with self._lock:
            self._write_posted()
            return [
                (run_id, pid, started)
                for run_id, (pid, started) in self._procs.items()
                if self._running(run_id) and self._runs[run_id]["node"] == node
            ]

    def _running(self, run_id: str) -> bool:
        entry = self._runs.get(run_id)
        return entry is not None and entry["state"] is RunState.RUNNING


def _live(node: NodeInfo, now: datetime, lease: timedelta) -> bool:
    return node.state == "up" and node.heartbeat is not None and now - node.heartbeat <= lease
