"""The store's part of ``overlap: queue`` and ``replace`` across nodes: one waiting slot per
job for the whole cluster (`StateStore.wait_in_line`, `leave_line`, counted by
`claim_within`), and kill requests that carry their reason; over every store.

"Nodes" are three store objects on one database (one SQLite file, one PostgreSQL schema;
the memory store is one object, shared as one process's schedulers share it).
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from test_state_store import T0, at
from test_state_store_limits import SKIP, end, stores, within

from jobscheduler.state import NodeInfo, RunState, StateStore
from jobscheduler.state.values import BUSY, CLAIMED, SKIPPED_BY_LIMIT, TAKEN, WAITING

__all__ = ["stores"]  # the fixture, over every store

LEASE = timedelta(seconds=30)


def up(store: StateStore, *names: str) -> None:
    for name in names:
        node = NodeInfo(name=name, host="h", pid=1, process_started=1.0, started=T0, max_workers=2)
        store.join(node, lease=LEASE)


def line(store: StateStore, slot: float, run_id: str, node: str) -> str:
    return store.wait_in_line("j", at(slot), run_id, node=node, started=at(slot), skip=SKIP)


def test_one_slot_waits_for_the_cluster_and_later_ones_are_skipped(
    stores: list[StateStore],
) -> None:
    a, b, c = stores
    up(a, "node-a", "node-b", "node-c")
    assert within(a, 10, "r1", node="node-a") == CLAIMED
    # Slot 20 finds the job busy on node a: node b's worker asks first and waits.
    assert within(b, 20, "w20-b", node="node-b") == BUSY
    assert line(b, 20, "w20-b", "node-b") == WAITING
    # The same slot on node c: it waits already, on node b; nothing is written.
    assert within(c, 20, "w20-c", node="node-c") == BUSY
    assert line(c, 20, "w20-c", "node-c") == TAKEN
    assert a.run("w20-c") is None
    # Slot 30, on any node: one slot waits already, so it is skipped at once.
    assert within(a, 30, "s30", node="node-a") == BUSY
    assert line(a, 30, "s30", "node-a") == SKIPPED_BY_LIMIT
    record = b.run("s30")
    assert record is not None
    assert (record.state, record.reason, record.node) == (RunState.SKIPPED, SKIP, "node-a")
    assert record.started == record.ended == at(30)
    assert line(c, 30, "s30-c", "node-c") == TAKEN  # its key is taken: recorded once
    # The job goes idle: the waiting slot counts as a live run for every other claim,
    # so a slot coming now does not overtake it.
    end(a, "r1", 31)
    assert within(c, 40, "r40", node="node-c") == BUSY
    assert line(c, 40, "r40", "node-c") == SKIPPED_BY_LIMIT
    assert within(b, 20, "w20-b", node="node-b") == CLAIMED  # its own claim passes
    # Claimed: it waits no longer (even before `leave_line`), and the next slot waits.
    assert within(a, 50, "w50", node="node-a") == BUSY
    assert line(a, 50, "w50", "node-a") == WAITING
    assert b.leave_line("j", "w20-b") is False  # not the waiting one any more
    assert a.leave_line("j", "w50") is True
    end(b, "w20-b", 52)
    assert within(a, 60, "r60", node="node-a") == CLAIMED


def test_a_waiting_slot_of_a_node_no_longer_up_waits_no_longer(
    stores: list[StateStore],
) -> None:
    a, b, _ = stores
    up(a, "node-a", "node-b")
    assert within(a, 10, "r1", node="node-a") == CLAIMED
    assert within(b, 20, "w20", node="node-b") == BUSY
    assert line(b, 20, "w20", "node-b") == WAITING
    b.leave("node-b")  # it stopped (or was taken over): its wait is over
    end(a, "r1", 21)
    assert within(a, 30, "r30", node="node-a") == CLAIMED  # not held back by it
    assert within(a, 40, "w40", node="node-a") == BUSY
    assert line(a, 40, "w40", "node-a") == WAITING  # the stale one replaced


def test_only_one_of_racing_slots_waits(stores: list[StateStore]) -> None:
    """Three nodes put three slots in line at once, many times: exactly one waits."""
    up(stores[0], "node-0", "node-1", "node-2")
    assert within(stores[0], 1, "r1", node="node-0") == CLAIMED
    for round_ in range(10):
        answers: list[str] = [""] * 3
        go = threading.Barrier(3)
        threads = [
            threading.Thread(target=_racer, args=(stores[k], go, answers, k, round_))
            for k in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(answers) == [SKIPPED_BY_LIMIT, SKIPPED_BY_LIMIT, WAITING]
        waiting = answers.index(WAITING)
        assert stores[0].leave_line("j", f"w{round_}-{waiting}")


def _racer(
    store: StateStore, go: threading.Barrier, answers: list[str], k: int, round_: int
) -> None:
    go.wait()
    answers[k] = line(store, 100.0 * (round_ + 1) + k, f"w{round_}-{k}", f"node-{k}")


def test_wait_in_line_is_checked(stores: list[StateStore]) -> None:
    a = stores[0]
    with pytest.raises(ValueError, match="reason"):
        a.wait_in_line("j", at(1), "r", node="n", started=at(1), skip="")
    with pytest.raises(TypeError):
        a.leave_line("j", 5)  # type: ignore[arg-type]


def test_kill_requests_carry_their_reason(stores: list[StateStore]) -> None:
    a, b, _ = stores
    assert a.claim("j", None, "run_now", "r1", node="node-a", started=T0)
    assert a.claim("k", None, "run_now", "r2", node="node-a", started=T0)
    by = "replaced"
    assert b.request_kill(job="j", reason=by) == 1
    assert b.request_kill(run_id="r2") == 1  # an operator's kill: no reason
    assert [(run, reason) for _, run, reason in a.kill_requests("node-a")] == [
        ("r1", by),
        ("r2", None),
    ]
    with pytest.raises(ValueError, match="reason"):
        b.request_kill(job="j", reason="  ")


def shown(store: StateStore, job: str | None = None) -> list[tuple[str, str, str, str, int]]:
    """(job, run id, node, trigger, attempt) of the waits `waiting_runs` shows."""
    return [(w.job, w.run_id, w.node, w.trigger, w.attempt) for w in store.waiting_runs(job)]


def test_the_waits_in_force_are_shown_until_they_end(stores: list[StateStore]) -> None:
    """`waiting_runs` shows the waiting slot (with when it began) and the reruns waiting for
    room, oldest first; not once claimed or left, nor those of a node no longer up."""
    a, b, c = stores
    up(a, "node-a", "node-b", "node-c")
    assert shown(a) == []
    assert within(a, 10, "r1", node="node-a") == CLAIMED
    assert within(b, 20, "w20", node="node-b") == BUSY
    assert line(b, 20, "w20", "node-b") == WAITING
    c.wait_for_room("k", at(5), "rr", node="node-c", attempt=2, started=at(25))
    c.wait_for_room("k", at(5), "rr", node="node-c", attempt=2, started=at(26))  # no change
    assert shown(c) == [("j", "w20", "node-b", "schedule", 1), ("k", "rr", "node-c", "rerun", 2)]
    [slot] = a.waiting_runs("j")
    assert (slot.slot, slot.since) == (at(20), at(20))
    assert [w.since for w in b.waiting_runs("k")] == [at(25)]
    assert shown(a, "nothing") == []
    # A rerun waiting is counted by no claim: the job k has room.
    assert a.claim_within("k", None, "run_now", "k1", node="node-a", started=at(27), limit=1) == (
        CLAIMED
    )
    # Claimed: the slot is shown waiting no longer, even before it leaves the line.
    end(a, "r1", 30)
    assert within(b, 20, "w20", node="node-b") == CLAIMED
    assert shown(a) == [("k", "rr", "node-c", "rerun", 2)]
    assert b.leave_line("j", "w20") is True  # its row, no longer in force
    assert c.leave_line("k", "rr") is True
    assert c.leave_line("k", "rr") is False
    assert shown(b) == []
    # A node that left: its waits are not in force.
    c.wait_for_room("k", at(5), "rr2", node="node-c", attempt=3, started=at(40))
    c.leave("node-c")
    assert shown(a) == []


def test_a_take_over_ends_the_dead_nodes_waits(stores: list[StateStore]) -> None:
    """The waiting slot and the rerun that waited in the dead node's workers wait no longer:
    each is recorded abandoned "node lost: NODE" (certainly never started) and returned
    with the node's lost runs, and the next slot to find the job busy waits instead."""
    a, b, _ = stores
    up(a, "node-a", "node-b")
    assert within(a, 10, "r1", node="node-a") == CLAIMED
    assert within(b, 20, "w20", node="node-b") == BUSY
    assert line(b, 20, "w20", "node-b") == WAITING
    b.wait_for_room("k", at(5), "rr", node="node-b", attempt=2, started=at(21))
    lost = a.take_over("node-b", by="node-a")
    assert sorted((r.run_id, r.trigger, r.attempt, r.state, r.reason) for r in lost) == [
        ("rr", "rerun", 2, RunState.ABANDONED, "node lost: node-b"),
        ("w20", "schedule", 1, RunState.ABANDONED, "node lost: node-b"),
    ]
    record = a.run("w20")
    assert record is not None and (record.slot, record.started) == (at(20), at(20))
    assert a.take_over("node-b", by="node-a") == []  # once
    assert shown(a) == []
    assert within(a, 30, "w30", node="node-a") == BUSY
    assert line(a, 30, "w30", "node-a") == WAITING


def test_wait_for_room_is_checked(stores: list[StateStore]) -> None:
    a = stores[0]
    with pytest.raises(ValueError):
        a.wait_for_room("j", at(1), "", node="n", attempt=2, started=at(1))
    with pytest.raises(TypeError):
        a.waiting_runs(5)  # type: ignore[arg-type]
