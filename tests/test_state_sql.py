"""What only the SQL stores have: URLs, files, schema versions, other programs' rows, several
stores on one database, bad input, group commit. SQLite on real files, PostgreSQL on the
session's real server (tests/pg_server.py)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from pg_server import PgServer
from waiting import wait_until

from jobscheduler.errors import JobActionError
from jobscheduler.state import (
    RunState,
    StateStore,
    StoreError,
    StoreUnavailableError,
    open_store,
)
from jobscheduler.state.postgres import PostgresStateStore
from jobscheduler.state.sqlite import SqliteStateStore, sqlite_path
from jobscheduler.state.sqlmigrate import migrations, statements
from jobscheduler.state.sqlstore import SqlStateStore

T0 = datetime(2024, 1, 1, tzinfo=UTC)
ENGINES = ["sqlite", "postgres"]
# DESIGN.md's insert, as another program writes it.
PLAIN_INSERT = (
    "INSERT INTO jobscheduler_queue (job, args, priority) "
    """VALUES ('report', '{"day": "mon"}', 5)"""
)


class Opened:
    """Opens SQL stores of one engine on one database (a file, or a schema), and closes them;
    `execute` runs SQL there as another program would."""

    def __init__(self, engine: str, tmp_path: Path, pg: PgServer | None) -> None:
        self.engine = engine
        self.stores: list[SqlStateStore] = []
        if engine == "sqlite":
            self.url = f"sqlite:///{tmp_path}/state.db"
        else:
            assert pg is not None
            self.url = pg.fresh_schema_url()

    def open(self) -> SqlStateStore:
        store = open_store(self.url)[0]
        assert isinstance(store, SqlStateStore)
        self.stores.append(store)
        return store

    def execute(self, sql: str) -> list[tuple[object, ...]]:
        if self.engine == "sqlite":
            conn = sqlite3.connect(sqlite_path(self.url)[0], isolation_level=None)
            try:
                return list(conn.execute(sql).fetchall())
            finally:
                conn.close()
        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(sql.encode())
            return list(cur.fetchall()) if cur.description else []


@pytest.fixture(params=ENGINES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    pg = request.getfixturevalue("pg_server") if request.param == "postgres" else None
    opened = Opened(request.param, tmp_path, pg)
    yield opened
    for store in opened.stores:
        store.close()


def one_line_error(make: Callable[[], object]) -> str:
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        make()
    assert time.monotonic() - started < 12  # the connect timeout is 10 s
    message = str(caught.value)
    assert "\n" not in message and isinstance(caught.value, JobActionError)
    return message


# -- URLs and files ----------------------------------------------------------------------------


def test_sqlite_urls_read_as_sqlalchemy_reads_them() -> None:
    assert sqlite_path("sqlite:///relative.db") == ("relative.db", {})
    assert sqlite_path("sqlite:////abs/path.db") == ("/abs/path.db", {})
    assert sqlite_path("sqlite:///a.db?synchronous=normal") == ("a.db", {"synchronous": "normal"})


def test_a_relative_sqlite_url_is_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store, owned = open_store("sqlite:///here.db")
    store.close()
    assert owned and (tmp_path / "here.db").is_file()


def test_a_missing_directory_is_an_error_not_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/nowhere/state.db"
    message = one_line_error(lambda: open_store(url))
    assert url in message and "does not exist" in message and "key 'state'" in message
    assert not (tmp_path / "nowhere").exists()


def test_a_file_that_is_no_database_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("not a database, " * 100)
    message = one_line_error(lambda: SqliteStateStore(tmp_path / "notes.db"))
    assert "notes.db" in message and "not a jobscheduler SQLite file" in message


def test_a_read_only_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SqliteStateStore(path).close()
    if os.geteuid() == 0:  # root writes through file modes: make the file immutable
        subprocess.run(["chattr", "+i", str(path)], check=True)
    else:
        path.chmod(0o444)
        tmp_path.chmod(0o555)
    try:
        message = one_line_error(lambda: open_store(f"sqlite:///{path}"))
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        tmp_path.chmod(0o755)
        path.chmod(0o644)
    assert "read-only" in message and str(path) in message


def test_an_unknown_scheme_or_option_is_refused(tmp_path: Path) -> None:
    message = one_line_error(lambda: open_store("mysql://app:s3cret@db/jobs"))
    assert "mysql://app:***@db/jobs" in message and "s3cret" not in message
    assert "sqlite:///PATH" in message
    message = one_line_error(lambda: open_store(f"sqlite:///{tmp_path}/s.db?journal=off"))
    assert "unknown option 'journal'" in message


def test_an_unreachable_server_fails_fast_with_the_password_masked(pg_server: PgServer) -> None:
    with socket_closed() as port:
        url = f"postgresql://app:s3cret@127.0.0.1:{port}/jobs"
        message = one_line_error(lambda: open_store(url))
    assert "postgresql://app:***@127.0.0.1" in message and "s3cret" not in message
    assert "cannot be reached" in message


def test_a_wrong_database_is_refused(pg_server: PgServer) -> None:
    url = pg_server.url("no_such_db").replace("postgresql://", "postgresql+psycopg://")
    message = one_line_error(lambda: open_store(url))
    assert "no_such_db" in message and pg_server_password() not in message
    assert "postgresql+psycopg://postgres:***@127.0.0.1" in message


def test_a_wrong_password_is_refused_and_masked(pg_server: PgServer) -> None:
    url = pg_server.url(password="Wr0ng-s3cret")
    message = one_line_error(lambda: open_store(url))
    assert "password authentication failed" in message
    assert "Wr0ng-s3cret" not in message and "postgres:***@" in message


def test_without_psycopg_the_url_says_what_to_install(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    message = one_line_error(lambda: open_store(pg_server.url()))
    assert "jobscheduler[postgres]" in message and pg_server_password() not in message


def pg_server_password() -> str:
    from pg_server import PASSWORD

    return PASSWORD


def test_the_psycopg_url_form_is_accepted(pg_server: PgServer) -> None:
    url = pg_server.fresh_schema_url().replace("postgresql://", "postgresql+psycopg://")
    store = open_store(url)[0]
    try:
        assert isinstance(store, PostgresStateStore) and store.history() == []
    finally:
        store.close()


class socket_closed:
    """A local port nothing listens on."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        return None


# -- schema versions ---------------------------------------------------------------------------


def test_schema_files_are_numbered_and_split() -> None:
    for engine in ENGINES:
        files = migrations(engine)
        assert [v for v, _ in files] == list(range(1, len(files) + 1))
        assert any("jobscheduler_queue" in s for s in statements(files[0][1]))


def test_the_schema_version_is_recorded_once(db: Opened) -> None:
    db.open().close()
    db.open()
    newest = migrations(db.engine)[-1][0]
    assert [row[0] for row in db.execute("SELECT version FROM jobscheduler_schema")] == list(
        range(1, newest + 1)
    )


def test_an_older_schema_is_upgraded_keeping_its_data(
    db: Opened, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = db.open()
    assert store.claim("j", T0, "schedule", "r1", node="n", started=T0)
    store.close()
    from jobscheduler.state import sqlmigrate

    released = migrations(db.engine)
    upgrade = (
        "CREATE TABLE jobscheduler_extra (x INTEGER);\nINSERT INTO jobscheduler_extra VALUES (7)"
    )
    monkeypatch.setattr(
        sqlmigrate, "migrations", lambda engine: [*released, (len(released) + 1, upgrade)]
    )
    again = db.open()
    versions = [row[0] for row in db.execute("SELECT version FROM jobscheduler_schema")]
    assert versions == list(range(1, len(released) + 2))
    assert db.execute("SELECT x FROM jobscheduler_extra") == [(7,)]
    assert [r.run_id for r in again.history()] == ["r1"]
    again.close()
    db.open()  # applied once
    assert db.execute("SELECT x FROM jobscheduler_extra") == [(7,)]


def test_a_newer_schema_is_refused_and_left_alone(db: Opened) -> None:
    store = db.open()
    assert store.claim("j", T0, "schedule", "r1", node="n", started=T0)
    store.close()
    db.execute("INSERT INTO jobscheduler_schema (version) VALUES (999)")
    message = one_line_error(db.open)
    assert "schema version 999" in message and "upgrade jobscheduler" in message
    assert db.execute("SELECT run_id FROM jobscheduler_runs") == [("r1",)]


# -- durability and sharing --------------------------------------------------------------------


def test_what_is_written_survives_a_reopen(db: Opened) -> None:
    store = db.open()
    assert store.claim("j", T0, "schedule", "r1", node="n", started=T0)
    store.set_mark("j", last_slot=T0, failures=2)
    queued = store.submit("j", {"x": 1})
    store.close()
    again = db.open()
    [record] = again.history()
    assert (record.run_id, record.state, record.slot) == ("r1", RunState.RUNNING, T0)
    assert not again.claim("j", T0, "schedule", "r2", node="m", started=T0)
    mark = again.mark("j")
    assert mark is not None and (mark.last_slot, mark.failures) == (T0, 2)
    assert [(r.id, r.args) for r in again.queue()] == [(queued, {"x": 1})]


def test_two_stores_on_one_database_claim_each_slot_once(db: Opened) -> None:
    stores = [db.open(), db.open()]
    wins: list[list[int]] = [[], []]
    barrier = threading.Barrier(4)

    def contender(n: int) -> None:
        store = stores[n % 2]
        barrier.wait()
        for k in range(150):
            slot = T0 + timedelta(minutes=k)
            if store.claim("j", slot, "schedule", f"{n}-{k}", node=f"n{n}", started=slot):
                wins[n % 2].append(k)

    threads = [threading.Thread(target=contender, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(wins[0] + wins[1]) == list(range(150))
    assert db.execute("SELECT count(*) FROM jobscheduler_runs") == [(150,)]


RACER = """
import sys
from datetime import UTC, datetime, timedelta
from jobscheduler.state.open import open_store
store = open_store(sys.argv[1])[0]
t0 = datetime(2024, 1, 1, tzinfo=UTC)
print("ready", flush=True)
sys.stdin.readline()  # all start together
won = [k for k in range(int(sys.argv[3]))
       if store.claim("j", t0 + timedelta(minutes=k), "schedule", f"{sys.argv[2]}-{k}",
                      node=sys.argv[2], started=t0)]
store.close()
print(" ".join(map(str, won)))
"""


def test_processes_racing_on_one_database_claim_each_slot_once(db: Opened) -> None:
    import sys

    db.open().close()  # the schema made before the race
    slots = 300
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, db.url, f"p{n}", str(slots)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(3)
    ]
    for racer in racers:  # imported and opened
        assert racer.stdout is not None
        assert racer.stdout.readline() == "ready\n"
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    won: list[int] = []
    for racer in racers:
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
        won += [int(k) for k in out.split()]
    assert sorted(won) == list(range(slots))
    assert db.execute("SELECT count(*) FROM jobscheduler_runs") == [(slots,)]


def test_another_programs_plain_insert_is_queued(db: Opened) -> None:
    store = db.open()
    db.execute(PLAIN_INSERT)
    db.execute("INSERT INTO jobscheduler_queue (job) VALUES ('report')")
    [first, second] = store.take("n", jobs={"report"}, limit=5)
    assert (first.args, first.priority, first.state) == ({"day": "mon"}, 5, "running")
    assert (second.args, second.priority, second.host) == (None, 0, None)
    assert abs((first.submitted - store.now()).total_seconds()) < 60


def test_concurrent_claims_share_transactions(db: Opened) -> None:
    store = db.open()
    barrier = threading.Barrier(8)

    def claimer(n: int) -> None:
        barrier.wait()
        for k in range(100):
            assert store.claim("j", None, "run_now", f"{n}-{k}", node="n", started=T0)

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(8)]
    before = store.batches
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store.history(limit=10_000)) == 800
    assert store.batches - before < 800  # group commit: some claims shared a transaction


# -- a store that goes away --------------------------------------------------------------------


def test_a_locked_sqlite_file_is_unavailable_not_a_crash(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "s.db", busy_timeout=0.2)
    holder = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with pytest.raises(StoreUnavailableError, match="locked"):
            store.claim("j", None, "run_now", "r1", node="n", started=T0)
        assert store.history() == []  # reads go on (WAL)
        # Polling an empty queue or outbox reads only: no write lock wanted.
        assert store.take("n", jobs={"j"}, limit=5) == []
        assert store.due_alerts(limit=5) == []
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.claim("j", None, "run_now", "r1", node="n", started=T0)  # back: writes again
    store.close()


def test_a_lost_postgres_connection_is_unavailable_then_reconnects(pg_server: PgServer) -> None:
    store = PostgresStateStore(pg_server.fresh_schema_url())
    try:
        assert store.claim("j", None, "run_now", "r1", node="n", started=T0)
        pg_server.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND query NOT LIKE '%pg_stat_activity%' "
            "AND backend_type = 'client backend'"
        )
        with pytest.raises(StoreUnavailableError):
            store.claim("j", None, "run_now", "r2", node="n", started=T0)
        assert store.claim("j", None, "run_now", "r3", node="n", started=T0)
        assert sorted(r.run_id for r in store.history()) == ["r1", "r3"]
    finally:
        store.close()


def test_sql_stores_are_state_stores(db: Opened) -> None:
    assert isinstance(db.open(), StateStore)


def test_the_claims_benchmark_runs(tmp_path: Path) -> None:
    import json
    import sys

    repo = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [sys.executable, "bench/claims.py", "--smoke", "--quiet", "--results", str(tmp_path)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "claims-smoke.json").read_text())
    duplicates = [t for t in doc["targets"] if t["name"].startswith("duplicate")]
    assert duplicates and all(t["met"] for t in duplicates)


def test_close_waits_for_the_write_under_way(tmp_path: Path) -> None:
    store = SqliteStateStore(tmp_path / "s.db", busy_timeout=60.0)
    holder = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the store's write waits for this lock
    answers: list[object] = []

    def claimer() -> None:
        try:
            answers.append(store.claim("j", None, "run_now", "r1", node="n", started=T0))
        except BaseException as exc:
            answers.append(exc)

    writing = threading.Thread(target=claimer)
    before = store.batches
    writing.start()
    # The claim's transaction has begun: it waits for the lock.
    wait_until(lambda: store.batches > before, "the claim's transaction")
    closing = threading.Thread(target=store.close)
    closing.start()
    closing.join(0.3)
    assert closing.is_alive()  # close waits for the write under way
    holder.execute("ROLLBACK")
    holder.close()
    writing.join(timeout=60)
    closing.join(timeout=60)
    assert answers == [True]
    assert [r.run_id for r in store.history()] == ["r1"]  # still answers after close


def test_nodes_writing_the_same_marks_and_claims_at_once_never_deadlock(db: Opened) -> None:
    # Two nodes' beats write the marks of the same jobs, each in the order its runs ended,
    # and claim the same slots in the order their workers took them.
    stores = [db.open(), db.open()]
    jobs = [f"j{i:04}" for i in range(600)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def node(k: int) -> None:
        store = stores[k]
        order = jobs if k == 0 else jobs[::-1]
        try:
            barrier.wait()
            for round_ in range(8):
                slot = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=round_)
                store.set_marks({job: slot for job in order})
                store.claim_many(
                    [(job, slot, "schedule", f"{k}-{round_}-{job}", f"n{k}", 1, slot)
                     for job in order]
                )  # fmt: skip
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=node, args=(k,)) for k in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    last = datetime(2024, 1, 1, 0, 0, 7, tzinfo=UTC)
    assert {job: mark.last_slot for job, mark in stores[0].marks().items()} == dict.fromkeys(
        jobs, last
    )
    # Every slot claimed once, by one node or the other.
    assert len(stores[0].history(limit=10_000)) == 600 * 8


# -- what a burst costs the store ----------------------------------------------------------------


def test_a_bursts_posted_finishes_are_one_statement_on_postgresql(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finishes posted together are written by one statement in autocommit (the flush's own
    marker is not part of the batch: with it, the batch was a transaction of its own), each
    instant exact to the microsecond."""
    db = Opened("postgres", Path("."), pg_server)
    store = db.open()
    alone: list[int] = []
    dialect = store._d  # its fastest way for a batch of finishes alone is what is checked
    finishes_only = dialect.finishes_only
    monkeypatch.setattr(
        dialect, "finishes_only", lambda f: alone.append(len(f)) or finishes_only(f)
    )
    try:
        slot = T0 + timedelta(microseconds=123_457)
        claims = [("j", slot, "schedule", f"r{k}", "n", k + 1, slot) for k in range(200)]
        assert store.claim_many(claims) == [True] * 200
        before = store.statements
        for k in range(200):
            ended = T0 + timedelta(seconds=1, microseconds=k * 7 + 1)
            started = T0 + timedelta(microseconds=k * 3 + 999_999)
            store.finish(
                f"r{k}", state=RunState.SUCCEEDED, ended=ended, started=started, wait=False
            )
        runs = {r.run_id: r for r in store.history(limit=1000)}  # flushes the posted ones
        assert store.statements - before == 2  # the finishes, then the read
        assert alone == [200]
        for k in range(200):
            run = runs[f"r{k}"]
            assert run.state is RunState.SUCCEEDED and run.slot == slot
            assert run.ended == T0 + timedelta(seconds=1, microseconds=k * 7 + 1)
            assert run.started == T0 + timedelta(microseconds=k * 3 + 999_999)
    finally:
        store.close()


def test_many_marks_are_one_statement_on_postgresql(pg_server: PgServer) -> None:
    db = Opened("postgres", Path("."), pg_server)
    store = db.open()
    try:
        slots = {f"j{k}": T0 + timedelta(seconds=k, microseconds=k) for k in range(1200)}
        before = store.statements
        store.set_marks(slots)
        assert store.statements - before == 1
        store.set_marks({"j1": T0})  # never backwards
        marks = store.marks()
        assert {job: mark.last_slot for job, mark in marks.items()} == slots
    finally:
        store.close()
