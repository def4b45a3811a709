"""A slot of a job with a limit claimed before it is due (`StoreClaims.claim_ahead`: the
store's `claim_many_within`, its start the slot, no skip reason): from its claim on it is a live
run of the job for every count of the job's runs, on every node, until it ends or is released.
Over every store of `STORES` ("two nodes": store objects on one database)."""

from __future__ import annotations

from test_state_store import at
from test_state_store_limits import end, stores, within

from jobscheduler.state import NodeInfo, RunState, StateStore
from jobscheduler.state.values import BUSY, CLAIMED, SKIPPED_BY_LIMIT, TAKEN, WAITING

__all__ = ["stores"]  # the fixture, used by name


def ahead(store: StateStore, slot: float, run_id: str, node: str = "node-a") -> str:
    """The claim ahead of slot `slot` of job "solo" (max_instances 1), as a node makes it:
    its start is the slot (not come yet)."""
    [answer] = store.claim_many_within(
        [("solo", at(slot), "schedule", run_id, node, 1, at(slot), 1, None)]
    )
    return answer


def run_now(store: StateStore, run_id: str, node: str = "node-b") -> str:
    return store.claim_within("solo", None, "run_now", run_id, node=node, started=at(9.9), limit=1)


def test_a_slot_claimed_ahead_counts_as_a_live_run_on_every_node(
    stores: list[StateStore],
) -> None:
    a, b, _ = stores
    assert ahead(a, 10, "slot-10") == CLAIMED
    # Before the slot comes: a run_now elsewhere is refused, a scheduled slot finds it busy.
    assert run_now(b, "now-1") == BUSY
    assert within(b, 9, "slot-9", job="solo", node="node-b", skip="skip") == SKIPPED_BY_LIMIT
    # The same slot claimed ahead by the other node: taken, never busy.
    assert ahead(b, 10, "slot-10-b", node="node-b") == TAKEN
    # A submitted row is not taken while the claim is live.
    queued = b.submit("solo")
    assert b.take("node-b", jobs=["solo"], limit=1, limits={"solo": 1}) == []
    end(a, "slot-10", 11.5)
    [row] = b.take("node-b", jobs=["solo"], limit=1, limits={"solo": 1})
    assert row.id == queued


def test_a_busy_jobs_slot_is_not_claimed_ahead_and_nothing_is_written(
    stores: list[StateStore],
) -> None:
    a, b, _ = stores
    assert run_now(a, "now-1", node="node-a") == CLAIMED
    assert ahead(b, 10, "slot-10", node="node-b") == BUSY  # decided when due
    assert b.run("slot-10") is None
    end(a, "now-1", 9.5)
    assert ahead(b, 10, "slot-10", node="node-b") == CLAIMED  # idle by then


def test_a_released_or_refused_claim_ahead_counts_no_more(stores: list[StateStore]) -> None:
    a, b, _ = stores
    assert ahead(a, 10, "slot-10") == CLAIMED
    assert a.release(["slot-10"]) == 1  # its run never came
    assert run_now(b, "now-1") == CLAIMED
    end(b, "now-1", 9.95)
    assert ahead(a, 20, "slot-20") == CLAIMED
    # Refused when due (the engine's own refusal is written on the claim): final, not live.
    assert a.finish("slot-20", state=RunState.NOT_STARTED, ended=at(20), reason="already running")
    assert run_now(b, "now-2") == CLAIMED


def test_a_waiting_slot_counts_for_a_claim_ahead_and_waits_behind_one(
    stores: list[StateStore],
) -> None:
    a, b, _ = stores
    for name in ("node-a", "node-b"):
        info = NodeInfo(name=name, host="h", pid=1, process_started=1.0, started=at(0))
        a.join(info, lease=at(3600) - at(0))
    assert ahead(a, 10, "slot-10") == CLAIMED
    # The slot before it, queued behind its busy job (``overlap: queue``), waits for it.
    assert within(b, 9, "slot-9", job="solo", node="node-b") == BUSY
    assert b.wait_in_line("solo", at(9), "slot-9", node="node-b", started=at(9), skip="s") == (
        WAITING
    )
    assert within(b, 9, "slot-9", job="solo", node="node-b") == BUSY  # still waits
    # The next slot's claim ahead counts the waiting slot: decided when due.
    assert ahead(a, 11, "slot-11") == BUSY
    end(a, "slot-10", 10.5)
    assert within(b, 9, "slot-9", job="solo", node="node-b") == CLAIMED
