"""`GroupCommit`: concurrent writes share transactions; posted writes are written without
their caller waiting, and read back after `flush`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from jobscheduler.state.base import StoreUnavailableError
from jobscheduler.state.sqlbatch import GroupCommit, Op

WAIT = 60.0  # seconds: reached only when a test fails, even on a loaded machine


class Database:
    """Runs batches of writes on a list (the "table"); `gate` holds a transaction open."""

    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.batches: list[int] = []
        self.gate = threading.Event()
        self.gate.set()
        self.in_batch = threading.Event()
        self.fail: set[Any] = set()

    def run_batch(self, ops: Sequence[Op]) -> list[Any]:
        self.in_batch.set()
        assert self.gate.wait(WAIT)
        written: list[Any] = []
        for op in ops:
            value = op(None)  # type: ignore[operator]
            if value in self.fail:
                raise ValueError(f"cannot write {value!r}")
            written.append(value)
        self.rows.extend(v for v in written if v is not None)
        self.batches.append(len(ops))
        return written


def _write(value: Any) -> Any:
    return lambda cur: value


def test_a_posted_write_is_written_without_anybody_waiting() -> None:
    db = Database()
    group = GroupCommit(db.run_batch)
    group.post(_write("a"))  # type: ignore[arg-type]
    deadline = threading.Event()
    for _ in range(1000):
        if db.rows == ["a"]:
            break
        deadline.wait(0.01)
    assert db.rows == ["a"]
    assert group.posted == 0
    group.close()


def test_posted_writes_share_a_transaction_and_flush_waits_for_them() -> None:
    db = Database()
    group = GroupCommit(db.run_batch)
    db.gate.clear()
    group.post(_write("first"))  # type: ignore[arg-type]
    assert db.in_batch.wait(WAIT)  # the flusher leads a transaction, held open
    for k in range(20):
        group.post(_write(k))  # type: ignore[arg-type]
    assert group.posted == 21  # the one in the transaction under way, and the 20
    flusher = threading.Thread(target=group.flush)
    flusher.start()
    db.gate.set()
    flusher.join(WAIT)
    assert not flusher.is_alive()
    assert db.rows == ["first", *range(20)]
    # The first (the flusher's own marker is not part of a batch: it writes nothing, and a
    # batch of finishes alone is one statement); then the 20 together.
    assert db.batches[0] == 1 and db.batches[1] >= 20
    group.close()


def test_a_posted_write_that_fails_is_logged_and_the_others_are_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    db = Database()
    db.fail = {"bad"}
    group = GroupCommit(db.run_batch)
    db.gate.clear()
    group.post(_write("x"))  # type: ignore[arg-type]
    assert db.in_batch.wait(WAIT)
    for value in ("a", "bad", "b"):
        group.post(_write(value))  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, "jobscheduler.state"):
        db.gate.set()
        group.flush()
    assert sorted(db.rows) == ["a", "b", "x"]  # each alone after the batch failed
    assert any("cannot write 'bad'" in r.getMessage() for r in caplog.records)
    group.close()


def test_close_writes_what_was_posted() -> None:
    db = Database()
    group = GroupCommit(db.run_batch)
    db.gate.clear()
    group.post(_write(1))  # type: ignore[arg-type]
    assert db.in_batch.wait(WAIT)
    group.post(_write(2))  # type: ignore[arg-type]
    closer = threading.Thread(target=group.close)
    closer.start()
    db.gate.set()
    closer.join(WAIT)
    assert not closer.is_alive()
    assert db.rows == [1, 2]


def test_posted_writes_kept_while_the_database_is_away_are_written_once_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    db = Database()
    down = threading.Event()
    down.set()
    run_batch = db.run_batch

    def flaky(ops: Sequence[Op]) -> list[Any]:
        if down.is_set():
            raise StoreUnavailableError("state store 'x': connection refused")
        return run_batch(ops)

    group = GroupCommit(flaky, retry=0.02)
    with caplog.at_level(logging.INFO, "jobscheduler.state"):
        for value in ("a", "b", "c"):
            group.post(_write(value))  # type: ignore[arg-type]
        for _ in range(500):  # the flusher tries, the database is away: kept
            if group.kept == 3:
                break
            threading.Event().wait(0.01)
        assert group.kept == 3 and db.rows == []
        down.clear()
        for _ in range(500):  # tried again within `retry`
            if db.rows == ["a", "b", "c"]:
                break
            threading.Event().wait(0.01)
    assert db.rows == ["a", "b", "c"] and group.kept == 0 and group.posted == 0
    messages = [r.getMessage() for r in caplog.records]
    assert sum("state store away:" in m for m in messages) == 1  # once per outage
    assert any("state store back" in m for m in messages)
    group.close()


def test_close_logs_the_writes_it_could_not_write(caplog: pytest.LogCaptureFixture) -> None:
    def away(ops: Sequence[Op]) -> list[Any]:
        raise StoreUnavailableError("state store 'x': connection refused")

    group = GroupCommit(away, retry=60)
    group.post(_write("lost"))  # type: ignore[arg-type]
    for _ in range(500):
        if group.kept == 1:
            break
        threading.Event().wait(0.01)
    with caplog.at_level(logging.ERROR, "jobscheduler.state"):
        group.close()
    assert any("posted writes not written" in r.getMessage() for r in caplog.records)


def test_posted_writes_linger_to_be_written_together_and_close_cuts_it_short() -> None:
    db = Database()
    group = GroupCommit(db.run_batch, linger=0.2)
    for n in range(50):
        group.post(_write(n))  # type: ignore[arg-type]
    assert group.batches == 0  # gathering
    started = time.monotonic()
    group.close()  # does not wait the linger out
    assert time.monotonic() - started < 0.15
    assert db.rows == list(range(50)) and group.batches == 1

    db = Database()
    group = GroupCommit(db.run_batch, linger=0.05)
    for n in range(3):
        group.post(_write(n))  # type: ignore[arg-type]
    deadline = time.monotonic() + WAIT
    while group.posted and time.monotonic() < deadline:
        time.sleep(0.01)
    assert db.rows == [0, 1, 2] and group.batches == 1  # written by the flusher, together
    group.close()
