"""`PostgresStateStore`: the state store of a cluster of nodes, on PostgreSQL (psycopg 3).

psycopg is imported when a store is opened (the extra ``jobscheduler[postgres]``), so the
core installs without it. Settings: two connections per store at its opening (one writes:
the group commit's leader; one reads, in autocommit), two more when used (one for a node's
own submits taken at once, below; one listening: `watch`), the session's time zone UTC, a
connect timeout of 10 s, TCP keepalives and a 10 s user timeout (a silent server is noticed
in ~10 s);
psycopg prepares a statement run five times. Claims of one batch are one multi-row
``INSERT … VALUES … ON CONFLICT DO NOTHING RETURNING run_id`` in autocommit; the queue and
outbox take rows with ``FOR UPDATE SKIP LOCKED``; the clock is the server's
``clock_timestamp()``. A lost connection is a `StoreUnavailableError` for the call, and the
next call connects again.

A node's own submit that it takes at once (`submit_take` of a row whose run the take claims,
no limit counting) is one statement (``submit_taken``) in autocommit on a connection of its
own, made at the first such submit: it never waits for a transaction of the group commit
under way (a run's outcome being written, say), and needs none of the writes queued there.

Notifications: a submit and a kill request made through a store send ``NOTIFY jobscheduler``
(payload ``queue`` or ``kill``) with their rows (a submit in its insert's statement), and so
does every change of the pauses (payload ``pause``, in the transaction that changes them);
`watch` and `watch_pauses` ``LISTEN`` on a third connection (one for both), in a thread of
its own, so an idle node hears of them at once instead of polling for them (a lost connection
is made again every `LISTEN_RETRY` seconds, and the watchers are woken once it listens again,
for what came meanwhile).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any, TypeVar

from .base import StoreClosedError, StoreError, StoreUnavailableError
from .sqlbatch import Claim, Finish, LimitedClaim, Submit
from .sqldialect import Dialect
from .sqlmigrate import upgrade
from .sqlqueries import QUERIES
from .sqlstore import DEFAULT_OUTPUT_LIMIT, SqlStateStore
from .urls import mask_url
from .values import BUSY, CLAIMED, SKIPPED_BY_LIMIT, TAKEN, Within

__all__ = ["CHANNEL", "CONNECT_TIMEOUT", "LISTEN_RETRY", "PostgresStateStore"]

log = logging.getLogger("jobscheduler.state")

T = TypeVar("T")
CONNECT_TIMEOUT = 10
CHANNEL = "jobscheduler"
"""The channel of the notifications (see the module notes); payload ``queue``, ``kill`` or
``pause``."""
LISTEN_RETRY = 5.0
"""Seconds between two tries to listen again after the connection was lost."""
_NOTIFY = f"SELECT pg_notify('{CHANNEL}', %s)"
# Serializes schema upgrades of the nodes opening one database at once.
_UPGRADE_LOCK = 7_311_042_601
# The fields of a batch's rows, in the order its query reads them (sql/postgres/queries.sql).
_CLAIM_FIELDS = ("run_id", "job", "slot", "attempt", "trigger", "node", "state", "started")
_FINISH_FIELDS = ("state", "ended", "exit_code", "reason", "output_tail", "started", "run_id")
_SETTLE_FIELDS = ("state", "run_id", "queue_id")
_SUBMIT_FIELDS = ("job", "args", "priority", "host")
_WITHIN_FIELDS = (*_CLAIM_FIELDS, "limit", "reason")
_LOCK_FIELDS = ("job", "slot", "attempt", "yielding")
_QUERIES = QUERIES["postgres"]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def _rows(rows: Sequence[Any], fields: tuple[Any, ...]) -> dict[str, str]:
    """`rows` (mappings, or tuples: `fields` are then indexes) as the one JSON parameter of
    a batch: an array of each row's `fields`, instants
    as whole microseconds since the epoch (exact; sql/postgres/queries.sql makes them
    instants again). The rows are picked and written by C code (`itemgetter`, `json.dumps`);
    only an instant calls back here, and an instant repeated in the batch (a tick's slot,
    claimed ahead for every job) is converted once."""
    pick = itemgetter(*fields)
    micros: dict[datetime, int] = {}

    def instant(value: Any) -> int:
        if value.__class__ is not datetime:
            raise TypeError(f"not a value of a row: {value!r}")
        us = micros.get(value)
        if us is None:
            us = micros[value] = (value - _EPOCH) // _US
        return us

    return {"rows": json.dumps([pick(row) for row in rows], default=instant, check_circular=False)}


def _key_order(claim: Claim) -> tuple[str, datetime, int]:
    """A claim's place in its batch: by (job, slot, attempt), a run without a slot first."""
    v = claim.values
    return v["job"], v["slot"] or _EPOCH, v["attempt"]


class PostgresDialect(Dialect):
    engine = "postgres"
    clock_elsewhere = True

    def __init__(self, url: str, connect_timeout: float) -> None:
        super().__init__(mask_url(url))
        self._url = url.replace("postgresql+psycopg://", "postgresql://", 1)
        self._timeout = connect_timeout
        self._writer: Any = None
        self._reader: Any = None
        self._alone: Any = None  # `statement_only`'s, made at its first call
        self._alone_lock = threading.Lock()
        self._closed = False
        try:
            import psycopg
        except ImportError:
            raise StoreError(
                f"state store {self.masked_url!r} needs psycopg: pip install "
                "'jobscheduler[postgres]'"
            ) from None
        self._pg = psycopg

    @property
    def error(self) -> type[Exception]:
        """psycopg's base class of errors."""
        return self._pg.Error

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
        if self._closed:
            raise StoreClosedError("the state store is closed")
        if self._writer is None or self._writer.closed:
            self._writer = self.connect(autocommit=True)
        with self._lost(self._writer) as writer:
            yield writer

    @contextmanager
    def _lost(self, conn: Any) -> Iterator[Any]:
        """`conn` in use: if it is lost, it is closed (the next call connects again) and the
        loss is a `StoreUnavailableError`."""
        pg = self._pg
        try:
            yield conn
        except (pg.OperationalError, pg.InterfaceError) as exc:
            conn.close()
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
        # In the order of their keys: nodes inserting the same keys then wait for each other
        # in one order, never in a cycle (a deadlock).
        ordered = sorted(claims, key=_key_order)
        self.statements += 1
        cur.execute(_QUERIES["claim_rows"], _rows([c.values for c in ordered], _CLAIM_FIELDS))
        return {row[0] for row in cur.fetchall()}

    def lock_jobs(self, cur: Any, limited: Sequence[LimitedClaim]) -> set[str]:
        self.statements += 1
        rows = _rows([{**c.values, "yielding": c.yielding} for c in limited], _LOCK_FIELDS)
        cur.execute(_QUERIES["lock_jobs"], rows)
        return {row[0] for row in cur.fetchall() if not row[1]}

    def write_within(self, cur: Any, limited: Sequence[LimitedClaim]) -> dict[str, Within]:
        self.statements += 1
        rows = _rows([{**c.values, "reason": c.skip} for c in limited], _WITHIN_FIELDS)
        cur.execute(_QUERIES["within_rows"], rows)
        answers: dict[str, Within] = {c.run_id: TAKEN for c in limited}
        # Not returned: its key or id taken. A busy claim ('b', at its limit) is TAKEN when
        # its key or id is (another node's run has the slot), as `live_runs` answers it.
        for kind, run_id, _live, taken in cur.fetchall():
            if kind == "c":
                answers[run_id] = CLAIMED
            elif kind == "s":
                answers[run_id] = SKIPPED_BY_LIMIT
            elif not taken:
                answers[run_id] = BUSY
        return answers

    def finish_many(self, cur: Any, sql: str, finishes: Sequence[Finish]) -> set[str]:
        self.statements += 1
        cur.execute(_QUERIES["finish_rows"], _rows([f.values for f in finishes], _FINISH_FIELDS))
        return {row[0] for row in cur.fetchall()}

    def set_marks(self, cur: Any, sql: str, rows: Sequence[tuple[str, Any]]) -> None:
        # One statement whatever the number of jobs: one JSON parameter, so psycopg parses
        # the statement once (1,000 parameters were parsed again at every heartbeat).
        self.statements += 1
        cur.execute(_QUERIES["set_marks_rows"], _rows(rows, (0, 1)))

    def settle_many(self, cur: Any, sql: str, settles: Sequence[dict[str, Any]]) -> None:
        self.statements += 1
        cur.execute(_QUERIES["settle_rows"], _rows(settles, _SETTLE_FIELDS))

    def insert_submits(self, cur: Any, sql: str, submits: Sequence[Submit]) -> list[int]:
        # Both notify the listening nodes in the same statement (see the module notes).
        self.statements += 1
        if len(submits) == 1:  # the common case: the one-row statement, prepared
            cur.execute(_QUERIES["submit_notify"], submits[0].values)
        else:
            cur.execute(_QUERIES["submit_rows"], _rows([s.values for s in submits], _SUBMIT_FIELDS))
        return [int(row[0]) for row in cur.fetchall()]

    def notify(self, cur: Any, payload: str) -> None:
        """Tell every listening node (see the module notes); sent when `cur`'s transaction
        commits."""
        self.statements += 1
        cur.execute(_NOTIFY, (payload,))

    def submits_only(self, sql: str, submits: Sequence[Submit]) -> list[int]:
        """As `claims_only`: the submits are one statement, in autocommit."""
        with self._connection() as writer, writer.cursor() as cur:
            return self.insert_submits(cur, sql, submits)

    def finishes_only(self, finishes: Sequence[Finish]) -> set[str] | None:
        """As `claims_only`: the finishes are one statement, in autocommit."""
        with self._connection() as writer, writer.cursor() as cur:
            return self.finish_many(cur, "", finishes)

    def statement_only(self, write: Callable[[Any], Any]) -> Any:
        """On the statements' connection, made at the first call (see the module notes); a
        lost connection is a `StoreUnavailableError` (the statement not retried: it may have
        been committed), and the next call connects again."""
        with self._alone_lock:
            if self._closed:
                raise StoreClosedError("the state store is closed")
            if self._alone is None or self._alone.closed:
                self._alone = self.connect(autocommit=True)
            with self._lost(self._alone) as conn, conn.cursor() as cur:
                return write(cur)

    def claims_only(self, claims: Sequence[Claim]) -> set[str]:
        """A batch of claims alone: in autocommit, the statement is its own transaction, so
        the batch is one round trip to the server (BEGIN and COMMIT would be two more)."""
        with self._connection() as writer, writer.cursor() as cur:
            return self.insert_claims(cur, "", claims)

    def close(self) -> None:
        self._closed = True
        with self._alone_lock:
            alone, self._alone = self._alone, None
        for conn in (self._writer, self._reader, alone):
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
        output_limit: int | None = DEFAULT_OUTPUT_LIMIT,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        dialect = PostgresDialect(url, connect_timeout)
        dialect.open()
        self._dialect = dialect
        self._listen_lock = threading.Lock()
        self._listener: _Listener | None = None
        self._watchers: list[Callable[[bool], None]] = []
        self._pause_watchers: list[Callable[[], None]] = []
        super().__init__(dialect, output_limit=output_limit)

    def _request_kill(self, run_id: str | None, job: str | None, reason: str | None) -> int:
        count = super()._request_kill(run_id, job, reason)
        if count:
            self._write(lambda cur: self._dialect.notify(cur, "kill"))
        return count

    def _pauses_changed(self, cur: Any) -> None:
        super()._pauses_changed(cur)
        self._dialect.notify(cur, "pause")

    def watch(self, wake: Callable[[bool], None]) -> bool:
        with self._listen_lock:
            if self._closed:
                return False
            self._watchers.append(wake)
            self._listen()
        return True

    def watch_pauses(self, wake: Callable[[], None]) -> bool:
        with self._listen_lock:
            if self._closed:
                return False
            self._pause_watchers.append(wake)
            self._listen()
        return True

    def _listen(self) -> None:
        """Start the listening thread if none runs yet (lock held): one for every watcher."""
        if self._listener is None:
            self._listener = _Listener(self._dialect, self._wake)

    def _wake(self, payload: str) -> None:
        """A notification (`payload`), or ``listening``: the listener (again) listens."""
        if payload != "pause":
            for wake in list(self._watchers):
                try:
                    wake(payload != "queue")  # a kill, or anything missed meanwhile
                except Exception:
                    log.exception("a watcher of the queue failed")
        if payload in ("pause", "listening"):
            for tell in list(self._pause_watchers):
                try:
                    tell()
                except Exception:
                    log.exception("a watcher of the pauses failed")

    def close(self) -> None:
        with self._listen_lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.close(lambda: self._write(lambda cur: self._dialect.notify(cur, "close")))
        super().close()


class _Listener:
    """``LISTEN`` on a connection of its own, in a thread of its own (see the module notes)."""

    def __init__(self, dialect: PostgresDialect, wake: Callable[[str], None]) -> None:
        self._dialect = dialect
        self._wake = wake
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="jobscheduler-listen", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        error = self._dialect.error
        warned = False
        while not self._stopping.is_set():
            conn = None
            try:
                conn = self._dialect.connect(autocommit=True)
                conn.execute(f"LISTEN {CHANNEL}")
                if self._stopping.is_set():  # closed before it listened: no word will come
                    break
                if warned:  # INFO: the node tells the outage itself (cluster/outage.py)
                    log.info("state store %s: listening again", self._dialect.masked_url)
                    warned = False
                self._wake("listening")  # whatever came while nobody listened
                # No timeout: an idle node wakes for nothing else. `close` ends the wait with
                # a notification of its own (any other payload is no one's: ignored).
                for note in conn.notifies():
                    if self._stopping.is_set():
                        break
                    if note.payload in ("queue", "kill", "pause"):
                        self._wake(note.payload)
            except (StoreError, error) as exc:
                if not warned:
                    log.info(
                        "state store %s: not listening (%s); trying again every %g s",
                        self._dialect.masked_url,
                        exc,
                        LISTEN_RETRY,
                    )
                    warned = True
                self._stopping.wait(LISTEN_RETRY)
            finally:
                if conn is not None:
                    conn.close()

    def close(self, tell: Callable[[], object]) -> None:
        """Stop listening: `tell` sends the notification that ends the thread's wait (a store
        out of reach: the thread, a daemon, ends when its connection fails)."""
        self._stopping.set()
        try:
            tell()
        except Exception as exc:
            log.debug("state store %s: no notification to close: %s", self._dialect.masked_url, exc)
            return
        if self._thread is not threading.current_thread():
            self._thread.join(5.0)
