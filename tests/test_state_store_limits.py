"""`StateStore.claim_within`: a job's limit decided in the store, in the claim's transaction,
over the job's live runs on every node; over every store of `STORES`.

"Two nodes" are two store objects on one database (one SQLite file, one PostgreSQL schema;
the memory store is one object, shared as one process's schedulers share it), racing from
threads: the count of one claim and the insert of another never interleave.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from pg_server import PgServer
from test_state_store import T0, at

from jobscheduler.state import MemoryStateStore, NodeInfo, RunState, StateStore
from jobscheduler.state.postgres import PostgresStateStore
from jobscheduler.state.sqlite import SqliteStateStore
from jobscheduler.state.values import BUSY, CLAIMED, SKIPPED_BY_LIMIT, TAKEN

SKIP = "skipped: the job was still running (overlap)"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[StateStore]]:
    """Three connections to one new store (the memory store: one object thrice)."""
    kind = request.param
    opened: list[StateStore] = []
    if kind == "memory":
        one = MemoryStateStore()
        opened = [one]
        yield [one, one, one]
    else:
        if kind == "sqlite":
            path = tmp_path / "state.db"
            opened = [SqliteStateStore(path) for _ in range(3)]
        else:
            pg: PgServer = request.getfixturevalue("pg_server")
            url = pg.fresh_schema_url()
            opened = [PostgresStateStore(url) for _ in range(3)]
        yield opened
    for store in opened:
        store.close()


def within(
    store: StateStore,
    slot: float | None,
    run_id: str,
    *,
    limit: int = 1,
    skip: str | None = None,
    node: str = "node-a",
    job: str = "j",
) -> str:
    return store.claim_within(
        job,
        None if slot is None else at(slot),
        "schedule" if slot is not None else "run_now",
        run_id,
        node=node,
        started=at(slot or 0),
        limit=limit,
        skip=skip,
    )


def end(store: StateStore, run_id: str, seconds: float) -> None:
    assert store.finish(run_id, state=RunState.SUCCEEDED, ended=at(seconds))


def test_a_claim_passes_below_the_limit_and_is_busy_at_it(stores: list[StateStore]) -> None:
    a, b, _ = stores
    assert within(a, 10, "r1", limit=2) == CLAIMED
    assert within(b, 20, "r2", limit=2, node="node-b") == CLAIMED
    assert within(a, 30, "r3", limit=2) == BUSY
    assert a.run("r3") is None  # nothing written
    end(b, "r2", 31)
    assert within(a, 30, "r3", limit=2) == CLAIMED
    assert [r.run_id for r in a.history("j", state=RunState.RUNNING)] == ["r3", "r1"]


def test_a_busy_skip_writes_the_slots_skipped_record(stores: list[StateStore]) -> None:
    a, b, _ = stores
    assert within(a, 10, "r1", skip=SKIP) == CLAIMED
    assert within(b, 20, "r2", skip=SKIP, node="node-b") == SKIPPED_BY_LIMIT
    record = a.run("r2")
    assert record is not None
    assert (record.state, record.reason, record.node) == (RunState.SKIPPED, SKIP, "node-b")
    assert record.started == record.ended == at(20) and record.slot == at(20)
    # The slot is handled: the other node's try at it finds its key taken.
    assert within(a, 20, "r2-other", skip=SKIP) == TAKEN
    end(a, "r1", 25)
    assert within(a, 20, "r2-again", skip=SKIP) == TAKEN
    assert within(a, 30, "r3", skip=SKIP) == CLAIMED


def test_a_taken_key_is_taken_whether_busy_or_not(stores: list[StateStore]) -> None:
    a, b, _ = stores
    assert within(a, 10, "r1") == CLAIMED
    assert within(b, 10, "r1-b", node="node-b") == TAKEN  # the same slot, busy too
    assert within(b, 10, "r1", node="node-b") == TAKEN  # the same run id
    end(a, "r1", 11)
    assert within(b, 10, "r1-c", node="node-b") == TAKEN
    assert within(b, None, "once") == CLAIMED  # a run outside the schedule: its id is its key
    assert within(a, None, "once", limit=5) == TAKEN


def test_only_the_jobs_own_live_runs_count(stores: list[StateStore]) -> None:
    a, b, _ = stores
    assert within(a, 10, "other", job="k") == CLAIMED
    assert a.claim("j", at(5), "schedule", "plain", node="node-a", started=at(5))
    assert within(b, 10, "r1", node="node-b") == BUSY  # a plain claim of the job counts
    assert a.finish("plain", state=RunState.FAILED, ended=at(6))
    assert within(b, 10, "r1", node="node-b") == CLAIMED


def test_a_dead_nodes_runs_count_until_it_is_taken_over(stores: list[StateStore]) -> None:
    a, b, _ = stores
    lease = timedelta(seconds=30)
    a.join(
        NodeInfo(name="gone", host="h", pid=1, process_started=1.0, started=T0, max_workers=1),
        lease=lease,
    )
    assert within(a, 10, "r1", node="gone") == CLAIMED
    assert within(b, 20, "r2", node="node-b") == BUSY  # its node died: it is still live
    abandoned = b.take_over("gone", by="node-b")
    assert [r.run_id for r in abandoned] == ["r1"]
    assert within(b, 20, "r2", node="node-b") == CLAIMED


def test_limits_are_checked(stores: list[StateStore]) -> None:
    a = stores[0]
    with pytest.raises(ValueError, match="limit"):
        within(a, 10, "r1", limit=0)
    with pytest.raises(ValueError, match="limit"):
        a.claim_within("j", at(1), "schedule", "r", node="n", started=at(1), limit=True)
    with pytest.raises(TypeError, match="skip"):
        a.claim_within("j", at(1), "schedule", "r", node="n", started=at(1), limit=1, skip=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [1, 2])
def test_racing_nodes_never_pass_the_limit_together(stores: list[StateStore], limit: int) -> None:
    """Three connections, two threads each, claim slots of one job as fast as they can (each
    thread its own slots: no key is shared, only the count); a run that wins holds its place
    3 ms, then finishes. Counted from the claims' own answers (held from the claim's
    commit to the finish): never above `limit`."""
    lock = threading.Lock()
    live = 0
    most = 0
    answers: dict[str, int] = {}
    start = threading.Barrier(6)
    rounds = 30

    def node(store: StateStore, name: str, place: int) -> None:
        nonlocal live, most
        start.wait()
        for n in range(rounds):
            slot = float(n * 6 + place)
            rid = f"{name}-{n}"
            answer = within(store, slot, rid, limit=limit, skip=SKIP, node=name)
            with lock:
                answers[answer] = answers.get(answer, 0) + 1
                if answer == CLAIMED:
                    live += 1
                    most = max(most, live)
            if answer == CLAIMED:
                threading.Event().wait(0.003)  # held over the others' next claims
                with lock:
                    live -= 1
                end(store, rid, slot + 0.5)

    threads = [
        threading.Thread(target=node, args=(store, f"node-{k}-{t}", 2 * k + t))
        for k, store in enumerate(stores)
        for t in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()
    assert 1 <= most <= limit
    # Every slot was handled exactly once: claimed (and run) or skipped.
    records = stores[0].history("j", limit=1000)
    assert sorted(r.slot for r in records) == [at(n) for n in range(rounds * 6)]
    assert {r.state for r in records} <= {RunState.SUCCEEDED, RunState.SKIPPED}
    assert answers.get(TAKEN, 0) == 0 and answers.get(BUSY, 0) == 0
    assert answers[CLAIMED] + answers.get(SKIPPED_BY_LIMIT, 0) == rounds * 6


def test_claims_within_in_one_call_count_those_before_them(stores: list[StateStore]) -> None:
    a, b, _ = stores
    assert within(b, 5, "other", node="node-b", job="k") == CLAIMED
    claims = [
        ("j", at(10), "schedule", "r1", "node-a", 1, at(10), 1, SKIP),
        ("j", at(11), "schedule", "r2", "node-a", 1, at(11), 1, SKIP),  # busy with r1
        ("j", at(12), "schedule", "r3", "node-a", 1, at(12), 1, None),  # busy: nothing written
        ("k", at(10), "schedule", "r4", "node-a", 1, at(10), 2, None),  # 1 of 2 live
        ("k", at(5), "schedule", "r5", "node-a", 1, at(5), 2, SKIP),  # b's slot: taken
    ]
    assert a.claim_many_within(claims) == [CLAIMED, SKIPPED_BY_LIMIT, BUSY, CLAIMED, TAKEN]
    assert a.claim_many_within([]) == []
    assert [(r.run_id, r.state) for r in a.history("j")] == [
        ("r2", RunState.SKIPPED),
        ("r1", RunState.RUNNING),
    ]
