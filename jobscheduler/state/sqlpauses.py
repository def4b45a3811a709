"""The SQL store's pauses (a mixin of `SqlStateStore`, kept apart to keep each module short).
Its ``_``-methods store what `CheckedStore`'s public methods have checked.

Every write of the pauses moves ``jobscheduler_pause_version`` in its own transaction (what a
SQLite node polls: one integer, read on the read connection, no write lock), and calls
`_pauses_changed(cur)` inside it (PostgreSQL sends its ``NOTIFY`` there, delivered at the
commit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from .sqlbatch import Op
from .sqldialect import Dialect
from .values import JobPause

__all__ = ["SqlPauses"]

T = TypeVar("T")


class SqlPauses:
    _d: Dialect
    _q: dict[str, str]

    def _write(self, op: Op) -> Any:
        raise NotImplementedError

    def _read(self, fn: Callable[[Any], T], *, fresh: bool = True) -> T:
        raise NotImplementedError

    def _pauses_changed(self, cur: Any) -> None:
        """Inside the transaction that changed the pauses (see the module notes)."""
        self._d.execute(cur, self._q["bump_pause_version"], {})

    def _pause_of_row(self, row: Sequence[Any]) -> JobPause:
        job, node, paused_at, note, until = row
        return JobPause(
            job=job,
            node=node,
            paused_at=self._d.datetime(paused_at),  # type: ignore[arg-type]
            note=note,
            until=self._d.datetime(until),
        )

    def pauses(self) -> dict[str, JobPause]:
        sql = self._q["pauses"]
        rows = self._read(lambda cur: self._d.execute(cur, sql, {}).fetchall(), fresh=False)
        return {pause.job: pause for pause in map(self._pause_of_row, rows)}

    def pause_of(self, job: str) -> JobPause | None:
        sql = self._q["pause_of"]
        row = self._read(
            lambda cur: self._d.execute(cur, sql, {"job": job}).fetchone(), fresh=False
        )
        return None if row is None else self._pause_of_row(row)

    def pause_version(self) -> int:
        sql = self._q["pause_version"]
        row = self._read(lambda cur: self._d.execute(cur, sql, {}).fetchone(), fresh=False)
        return 0 if row is None else int(row[0])

    def watch_pauses(self, wake: Callable[[], None]) -> bool:
        return False  # SQLite: the nodes poll `pause_version` (PostgreSQL listens)

    def _pause(
        self,
        jobs: list[str],
        node: str,
        paused_at: datetime,
        note: str | None,
        until: datetime | None,
    ) -> None:
        d, sql = self._d, self._q["pause"]
        common = {
            "node": node,
            "paused_at": d.instant(paused_at),
            "note": note,
            "until": d.instant(until),
        }

        def op(cur: Any) -> None:
            for job in sorted(jobs):  # one order on every node: no deadlock between two
                d.execute(cur, sql, {"job": job, **common})
            self._pauses_changed(cur)

        self._write(op)

    def _resume(self, jobs: list[str] | None) -> list[str]:
        d, q = self._d, self._q

        def op(cur: Any) -> list[str]:
            resumed: list[str] = []
            if jobs is None:
                resumed = [row[0] for row in d.execute(cur, q["resume_all"], {}).fetchall()]
                d.execute(cur, q["reset_all_failures"], {})
            else:
                for job in sorted(jobs):
                    resumed += [row[0] for row in d.execute(cur, q["resume"], {"job": job})]
                    d.execute(cur, q["reset_failures"], {"job": job})
            if resumed:
                self._pauses_changed(cur)
            return resumed

        resumed: list[str] = self._write(op)
        return resumed

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
    ) -> JobPause | None:
        d, q = self._d, self._q
        lock = q.get("lock_failures") or q["failures_of"]  # PostgreSQL's locks the row

        def op(cur: Any) -> JobPause | None:
            # The mark's row first, locked (PostgreSQL: FOR UPDATE; SQLite: the transaction
            # is the file's one writer): a node counting at the same time waits here, then
            # reads what this one wrote, its pause included.
            d.execute(cur, q["make_mark"], {"job": job})
            row = d.execute(cur, lock, {"job": job}).fetchone()
            before = int(row[0]) if row is not None else 0
            held = d.execute(cur, q["pause_of"], {"job": job}).fetchone()
            if held is not None and not self._pause_of_row(held).lets_count(at, started):
                return None
            failures = before + 1 if failed else 0
            made = None
            if failures >= limit:
                made = JobPause(job=job, node=node, paused_at=at, note=note, until=until)
                d.execute(
                    cur,
                    q["pause"],
                    {
                        "job": job,
                        "node": node,
                        "paused_at": d.instant(at),
                        "note": note,
                        "until": d.instant(until),
                    },
                )
                self._pauses_changed(cur)
                failures = 0
            if failures != before:
                d.execute(cur, q["set_failures"], {"job": job, "failures": failures})
            return made

        made: JobPause | None = self._write(op)
        return made
