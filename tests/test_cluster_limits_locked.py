"""`ClusterLimits.claim_many` when the store leaves a claim to another node's transaction
(`LOCKED`): asked again after `LOCK_POLL` of the clock, the batch's other answers kept; after
`LOCK_TRIES` asks the last one waits for the lock (does not yield). And a batch of slots
already `SHARE_DELAY` late claims the others' slots with its own, in one ask, at once.

The store is a real SQLite store behind `_Locking`, which answers `LOCKED` for the jobs a test
names (as PostgreSQL does while another node's transaction holds their locks), a given number
of times; on a FakeClock whose sleeps let the time asked for pass (`_Passing`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from policy_support import T0, internal_job

from jobscheduler import FakeClock, Job
from jobscheduler.cluster.limits import LOCK_POLL, LOCK_TRIES, SHARE_DELAY, ClusterLimits
from jobscheduler.runners.context import RunContext
from jobscheduler.state import NodeInfo, RunState
from jobscheduler.state.sqlite import SqliteStateStore
from jobscheduler.state.values import LOCKED, Within


class _Locking:
    """A store whose `claim_many_within` answers `LOCKED` for the claims of `jobs` while they
    yield, `times` times (then asks the store); every ask is noted (`asks`)."""

    def __init__(self, store: SqliteStateStore, jobs: set[str], times: int) -> None:
        self.store = store
        self.jobs = jobs
        self.times = times
        self.asks: list[tuple[list[str], bool]] = []
        self.written: list[int] = []  # the runs in the store at each ask

    def claim_many_within(self, claims: Sequence[Any], *, yielding: bool = False) -> list[Within]:
        self.asks.append(([c[0] for c in claims], yielding))
        self.written.append(len(self.store.history(limit=100)))
        locked = yielding and self.times > 0
        if locked:
            self.times -= 1
        kept = [c for c in claims if not (locked and c[0] in self.jobs)]
        answers = iter(self.store.claim_many_within(kept, yielding=yielding))
        return [LOCKED if locked and c[0] in self.jobs else next(answers) for c in claims]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


class _Passing(FakeClock):
    """A FakeClock on which a sleep lets the time asked for pass at once (noted in `slept`)."""

    def __init__(self, start: datetime) -> None:
        super().__init__(start)
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(timedelta(seconds=seconds))


class _Keeper:
    """What `ClusterLimits` reads of a node: its store, its name, where slots end."""

    def __init__(self, store: Any, name: str) -> None:
        self.store = store
        self.name = name
        self.moved: list[tuple[str, object]] = []

    def ended(self, job: str, slot: object) -> None:
        self.moved.append((job, slot))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStateStore]:
    one = SqliteStateStore(tmp_path / "state.db")
    yield one
    one.close()


def _join(store: SqliteStateStore, *names: str) -> None:
    for name in names:
        info = NodeInfo(name=name, host="h", pid=1, process_started=1.0, started=T0)
        store.join(info, lease=timedelta(hours=1))


def _runs(slot: datetime, count: int) -> list[tuple[Job, RunContext]]:
    runs = []
    for i in range(count):
        job = internal_job(f"j{i}", "Holds", "unused", "60 seconds", overlap="skip")
        runs.append((job, RunContext(job, f"r{i}", slot, "schedule", created=slot, node="a")))
    return runs


def test_a_locked_claim_is_asked_again_after_lock_poll(store: SqliteStateStore) -> None:
    _join(store, "a")  # alone: every slot is this node's
    clock = _Passing(T0)
    locking = _Locking(store, {"j1"}, times=2)
    limits = ClusterLimits(_Keeper(locking, "a"), clock, lambda: None)  # type: ignore[arg-type]
    assert limits.claim_many(_runs(clock.now(), 3)) == [True, True, True]
    # j0 and j2 were claimed at the first ask; j1 waited for the clock (the delay doubling),
    # not for the other transaction.
    assert locking.asks == [(["j0", "j1", "j2"], True), (["j1"], True), (["j1"], True)]
    assert locking.written == [0, 2, 2]
    assert clock.slept == [LOCK_POLL, 2 * LOCK_POLL]
    assert {r.run_id for r in store.history(state=RunState.RUNNING, limit=10)} == {"r0", "r1", "r2"}


def test_the_last_ask_of_a_locked_claim_waits_for_the_lock(store: SqliteStateStore) -> None:
    _join(store, "a")
    clock = _Passing(T0)
    locking = _Locking(store, {"j0"}, times=LOCK_TRIES)
    limits = ClusterLimits(_Keeper(locking, "a"), clock, lambda: None)  # type: ignore[arg-type]
    assert limits.claim_many(_runs(clock.now(), 1)) == [True]
    assert [yielding for _jobs, yielding in locking.asks] == [True] * (LOCK_TRIES - 1) + [False]
    assert len(clock.slept) == LOCK_TRIES - 1 and max(clock.slept) <= 0.2 + 1e-9


def test_a_late_batch_claims_the_other_nodes_slots_with_its_own(store: SqliteStateStore) -> None:
    """Two live nodes, the slots already `SHARE_DELAY` past: one ask, nothing slept."""
    _join(store, "a", "b")
    clock = _Passing(T0)
    locking = _Locking(store, set(), times=0)
    limits = ClusterLimits(_Keeper(locking, "a"), clock, lambda: None)  # type: ignore[arg-type]
    slot = clock.now()
    clock.advance(timedelta(seconds=2 * SHARE_DELAY))
    assert limits.claim_many(_runs(slot, 20)) == [True] * 20
    assert clock.slept == []
    assert len(locking.asks) == 1 and locking.asks[0][1] is True
    assert len(store.history(limit=100)) == 20
