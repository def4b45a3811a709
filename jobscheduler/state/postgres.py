"""`PostgresStateStore`: the state store of a cluster of nodes, on PostgreSQL (psycopg 3).

psycopg is imported when a store is opened (the extra ``jobscheduler[postgres]``), so the
core installs without it. Settings: two connections per store (one writes: the group
commit's leader; one reads, in autocommit), the session's time zone UTC, a connect timeout
of 10 s, TCP keepalives and a 10 s user timeout (a silent server is noticed in ~10 s);
psycopg prepares a statement run five times. Claims of one batch are one multi-row
``INSERT … VALUES … ON CONFLICT DO NOTHING RETURNING run_id`` in autocommit; the queue and
outbox take rows with ``FOR UPDATE SKIP LOCKED``; the clock is the server's
``clock_timestamp()``. A lost connection is a `StoreUnavailableError` for the call, and the
next call connects again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar

from .base import StoreClosedError, StoreError, StoreUnavailableError
from .sqlbatch import Claim
from .sqldialect import Dialect
from .sqlmigrate import upgrade
from .sqlstore import DEFAULT_OUTPUT_LIMIT, SqlStateStore
from .urls import mask_url

__all__ = ["CONNECT_TIMEOUT", "PostgresStateStore"]

T = TypeVar("T")
CONNECT_TIMEOUT = 10
# Serializes schema upgrades of the nodes opening one database at once.
_UPGRADE_LOCK = 7_311_042_601
# Claims of a batch are one multi-row insert of at most this many rows (scalar parameters:
# psycopg dumps them in C; arrays for unnest cost ~100 µs of Python per statement). psycopg
# prepares each statement text once it ran 5 times: one per batch size seen.
_ROWS = 64


@functools.lru_cache(maxsize=_ROWS)
def _claims_sql(rows: int) -> str:
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s)"] * rows)
    return (
        "INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, "
        f"started) VALUES {values} ON CONFLICT DO NOTHING RETURNING run_id"
    )


class PostgresDialect(Dialect):
    fragments: ClassVar[dict[str, str]] = {
        "waited": "extract(epoch from ({now} - submitted))",
        "now": "clock_timestamp()",
        "greatest": "GREATEST",
        "skip_locked": "FOR UPDATE SKIP LOCKED",
    }
    placeholder = "%s"

    def __init__(self, url: str, connect_timeout: float) -> None:
        super().__init__(mask_url(url))
        self._url = url.replace("postgresql+psycopg://", "postgresql://", 1)
        self._timeout = connect_timeout
        self._writer: Any = None
        self._reader: Any = None
        self._closed = False
        try:
            import psycopg
        except ImportError:
            raise StoreError(
                f"state store {self.masked_url!r} needs psycopg: pip install "
                "'jobscheduler[postgres]'"
            ) from None
        self._pg = psycopg

    def connect(self, *, autocommit: bool) -> Any:
        pg = self._pg
        try:
            conn = pg.connect(
                self._url,
                autocommit=autocommit,
                connect_timeout=max(1, int(self._timeout)),
                # A server gone without a word (a cut cable, a paused VM) is noticed within
                # ~10 s instead of when TCP gives up (minutes): keepalives while idle, and
                # a bound on unacknowledged sends.
                keepalives=1,
                keepalives_idle=5,
                keepalives_interval=2,
                keepalives_count=3,
                tcp_user_timeout=10_000,
            )
        except pg.Error as exc:
            raise StoreUnavailableError(
                f"state store {self.masked_url!r} cannot be reached: {self._first_line(exc)}"
            ) from None
        except Exception as exc:  # a malformed URL (psycopg.ProgrammingError is a pg.Error)
            raise StoreError(f"state store {self.masked_url!r}: {exc}") from None
        conn.execute("SET TIME ZONE 'UTC'")
        return conn

    def _first_line(self, exc: BaseException) -> str:
        text = str(exc).strip().splitlines()
        line = text[0] if text else type(exc).__name__
        password = self._password()
        return line.replace(password, "***") if password else line

    def _password(self) -> str | None:
        from urllib.parse import urlsplit

        try:
            return urlsplit(self._url).password
        except ValueError:
            return None

    def open(self) -> None:
        try:
            writer = self.connect(autocommit=True)
        except StoreUnavailableError as exc:
            raise StoreError(str(exc)) from None
        try:
            with writer.transaction():
                writer.execute("SELECT pg_advisory_xact_lock(%s)", (_UPGRADE_LOCK,))
                upgrade(
                    lambda sql: writer.execute(sql.encode()),
                    "postgres",
                    "SELECT to_regclass('jobscheduler_schema') IS NOT NULL",
                    self.masked_url,
                )
        except self._pg.Error as exc:
            writer.close()
            raise StoreError(f"state store {self.masked_url!r}: {self._first_line(exc)}") from None
        except BaseException:
            writer.close()
            raise
        self._writer = writer
        self._reader = self.connect(autocommit=True)

    # -- values ------------------------------------------------------------------------------

    def instant(self, value: datetime | None) -> datetime | None:
        return value

    def datetime(self, value: Any) -> datetime | None:
        if value is None:
            return None
        return value if value.tzinfo is UTC else value.astimezone(UTC)  # type: ignore[no-any-return]

    def length(self, value: timedelta) -> timedelta:
        return value

    # -- connections -------------------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """The write connection (in autocommit: a transaction is asked for by its block);
        a lost connection is a `StoreUnavailableError`, and the next call connects again."""
        pg = self._pg
        if self._closed:
            raise StoreClosedError("the state store is closed")
        if self._writer is None or self._writer.closed:
            self._writer = self.connect(autocommit=True)
        writer = self._writer
        try:
            yield writer
        except (pg.OperationalError, pg.InterfaceError) as exc:
            writer.close()
            raise StoreUnavailableError(
                f"state store {self.masked_url!r}: {self._first_line(exc)}"
            ) from None

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self._connection() as writer, writer.transaction(), writer.cursor() as cur:
            yield cur

    def read(self, fn: Callable[[Any], T], *, closed: bool) -> T:
        """Reads are tried twice: a connection the server dropped while idle is replaced."""
        pg = self._pg
        for retry in (True, False):
            if closed or self._reader is None or self._reader.closed:
                conn = self.connect(autocommit=True)
                if not closed:
                    self._reader = conn
            else:
                conn = self._reader
            try:
                with conn.cursor() as cur:
                    return fn(cur)
            except (pg.OperationalError, pg.InterfaceError) as exc:
                conn.close()
                if not retry:
                    raise StoreUnavailableError(
                        f"state store {self.masked_url!r}: {self._first_line(exc)}"
                    ) from None
            finally:
                if closed:
                    conn.close()
        raise AssertionError("unreachable")

    def insert_claims(self, cur: Any, sql: str, claims: Sequence[Claim]) -> set[str]:
        won: set[str] = set()
        for start in range(0, len(claims), _ROWS):
            chunk = claims[start : start + _ROWS]
            self.statements += 1
            cur.execute(_claims_sql(len(chunk)), [v for claim in chunk for v in claim.values])
            won.update(row[0] for row in cur.fetchall())
        return won

    def claims_only(self, claims: Sequence[Claim]) -> set[str] | None:
        """A batch of claims alone: in autocommit, each statement its own transaction, so a
        batch of up to `_ROWS` claims is one round trip to the server (BEGIN and COMMIT would
        be two more)."""
        if len(claims) > _ROWS:
            return None  # several statements: one transaction for them all
        with self._connection() as writer, writer.cursor() as cur:
            return self.insert_claims(cur, "", claims)

    def close(self) -> None:
        self._closed = True
        for conn in (self._writer, self._reader):
            if conn is not None:
                conn.close()
        self._writer = self._reader = None


class PostgresStateStore(SqlStateStore):
    """The state store in the PostgreSQL database `url` (``postgresql://user:pw@host:port/db``,
    also ``postgresql+psycopg://``; libpq's query options such as ``?options=…`` apply).

    Raises `StoreError` (one line naming the URL, password masked) when psycopg is missing,
    the server cannot be reached within `connect_timeout` seconds, the login or database is
    wrong, or the database holds a newer schema.
    """

    def __init__(
        self,
        url: str,
        *,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        dialect = PostgresDialect(url, connect_timeout)
        dialect.open()
        super().__init__(dialect, output_limit=output_limit)
