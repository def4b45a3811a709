"""What the nodes publish of their definitions (digest, job names, lease), the heartbeat's
word on old pending queue rows, and the settling of a row no node took: over every store.

Leases are compared with the store's own clock (the database's for SQL stores): a row is
made older than a lease by a real wait of a little over a second, with a 1-second lease.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

from test_state_store_shared import LEASE, node

from jobscheduler.state import StateStore

SHORT = timedelta(seconds=1)


def test_join_publishes_the_lease_the_digest_and_the_job_names(store: StateStore) -> None:
    published = replace(node("a"), definitions_digest="d1", defined_jobs=("alpha", "beta"))
    store.join(published, lease=LEASE)
    store.join(node("b"), lease=LEASE)  # an older node: published nothing
    a, b = store.nodes()
    assert (a.lease, a.definitions_digest, a.defined_jobs) == (LEASE, "d1", ("alpha", "beta"))
    assert (b.lease, b.definitions_digest, b.defined_jobs) == (LEASE, None, None)
    [expired_a, _] = store.expired_nodes(lease=timedelta(seconds=-1))
    assert expired_a.defined_jobs == ("alpha", "beta")


def test_set_definitions_replaces_what_the_node_published(store: StateStore) -> None:
    store.join(replace(node("a"), definitions_digest="d1", defined_jobs=("x",)), lease=LEASE)
    assert store.set_definitions("a", digest="d2", jobs=["x", "y/z", "ü"])
    [a] = store.nodes()
    assert (a.definitions_digest, a.defined_jobs) == ("d2", ("x", "y/z", "ü"))
    assert store.set_definitions("a", digest="d3", jobs=[])
    assert store.nodes()[0].defined_jobs == ()
    store.leave("a")
    assert not store.set_definitions("a", digest="d4", jobs=["x"])  # gone: not revived
    assert store.nodes()[0].definitions_digest == "d3"
    assert not store.set_definitions("nobody", digest="d", jobs=[])


def test_a_lost_node_is_known_by_its_own_lease(store: StateStore) -> None:
    store.join(node("a"), lease=LEASE)
    [a] = store.nodes()
    now = store.now()
    assert a.lost_since(now, LEASE) is None
    assert a.heartbeat is not None
    later = a.heartbeat + LEASE + timedelta(seconds=1)
    assert a.lost_since(later, timedelta(days=1)) == a.heartbeat + LEASE  # its own lease wins
    store.leave("a")
    assert store.nodes()[0].lost_since(later, LEASE) is None  # left: not lost


def test_beat_says_when_a_pending_row_is_older_than_the_lease(store: StateStore) -> None:
    store.submit("ghost")
    time.sleep(SHORT.total_seconds() + 0.2)  # the store's clock: the row is 1.2 s old
    store.join(node("a"), lease=LEASE)
    assert store.beat("a", lease=SHORT).stale_rows
    assert not store.beat("a", lease=LEASE).stale_rows
    [row] = store.queue(state="pending")
    assert store.settle_pending(row.id, "not_started", "run-1")
    assert not store.beat("a", lease=SHORT).stale_rows  # nothing pending any more


def test_settle_pending_settles_a_row_nobody_took_once(store: StateStore) -> None:
    store.join(node("a"), lease=LEASE)
    ghost = store.submit("ghost", {"day": "mon"})
    known = store.submit("known")
    [taken] = store.take("a", jobs=["known"], limit=5)
    assert taken.id == known
    assert not store.settle_pending(known, "not_started", "run-x")  # running: a node has it
    assert store.settle_pending(ghost, "not_started", "run-1")
    assert not store.settle_pending(ghost, "failed", "run-2")  # once
    rows = {row.id: row for row in store.queue()}
    assert (rows[ghost].state, rows[ghost].run_id) == ("not_started", "run-1")
    assert rows[ghost].args == {"day": "mon"}
    assert rows[known].state == "running"
    assert not store.settle_pending(999_999, "not_started", None)


def test_pending_before_gives_the_old_rows_of_other_jobs_oldest_first(store: StateStore) -> None:
    store.join(node("a"), lease=LEASE)
    ghost = store.submit("ghost")
    known = store.submit("known")
    other = store.submit("other")
    taken = store.submit("taken")
    assert [r.job for r in store.take("a", jobs=["taken"], limit=1)] == ["taken"]
    before = store.now() + timedelta(seconds=1)
    rows = store.pending_before(before, excluding=["known"])
    assert [r.id for r in rows] == [ghost, other]  # oldest first; running rows left out
    assert [r.id for r in store.pending_before(before, excluding=["known"], limit=1)] == [ghost]
    assert {r.id for r in store.pending_before(before)} == {ghost, known, other}
    assert taken not in {r.id for r in store.pending_before(before)}
    assert store.pending_before(before - timedelta(hours=1)) == []  # none that old
    many = [f"job{n}" for n in range(600)] + ["ghost"]  # past 500 names: filtered after
    assert [r.id for r in store.pending_before(before, excluding=many)] == [known, other]
