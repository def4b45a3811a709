"""`Dialect`: what differs between the SQL engines of the state store.

A dialect owns the connections (one for writes, used by the group commit's leader only, one
for reads, under the store's read lock), turns values into columns and back, names its
queries (`sqlqueries.QUERIES`, by `engine`), maps the driver's errors to the store's
(`StoreUnavailableError` when the database cannot be reached), and inserts a batch of
claims.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar

from .sqlbatch import Claim, Finish, LimitedClaim, Submit
from .sqlqueries import param
from .values import Within

__all__ = ["MANY_JOBS", "Dialect"]

T = TypeVar("T")
MANY_JOBS = 500
"""Jobs named in one statement at most where each is a parameter (the engines bound a
statement's parameters)."""


class Dialect:
    """The engine-specific half of `SqlStateStore` (see the module's docstring)."""

    #: the engine's name: its folder of SQL files (``sql/<engine>/``)
    engine: ClassVar[str] = ""
    #: whether the database's clock is another machine's (a server), against which a node's
    #: clock skew is measured; False where it is this machine's own (SQLite)
    clock_elsewhere: ClassVar[bool] = False

    def __init__(self, masked_url: str) -> None:
        self.masked_url = masked_url
        self.statements = 0

    def param(self, name: str) -> str:
        """The placeholder of parameter `name`, for a list written into a query."""
        return param(self.engine, name)

    def execute(self, cur: Any, sql: str, params: Mapping[str, Any]) -> Any:
        self.statements += 1
        cur.execute(sql, params)
        return cur

    # -- values ----------------------------------------------------------------------------

    def instant(self, value: datetime | None) -> Any:
        """An aware UTC datetime (or None) as the column holds it."""
        raise NotImplementedError

    def datetime(self, value: Any) -> datetime | None:
        """A column's instant as an aware UTC datetime (None stays None)."""
        raise NotImplementedError

    def length(self, value: timedelta) -> Any:
        """A length of time as a parameter added to or taken from ``{now}``."""
        raise NotImplementedError

    # -- connections -------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A cursor inside a write transaction, committed when the block ends (rolled back
        if it raises); the driver's errors become the store's."""
        raise NotImplementedError
        yield

    def read(self, fn: Callable[[Any], T], *, closed: bool) -> T:
        """`fn(cursor)` on the read connection (on one opened for the call once `closed`)."""
        raise NotImplementedError

    def insert_claims(self, cur: Any, sql: str, claims: Sequence[Claim]) -> set[str]:
        """Insert `claims` (distinct keys and run ids) with `sql` (one row's insert); the
        run ids that were inserted (a taken key leaves its claim out)."""
        won: set[str] = set()
        for claim in claims:
            if self.execute(cur, sql, claim.values).rowcount == 1:
                won.add(claim.run_id)
        return won

    def lock_jobs(self, cur: Any, limited: Sequence[LimitedClaim]) -> set[str]:
        """Hold the lock of the job of each claim of `limited` until the transaction ends (in
        one order, the jobs sorted), for the claims under a limit that count their runs
        (`StateStore.claim_within`); a claim whose key is taken already may go without. A job
        whose claims are all `LimitedClaim.yielding` is only tried: returns the jobs whose
        lock another transaction held (left unlocked). Nothing here: a write transaction that
        holds the whole database (SQLite's) needs none."""
        return set()

    def write_within(self, cur: Any, limited: Sequence[LimitedClaim]) -> dict[str, Within] | None:
        """Write `limited` (one claim per job) under their limits in one statement, with the
        ``skipped`` records of those that find their job busy: the answer of each claim by
        its run id (as `LimitedClaim.write` answers it alone). None: no such way (each claim
        writes itself)."""
        return None

    def finish_many(self, cur: Any, sql: str, finishes: Sequence[Finish]) -> set[str]:
        """Write `finishes` (distinct run ids) with `sql` (one run's update); the run ids
        whose run was still ``running`` and now is final."""
        done: set[str] = set()
        for finish in finishes:
            if self.execute(cur, sql, finish.values).rowcount == 1:
                done.add(finish.run_id)
        return done

    def set_marks(self, cur: Any, sql: str, rows: Sequence[tuple[str, Any]]) -> None:
        """Move the marks of `rows` ((job, instant as the column holds it), in the order
        of the jobs) forward with `sql` (the query ``set_marks``, ``{rows}`` unfilled):
        `MANY_JOBS` rows a statement, as the engines bound a statement's parameters."""
        for at in range(0, len(rows), MANY_JOBS):
            chunk = rows[at : at + MANY_JOBS]
            values = ", ".join(
                f"({self.param(f'job_{n}')}, {self.param(f'last_slot_{n}')}, 0, NULL)"
                for n in range(len(chunk))
            )
            params: dict[str, Any] = {}
            for n, (job, slot) in enumerate(chunk):
                params[f"job_{n}"] = job
                params[f"last_slot_{n}"] = slot
            self.execute(cur, sql.replace("{rows}", values), params)

    def notify(self, cur: Any, payload: str) -> None:
        """Tell the listening nodes (`payload`: ``queue`` or ``kill``) once `cur`'s
        transaction commits; nothing where nodes do not listen but poll (SQLite)."""

    def settle_many(self, cur: Any, sql: str, settles: Sequence[dict[str, Any]]) -> None:
        """Settle queue rows with `sql` (one row's update), each the parameters of the query
        ``settle``."""
        for values in settles:
            self.execute(cur, sql, values)

    def insert_submits(self, cur: Any, sql: str, submits: Sequence[Submit]) -> list[int]:
        """Insert queue rows with `sql` (one row's insert, returning its id); their ids, in
        order."""
        return [int(self.execute(cur, sql, s.values).fetchone()[0]) for s in submits]

    def submits_only(self, sql: str, submits: Sequence[Submit]) -> list[int] | None:
        """A batch of nothing but `submits` written the engine's fastest way, in a
        transaction of its own: their ids. None: no such way, use `transaction`."""
        return None

    def finishes_only(self, finishes: Sequence[Finish]) -> set[str] | None:
        """A batch of nothing but `finishes` (distinct, none settling a queue row) written the
        engine's fastest way, in a transaction of its own: the run ids written. None: no such
        way, use `transaction`."""
        return None

    def claims_only(self, claims: Sequence[Claim]) -> set[str] | None:
        """A batch of nothing but `claims` (distinct) written the engine's fastest way, in a
        transaction of its own: the run ids inserted. None: no such way, use `transaction`."""
        return None

    def statement_only(self, write: Callable[[Any], Any]) -> Any:
        """`write`'s answer (one statement), run alone in autocommit, outside the group
        commit, on a connection of its own: only asked where the engine's queries have
        ``submit_taken``."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the connections (idempotent)."""
        raise NotImplementedError
