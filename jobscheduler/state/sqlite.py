"""`SqliteStateStore`: the state store in one SQLite file (stdlib `sqlite3`, WAL).

Settings (decided; see docs/state.md for the figures): WAL journal, so readers never wait for
the writer; ``synchronous=FULL`` by default: a committed claim survives a power cut, not only
a crash of the process (NORMAL may lose the last transactions on a power cut, and a lost claim
lets a slot run twice; group commit makes FULL fast enough, ``?synchronous=normal`` in the URL
trades that guarantee for speed); a busy timeout of 10 s, so several processes sharing the
file take turns at writing (each write transaction is ``BEGIN IMMEDIATE``: it takes the write
lock first, so a transaction never fails half way for a lock). One connection writes (the
group commit's leader), one reads; both are guarded by their locks.

A node polls the pauses (`SqlPauses.pause_version`) without a statement while nobody else
commits: `SqliteDialect.commit_mark` reads the WAL index's header, whose change counter moves
with every commit by any process, and the dialect tells its own heartbeats' commits apart
(`quiet_write`), so an idle node reads nothing for its own heartbeat either.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
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
WAL_INDEX_HEADER = 48
"""Bytes of the WAL index's header, kept twice at the start of the ``-shm`` file
(https://sqlite.org/walformat.html#the_wal_index_header): version, change counter
(bytes 8-11, the machine's byte order), frame count, salts, checksums."""
QUIET_KEPT = 64
"""Quiet commits remembered (`SqliteDialect.quiet_since`): more than a poll's worth."""


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
        self._shm = f"{path}-shm"
        self._quiet_from: bytes | None = None  # the mark before this transaction's quiet write
        self._followed = False  # this transaction changed what nodes follow
        self._quiet: dict[bytes, bytes] = {}  # mark before -> after each quiet commit
        self._quiet_lock = threading.Lock()

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
        self._quiet_from, self._followed = None, False
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
        if self._quiet_from is not None and not self._followed:
            self._note_quiet(self._quiet_from)

    # -- commits told apart ------------------------------------------------------------------

    def commit_mark(self) -> bytes | None:
        """The WAL index's header (`WAL_INDEX_HEADER`): its change counter moves by one with
        every commit to the file, by any process (a checkpoint leaves it; a restart of the
        WAL changes the salts), so two equal marks mean no commit between them, whatever the
        files' times say. One read of the ``-shm`` file: no SQLite statement, no lock. None
        when it cannot be read whole (no file; its two copies differ: a writer between
        them): the caller reads the database instead."""
        try:
            with open(self._shm, "rb", buffering=0) as file:
                data = file.read(2 * WAL_INDEX_HEADER)
        except OSError:
            return None
        head = data[:WAL_INDEX_HEADER]
        if len(data) < 2 * WAL_INDEX_HEADER or head != data[WAL_INDEX_HEADER:] or head[12] != 1:
            return None  # short, torn, or not initialised (isInit, byte 12)
        return head

    def quiet_write(self) -> None:
        # The write lock is held: the mark is the last commit before this transaction's.
        if self._quiet_from is None:
            self._quiet_from = self.commit_mark()

    def followed_write(self) -> None:
        self._followed = True

    def _note_quiet(self, before: bytes) -> None:
        """After the commit of a quiet write: the commit from `before` to now was this
        transaction's alone when the counter moved by exactly one (another process's commit
        right after it makes two: not remembered, the poll reads then)."""
        after = self.commit_mark()
        if after is None or _changes(after) != (_changes(before) + 1) & 0xFFFFFFFF:
            return
        with self._quiet_lock:
            self._quiet[before] = after
            if len(self._quiet) > QUIET_KEPT:
                del self._quiet[next(iter(self._quiet))]

    def quiet_since(self, mark: bytes, now: bytes) -> bool:
        with self._quiet_lock:
            for _ in range(len(self._quiet)):
                if mark == now or mark not in self._quiet:
                    break
                mark = self._quiet[mark]
        return mark == now

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


def _changes(mark: bytes) -> int:
    """The change counter of a WAL index header (`SqliteDialect.commit_mark`)."""
    return int.from_bytes(mark[8:12], sys.byteorder)


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
