"""`SqliteStateStore`: the state store in one SQLite file (stdlib `sqlite3`, WAL).

Settings (decided; see docs/state.md for the figures): WAL journal, so readers never wait for
the writer; ``synchronous=FULL`` by default: a committed claim survives a power cut, not only
a crash of the process (NORMAL may lose the last transactions on a power cut, and a lost claim
lets a slot run twice; group commit makes FULL fast enough, ``?synchronous=normal`` in the URL
trades that guarantee for speed); a busy timeout of 10 s, so several processes sharing the
file take turns at writing (each write transaction is ``BEGIN IMMEDIATE``: it takes the write
lock first, so a transaction never fails half way for a lock). One connection writes (the
group commit's leader), one reads; both are guarded by their locks.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs

from .base import StoreClosedError, StoreError, StoreUnavailableError
from .sqldialect import Dialect
from .sqlmigrate import upgrade
from .sqlstore import DEFAULT_OUTPUT_LIMIT, SqlStateStore

__all__ = ["SqliteStateStore", "sqlite_path"]

T = TypeVar("T")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
SYNCHRONOUS = ("full", "normal")
BUSY_TIMEOUT = 10.0


def sqlite_path(url: str) -> tuple[str, dict[str, str]]:
    """The file and the options of a ``sqlite:///…`` URL, read as SQLAlchemy reads it:
    ``sqlite:///relative.db`` (from the working directory), ``sqlite:////abs/path.db``;
    ``?synchronous=normal`` an option."""
    if not url.startswith("sqlite:///"):
        raise StoreError(f"state store {url!r}: a SQLite URL is sqlite:///PATH")
    rest, _, query = url[len("sqlite:///") :].partition("?")
    if not rest:
        raise StoreError(f"state store {url!r}: no file named (sqlite:///PATH)")
    options = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    return rest, options


class SqliteDialect(Dialect):
    engine = "sqlite"

    def __init__(self, path: str, shown: str, synchronous: str, busy_timeout: float) -> None:
        super().__init__(shown)
        self.path = path
        self._synchronous = synchronous
        self._busy = busy_timeout
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self._busy, isolation_level=None, check_same_thread=False
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy * 1000)}")
        return conn

    def open(self) -> None:
        """Connect, switch to WAL, bring the schema up to date (errors: `StoreError`)."""
        shown = self.masked_url
        folder = Path(self.path).parent
        if not folder.is_dir():
            raise StoreError(f"state store {shown!r}: directory {str(folder)!r} does not exist")
        try:
            writer = self.connect()
            try:
                mode = writer.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"state store {shown!r}: cannot use WAL (journal {mode})")
                writer.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
                writer.execute("BEGIN IMMEDIATE")
                try:
                    upgrade(
                        writer.execute,
                        "sqlite",
                        "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                        "AND name = 'jobscheduler_schema'",
                        shown,
                    )
                    # A write, to learn now (not at the first claim) that the file is
                    # read-only: SQLite opens such a file read-only without a word.
                    writer.execute(
                        "UPDATE jobscheduler_schema SET applied = applied "
                        "WHERE version = (SELECT MAX(version) FROM jobscheduler_schema)"
                    )
                    writer.execute("COMMIT")
                except BaseException:
                    writer.execute("ROLLBACK")
                    raise
            except BaseException:
                writer.close()
                raise
        except sqlite3.Error as exc:
            raise self.error(exc, opening=True) from None
        self._writer = writer
        self._reader = self.connect()

    def error(self, exc: sqlite3.Error, *, opening: bool = False) -> StoreError:
        text = str(exc)
        shown = self.masked_url
        if "readonly" in text or "read-only" in text:
            return StoreError(f"state store {shown!r} is read-only: {text}")
        if opening and not isinstance(exc, sqlite3.OperationalError | sqlite3.DatabaseError):
            return StoreError(f"state store {shown!r}: {text}")
        if opening and ("not a database" in text or "malformed" in text):
            return StoreError(f"state store {shown!r} is not a jobscheduler SQLite file: {text}")
        if opening:
            return StoreError(f"state store {shown!r} cannot be opened: {text}")
        return StoreUnavailableError(f"state store {shown!r}: {text}")

    # -- values ------------------------------------------------------------------------------

    def instant(self, value: datetime | None) -> int | None:
        return None if value is None else (value - EPOCH) // _US

    def datetime(self, value: Any) -> datetime | None:
        return None if value is None else EPOCH + timedelta(microseconds=value)

    def length(self, value: timedelta) -> int:
        return value // _US

    # -- connections -------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        writer = self._writer
        if writer is None:
            raise StoreClosedError("the state store is closed")
        cur = writer.cursor()
        try:
            cur.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self.error(exc) from None
        try:
            yield cur
            cur.execute("COMMIT")
        except BaseException as exc:
            if writer.in_transaction:
                writer.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError):
                raise self.error(exc) from None
            raise

    def read(self, fn: Callable[[Any], T], *, closed: bool) -> T:
        conn = self._reader if not closed else self.connect()
        if conn is None:
            conn = self.connect()
            closed = True
        try:
            return fn(conn.cursor())
        except sqlite3.OperationalError as exc:
            raise self.error(exc) from None
        finally:
            if closed:
                conn.close()

    def close(self) -> None:
        for conn in (self._writer, self._reader):
            if conn is not None:
                conn.close()
        self._writer = self._reader = None


class SqliteStateStore(SqlStateStore):
    """The state store in the SQLite file `path` (a path, or a ``sqlite:///…`` URL).

    Raises `StoreError` (one line naming the file) when the file's directory is missing (it
    is not created), the file is read-only, is not a database, or holds a newer schema.
    `synchronous` is ``"full"`` (the default) or ``"normal"`` (see the module's docstring).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        output_limit: int | None = DEFAULT_OUTPUT_LIMIT,
        synchronous: str | None = None,
        busy_timeout: float = BUSY_TIMEOUT,
    ) -> None:
        text = str(path)
        if text.startswith("sqlite:"):
            file, options = sqlite_path(text)
            shown = text
        else:
            file, options, shown = text, {}, f"sqlite:///{text}"
        unknown = set(options) - {"synchronous"}
        if unknown:
            raise StoreError(f"state store {shown!r}: unknown option {sorted(unknown)[0]!r}")
        sync = (synchronous or options.get("synchronous") or "full").lower()
        if sync not in SYNCHRONOUS:
            raise StoreError(f"state store {shown!r}: synchronous must be full or normal")
        dialect = SqliteDialect(file, shown, sync, busy_timeout)
        dialect.open()
        super().__init__(dialect, output_limit=output_limit)
        self.path = file
