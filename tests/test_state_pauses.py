"""The `PauseStore` contract over every store of `STORES`: pauses kept with who, when, note
and until; resume; `pause_after_failures`' count decided in the store, exactly, whoever
counts at once; the version a polling node reads; the watchers a change wakes."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from pg_server import PgServer
from state_stores import MakeStore

from jobscheduler.state import StateStore
from jobscheduler.state.postgres import PostgresStateStore
from jobscheduler.state.sqlite import SqliteStateStore
from jobscheduler.state.values import JobPause

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NOTE = "paused after 3 consecutive failures"


def test_pause_keeps_who_when_note_and_until(store: StateStore) -> None:
    assert store.pauses() == {} and store.pause_of("a") is None
    before = store.pause_version()
    store.pause(["a", "b"], node="n1", paused_at=T0, note="deploy", until=T0 + timedelta(hours=2))
    assert store.pause_version() != before
    a = store.pause_of("a")
    assert a == JobPause(
        job="a", node="n1", paused_at=T0, note="deploy", until=T0 + timedelta(hours=2)
    )
    assert set(store.pauses()) == {"a", "b"}
    assert a.in_force(T0 + timedelta(hours=1)) and not a.in_force(T0 + timedelta(hours=2))
    # A second pause replaces the first (an open-ended one here).
    store.pause(["a"], node="n2", paused_at=T0 + timedelta(minutes=1))
    assert store.pause_of("a") == JobPause(job="a", node="n2", paused_at=T0 + timedelta(minutes=1))


def test_resume_one_or_all(store: StateStore) -> None:
    store.pause(["a", "b", "c"], node="n1", paused_at=T0)
    version = store.pause_version()
    assert store.resume(["a", "zz"]) == ["a"]
    assert set(store.pauses()) == {"b", "c"} and store.pause_version() != version
    version = store.pause_version()
    assert store.resume(["zz"]) == [] and store.pause_version() == version
    assert sorted(store.resume()) == ["b", "c"] and store.pauses() == {}


def test_bad_values_are_refused(store: StateStore) -> None:
    with pytest.raises(ValueError, match="aware"):
        store.pause(["a"], node="n", paused_at=datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="list of names"):
        store.pause("abc", node="n", paused_at=T0)
    with pytest.raises(ValueError, match="non-empty"):
        store.pause([""], node="n", paused_at=T0)
    with pytest.raises(ValueError, match="limit"):
        store.count_outcome("a", failed=True, limit=0, node="n", at=T0, note=NOTE)
    assert store.pauses() == {}


def count(store: StateStore, failed: bool, at: datetime = T0, **kw: object) -> JobPause | None:
    return store.count_outcome(
        "j",
        failed=failed,
        limit=3,
        node="n1",
        at=at,
        note=NOTE,
        **kw,  # type: ignore[arg-type]
    )


def test_count_pauses_at_exactly_the_limit_and_a_success_resets(store: StateStore) -> None:
    assert count(store, True) is None and count(store, True) is None
    assert count(store, False) is None  # reset
    assert count(store, True) is None and count(store, True) is None
    made = count(store, True)
    assert made == JobPause(job="j", node="n1", paused_at=T0, note=NOTE)
    assert store.pause_of("j") == made
    mark = store.mark("j")
    assert mark is not None and mark.failures == 0  # counted afresh after the pause
    # While paused, nothing is counted (a run that started before the pause).
    assert count(store, True) is None and count(store, True) is None
    assert count(store, True) is None
    assert store.mark("j").failures == 0  # type: ignore[union-attr]


def test_count_resumes_after_a_pause_with_until_has_passed(store: StateStore) -> None:
    until = T0 + timedelta(minutes=5)
    for _ in range(2):
        assert count(store, True, until=until) is None
    assert count(store, True, until=until) is not None
    assert count(store, True, at=until - timedelta(seconds=1), until=until) is None  # in force
    later = until + timedelta(seconds=1)
    assert count(store, True, at=later) is None and count(store, True, at=later) is None
    assert count(store, True, at=later) == JobPause(job="j", node="n1", paused_at=later, note=NOTE)


def test_resume_resets_the_count(store: StateStore) -> None:
    count(store, True)
    count(store, True)
    store.resume(["j"])
    assert store.mark("j").failures == 0  # type: ignore[union-attr]
    assert count(store, True) is None and count(store, True) is None
    assert count(store, True) is not None


def test_concurrent_counts_pause_once_after_exactly_the_limit(store: StateStore) -> None:
    barrier = threading.Barrier(6)
    made: list[JobPause | None] = []

    def counter() -> None:
        barrier.wait()
        for _ in range(5):
            made.append(store.count_outcome("j", failed=True, limit=7, node="n", at=T0, note=NOTE))

    threads = [threading.Thread(target=counter) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 30 failures counted at once: the 7th paused the job; the 23 after it were not counted.
    assert sum(1 for m in made if m is not None) == 1
    assert store.mark("j").failures == 0  # type: ignore[union-attr]


def test_watchers_hear_of_a_change(store: StateStore) -> None:
    heard = threading.Event()
    watched = store.watch_pauses(heard.set)
    if not watched:
        assert isinstance(store, SqliteStateStore)  # it polls `pause_version` instead
        return
    deadline = time.monotonic() + 30
    while not heard.is_set() and time.monotonic() < deadline:  # the listener starts
        heard.wait(0.05)
    heard.clear()
    store.pause(["a"], node="n", paused_at=T0)
    assert heard.wait(30)


def test_a_change_reaches_another_handle_on_sqlite(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "state.db"
    one, two = SqliteStateStore(path), SqliteStateStore(path)
    try:
        version = two.pause_version()
        one.pause(["a"], node="n", paused_at=T0, note="x")
        assert two.pause_version() != version
        assert two.pause_of("a") == JobPause(job="a", node="n", paused_at=T0, note="x")
    finally:
        one.close()
        two.close()


def test_a_change_is_notified_to_another_handle_on_postgres(pg_server: PgServer) -> None:
    url = pg_server.fresh_schema_url()
    one, two = PostgresStateStore(url), PostgresStateStore(url)
    heard = threading.Event()
    try:
        assert two.watch_pauses(heard.set)
        assert heard.wait(30)  # listening
        heard.clear()
        one.pause(["a"], node="n", paused_at=T0)
        assert heard.wait(30)
        assert set(two.pauses()) == {"a"}
        heard.clear()
        assert one.resume() == ["a"]
        assert heard.wait(30)
    finally:
        one.close()
        two.close()


def test_a_closed_store_refuses_pauses(make_store: MakeStore) -> None:
    store = make_store()
    store.close()
    with pytest.raises(Exception, match="closed"):
        store.pause(["a"], node="n", paused_at=T0)


def test_a_pause_by_failures_kept_in_the_marks_becomes_a_pause_at_the_upgrade(
    tmp_path: object,
) -> None:
    import sqlite3
    from pathlib import Path

    from jobscheduler.state.sqlmigrate import migrations, statements

    path = Path(str(tmp_path)) / "old.db"
    db = sqlite3.connect(path)
    for version, script in migrations("sqlite")[:3]:  # a store written before pauses
        for statement in statements(script):
            db.execute(statement)
        db.execute(f"INSERT INTO jobscheduler_schema (version) VALUES ({version})")
    db.execute(
        "INSERT INTO jobscheduler_marks (job, failures, paused_reason) VALUES (?, 3, ?)",
        ("bad", NOTE),
    )
    db.commit()
    db.close()
    store = SqliteStateStore(path)
    try:
        pause = store.pause_of("bad")
        assert pause is not None and pause.note == NOTE and pause.until is None
        assert pause.in_force(datetime.now(UTC))
        mark = store.mark("bad")
        assert mark is not None and mark.failures == 0 and mark.paused_reason is None
    finally:
        store.close()


def test_prune_drops_the_pauses_that_ended_before_the_cut_off(store: StateStore) -> None:
    store.pause(["old"], node="n", paused_at=T0, until=T0 + timedelta(minutes=1))
    store.pause(["later"], node="n", paused_at=T0, until=T0 + timedelta(days=2))
    store.pause(["open"], node="n", paused_at=T0)
    store.prune(older_than=T0 + timedelta(days=1), keep_per_job=10)
    assert set(store.pauses()) == {"later", "open"}


def test_a_run_started_before_the_pause_never_counts_toward_the_next(store: StateStore) -> None:
    """Runs overlapping the pause: those started before it (or at its very instant) are not
    counted, neither while it holds nor once it has ended by its `until`; a run started
    after it counts, and so does any run once a resume has removed the pause."""
    until = T0 + timedelta(minutes=5)
    for _ in range(2):
        assert count(store, True, started=T0 - timedelta(seconds=10)) is None
    made = count(store, True, until=until, started=T0 - timedelta(seconds=5))
    assert made is not None and made.paused_at == T0
    later = until + timedelta(seconds=1)  # the pause has ended by itself
    assert count(store, True, at=later, started=T0 - timedelta(seconds=1)) is None
    assert count(store, True, at=later, started=T0) is None  # at the pause's instant
    assert count(store, False, at=later, started=T0) is None  # a success neither
    mark = store.mark("j")
    assert mark is not None and mark.failures == 0
    assert count(store, True, at=later, started=T0 + timedelta(seconds=1)) is None
    mark = store.mark("j")
    assert mark is not None and mark.failures == 1  # the next streak begins
    store.resume(["j"])
    assert count(store, True, at=later, started=T0 - timedelta(seconds=1)) is None
    mark = store.mark("j")
    assert mark is not None and mark.failures == 1  # no pause left to tell: counted
