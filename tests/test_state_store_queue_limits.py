"""`StateStore.take` with `limits` (a job's ``max_instances``) and `put_back`: a job's queue
rows taken only while the job has room on every node, counted in the take's transaction; over
every store of `STORES` ("two nodes": store objects on one database, racing from threads).
"""

from __future__ import annotations

import threading
import time

import pytest
from test_state_store import at
from test_state_store_limits import end, stores, within

from jobscheduler.state import RunState, StateStore
from jobscheduler.state.values import BUSY, CLAIMED

__all__ = ["stores"]  # the fixture, used by name


def submitted(store: StateStore, queue_id: int, run_id: str, node: str, limit: int = 1) -> str:
    """The claim of a submitted run under its job's limit, as a node makes it."""
    return store.claim_within(
        "solo", None, "submit", run_id, node=node, started=at(queue_id), limit=limit
    )


def test_a_busy_jobs_rows_stay_pending_and_others_are_taken(stores: list[StateStore]) -> None:
    a, b, _ = stores
    assert within(a, 10, "scheduled", job="solo") == CLAIMED  # solo runs on node-a
    # More high-priority rows of the busy job than a take looks at: never in the way.
    busy = [b.submit("solo", priority=9) for _ in range(40)]
    other = b.submit("other")
    taken = b.take("node-b", jobs=["solo", "other"], limit=1, limits={"solo": 1})
    assert [r.id for r in taken] == [other]
    assert {r.id for r in b.queue(state="pending", limit=100)} == set(busy)
    end(a, "scheduled", 11)
    [row] = b.take("node-b", jobs=["solo", "other"], limit=5, limits={"solo": 1})
    assert row.id == busy[0]  # room for one: the rest wait


def test_a_taken_row_holds_its_place_until_its_run_ends(stores: list[StateStore]) -> None:
    a, b, _ = stores
    first, second, third = (a.submit("solo") for _ in range(3))
    [row] = a.take("node-a", jobs=["solo"], limit=5, limits={"solo": 2}, most={"solo": 1})
    assert row.id == first  # `most` (this node's room) is kept too
    # Taken, its run not claimed yet: it counts on the other node.
    [row_b] = b.take("node-b", jobs=["solo"], limit=5, limits={"solo": 2})
    assert row_b.id == second
    assert b.take("node-b", jobs=["solo"], limit=5, limits={"solo": 2}) == []
    # Claimed: the run counts instead of its row (not twice).
    assert submitted(a, first, "run-1", "node-a", limit=2) == CLAIMED
    assert b.take("node-b", jobs=["solo"], limit=5, limits={"solo": 2}) == []
    assert a.finish("run-1", state=RunState.SUCCEEDED, ended=at(5), settle=first)
    [row_b] = b.take("node-b", jobs=["solo"], limit=5, limits={"solo": 2})
    assert row_b.id == third


def test_put_back_makes_a_taken_row_pending_again(stores: list[StateStore]) -> None:
    a, b, _ = stores
    queued = a.submit("solo", {"k": "v"}, priority=3)
    [row] = a.take("node-a", jobs=["solo"], limit=1, limits={"solo": 1})
    assert within(b, 10, "scheduled", job="solo", node="node-b") == CLAIMED  # meanwhile
    assert submitted(a, queued, "run-1", "node-a") == BUSY
    assert a.put_back(queued)
    assert not a.put_back(queued)  # pending already
    [again] = a.queue()
    assert (again.state, again.node, again.args, again.priority) == ("pending", None, {"k": "v"}, 3)
    assert again.attempt == row.attempt
    assert b.take("node-b", jobs=["solo"], limit=1, limits={"solo": 1}) == []  # still busy
    end(b, "scheduled", 11)
    [row] = b.take("node-b", jobs=["solo"], limit=1, limits={"solo": 1})
    assert (row.id, row.node) == (queued, "node-b")


def test_limits_are_checked(stores: list[StateStore]) -> None:
    with pytest.raises(ValueError, match="limit"):
        stores[0].take("n", jobs=["solo"], limit=1, limits={"solo": 0})


@pytest.mark.parametrize("limit", [1, 2])
def test_racing_takes_never_start_more_than_the_limit(stores: list[StateStore], limit: int) -> None:
    """Three connections, two threads each, take rows of one job and claim their runs as a
    node does (a claim that finds the job full puts its row back); a run holds 3 ms, then
    ends and settles its row. Counted from the claims' answers: never above `limit`, and
    every row ends run once."""
    rows = {stores[0].submit("solo", {"n": n}) for n in range(40)}
    lock = threading.Lock()
    live = 0
    most = 0
    ran: list[int] = []
    start = threading.Barrier(6)

    def node(store: StateStore, name: str) -> None:
        nonlocal live, most
        start.wait()
        deadline = time.monotonic() + 60  # reached only on failure
        while time.monotonic() < deadline:
            taken = store.take(name, jobs=["solo"], limit=1, limits={"solo": limit})
            if not taken:
                if not store.queue(state="pending", limit=1):
                    return  # every row taken (those running end on their takers)
                threading.Event().wait(0.002)
                continue
            [row] = taken
            run_id = f"{name}-{row.id}"
            if submitted(store, row.id, run_id, name, limit) != CLAIMED:
                assert store.put_back(row.id)
                continue
            with lock:
                live += 1
                most = max(most, live)
                ran.append(row.id)
            threading.Event().wait(0.003)
            with lock:
                live -= 1
            assert store.finish(run_id, state=RunState.SUCCEEDED, ended=at(1), settle=row.id)

    threads = [
        threading.Thread(target=node, args=(store, f"node-{k}-{t}"))
        for k, store in enumerate(stores)
        for t in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive()
    assert 1 <= most <= limit
    assert sorted(ran) == sorted(rows)
    assert {r.state for r in stores[0].queue(limit=100)} == {"succeeded"}
