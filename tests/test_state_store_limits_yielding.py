"""`StateStore.claim_many_within(..., yielding=True)`: claims under a limit that leave a job
another transaction is claiming (`LOCKED`) instead of waiting for it.

Over every store (`stores` of test_state_store_limits): with no other transaction claiming,
yielding claims answer as the others do. On PostgreSQL, the job's lock held by another
connection's open transaction (as a node's claim transaction holds it): a yielding claim of
that job answers `LOCKED` and writes nothing, the batch's other claims are written, a claim
whose key is taken needs no lock, and a claim that does not yield waits for the lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from pg_server import PgServer
from policy_support import WAIT
from test_state_store import at
from test_state_store_limits import SKIP, stores, within

from jobscheduler.state import RunState, StateStore
from jobscheduler.state.postgres import PostgresStateStore
from jobscheduler.state.values import BUSY, CLAIMED, LOCKED, SKIPPED_BY_LIMIT, TAKEN

__all__ = ["stores"]  # the fixture, over every store


def test_yielding_claims_answer_as_the_others_when_nobody_else_claims(
    stores: list[StateStore],
) -> None:
    a, b, _ = stores
    assert within(b, 5, "other", node="node-b", job="k") == CLAIMED
    claims = [
        ("j", at(10), "schedule", "r1", "node-a", 1, at(10), 1, SKIP),
        ("j", at(11), "schedule", "r2", "node-a", 1, at(11), 1, SKIP),  # busy with r1
        ("j", at(12), "schedule", "r3", "node-a", 1, at(12), 1, None),  # busy: nothing written
        ("k", at(10), "schedule", "r4", "node-a", 1, at(10), 2, None),  # 1 of 2 live
        ("k", at(5), "schedule", "r5", "node-a", 1, at(5), 2, SKIP),  # b's slot: taken
    ]
    answers = a.claim_many_within(claims, yielding=True)
    assert answers == [CLAIMED, SKIPPED_BY_LIMIT, BUSY, CLAIMED, TAKEN]
    assert a.claim_many_within([], yielding=True) == []
    assert [(r.run_id, r.state) for r in a.history("j")] == [
        ("r2", RunState.SKIPPED),
        ("r1", RunState.RUNNING),
    ]


@pytest.fixture
def pg_pair(pg_server: PgServer) -> Iterator[tuple[PostgresStateStore, PostgresStateStore, str]]:
    """Two stores on one new PostgreSQL schema ("two nodes"), and its URL."""
    url = pg_server.fresh_schema_url()
    a, b = PostgresStateStore(url), PostgresStateStore(url)
    yield a, b, url
    a.close()
    b.close()


def _holding(url: str, job: str) -> psycopg.Connection:
    """A connection in an open transaction holding `job`'s lock, as a node's claim of it does
    (ended by its commit or close)."""
    conn = psycopg.connect(url)
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (job,))
    return conn


def test_a_yielding_claim_leaves_a_job_another_transaction_is_claiming(
    pg_pair: tuple[PostgresStateStore, PostgresStateStore, str],
) -> None:
    a, b, url = pg_pair
    assert within(b, 5, "b5", node="node-b") == CLAIMED  # j's slot 5: b's already
    assert b.finish("b5", state=RunState.SUCCEEDED, ended=at(6))
    holder = _holding(url, "j")
    try:
        claims = [
            ("j", at(10), "schedule", "r1", "node-a", 1, at(10), 1, SKIP),
            ("k", at(10), "schedule", "r2", "node-a", 1, at(10), 1, SKIP),
            ("j", at(5), "schedule", "r3", "node-a", 1, at(5), 1, SKIP),  # key taken: no lock
        ]
        assert a.claim_many_within(claims, yielding=True) == [LOCKED, CLAIMED, LOCKED]
        assert [r.run_id for r in a.history("j")] == ["b5"]  # nothing of j written
        assert [r.run_id for r in a.history("k")] == ["r2"]
        # A claim alone of a taken key takes no lock: refused at once.
        taken = [("j", at(5), "schedule", "r4", "node-a", 1, at(5), 1, SKIP)]
        assert a.claim_many_within(taken, yielding=True) == [TAKEN]
    finally:
        # Committed, not only closed: a close returns before the server has ended the
        # session and released its locks, and the claim below may come first.
        holder.commit()
        holder.close()
    # The lock free, the job's claim is decided.
    again = [("j", at(10), "schedule", "r1", "node-a", 1, at(10), 1, SKIP)]
    assert a.claim_many_within(again, yielding=True) == [CLAIMED]


def test_a_claim_that_does_not_yield_waits_for_the_lock(
    pg_pair: tuple[PostgresStateStore, PostgresStateStore, str],
) -> None:
    a, _b, url = pg_pair
    holder = _holding(url, "j")
    answers: list[str] = []
    claims = [("j", at(10), "schedule", "r1", "node-a", 1, at(10), 1, SKIP)]
    worker = threading.Thread(target=lambda: answers.extend(a.claim_many_within(claims)))
    try:
        worker.start()
        watch = psycopg.connect(url, autocommit=True)
        try:
            deadline = time.monotonic() + WAIT
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            while watch.execute(waiting).fetchone() != (1,):
                assert time.monotonic() < deadline, "the claim never waited for the lock"
                time.sleep(0.02)
        finally:
            watch.close()
        assert answers == []
    finally:
        holder.close()
    worker.join(WAIT)
    assert answers == [CLAIMED]
