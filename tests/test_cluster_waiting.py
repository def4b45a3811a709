"""A job's waiting runs across nodes, seen and ended: the cluster's one waiting slot of an
``overlap: queue`` job and a rerun waiting for room are shown (`StateStore.waiting_runs`,
`opsdata.status`), and end at once when their job is removed or no longer waits. Two real
schedulers ("a" and "b") on one SQLite file, one FakeClock (as `test_cluster_limits`);
starts are counted by the jobs themselves."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import policy_jobs as pj
import pytest
from policy_support import T0, WAIT
from test_cluster_limits import (
    busy_on_a,
    clock,
    holding,
    idle,
    nodes,
    rarely,
    slot_waiting_on_b,
    tick,
    until,
    waiting_slots,
)
from test_cluster_queue_limits import on_demand, row_states

from jobscheduler import FakeClock
from jobscheduler.app import opsdata
from jobscheduler.cluster import queue
from jobscheduler.cluster.limits import CHANGED, REMOVED
from jobscheduler.model.catalog import Catalog
from jobscheduler.policies.overlap import SKIPPED
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import NodeInfo, RunState
from jobscheduler.state.memory import MemoryStateStore
from jobscheduler.state.sqlite import SqliteStateStore
from jobscheduler.state.values import CLAIMED, WAITING

__all__ = ["clock", "nodes"]  # the fixtures, used by name

SLOT = T0 + timedelta(seconds=60)


def given_up(s: Scheduler, name: str, slot: object = SLOT) -> tuple[RunState, str | None]:
    [record] = [r for r in s.history(name) if r.slot == slot]
    return record.state, record.reason


def test_the_waiting_slot_is_shown_with_its_node_and_why(
    nodes: Callable[[str], Scheduler],
    clock: FakeClock,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    key = request.node.nodeid
    a, b = slot_waiting_on_b(nodes, clock, key, tmp_path)
    [wait] = a.state_store.waiting_runs()
    assert (wait.job, wait.slot, wait.node, wait.trigger) == ("slow", SLOT, "b", "schedule")
    clock.advance(timedelta(seconds=3))
    data = opsdata.status(a.state_store, a.catalog, clock.now())
    [shown] = data["waiting"]
    assert shown["job"] == "slow" and shown["node"] == "b"
    assert shown["slot"] == SLOT.isoformat() and shown["trigger"] == "schedule"
    assert shown["busy_on"] == ["a"] and shown["awaiting_takeover"] is False
    assert shown["waited"] >= 3.0 and "busy on a" in shown["reason"]
    assert opsdata.live_of_job(b.state_store, "slow", clock.now())["waiting"] == [
        {**shown, "waited": shown["waited"]}
    ]
    pj.gate(key).set()
    until(lambda: len(pj.calls(key)) == 2, clock)
    idle(a, b)
    assert a.state_store.waiting_runs() == []
    assert opsdata.status(a.state_store, a.catalog, clock.now())["waiting"] == []


def test_removing_the_job_ends_its_waiting_slot_at_once(
    nodes: Callable[[str], Scheduler],
    clock: FakeClock,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """Removed from b's definitions, the slot waiting on b ends NOT_STARTED "job removed"
    without the clock moving on (the removal wakes the wait), and waits no longer."""
    key = request.node.nodeid
    a, b = slot_waiting_on_b(nodes, clock, key, tmp_path)
    b.remove_job("slow")
    until(lambda: any(r.slot == SLOT for r in a.history("slow")))
    assert given_up(a, "slow") == (RunState.NOT_STARTED, REMOVED)
    assert waiting_slots(tmp_path) == []
    assert b.wait_idle(WAIT)
    pj.gate(key).set()
    idle(a)
    assert len(pj.calls(key)) == 1  # the removed job's slot never ran


def test_a_change_that_no_longer_queues_ends_the_waiting_slot(
    nodes: Callable[[str], Scheduler],
    clock: FakeClock,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    key = request.node.nodeid
    a, b = slot_waiting_on_b(nodes, clock, key, tmp_path)
    b.modify_job(holding("slow", key, overlap="skip"))
    until(lambda: any(r.slot == SLOT for r in a.history("slow")))
    assert given_up(a, "slow") == (RunState.NOT_STARTED, CHANGED)
    assert waiting_slots(tmp_path) == []
    pj.gate(key).set()
    idle(a, b)
    assert len(pj.calls(key)) == 1


def test_a_change_that_still_queues_keeps_the_slot_waiting(
    nodes: Callable[[str], Scheduler],
    clock: FakeClock,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    key = request.node.nodeid
    a, b = slot_waiting_on_b(nodes, clock, key, tmp_path)
    b.modify_job(holding("slow", key, overlap="replace"))  # still waits: replace
    clock.advance(timedelta(seconds=2))
    assert waiting_slots(tmp_path) == [("slow", 60)]
    pj.gate(key).set()
    until(lambda: len(pj.calls(key)) == 2, clock)
    idle(a, b)
    assert given_up(a, "slow")[0] is RunState.SUCCEEDED


def test_a_rerun_waiting_for_room_is_shown_and_ends_when_its_job_is_removed(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    """A rerun after a node loss of a job busy on node a waits on b for room: shown as
    waiting (trigger rerun, node b) until b's definitions drop the job, which ends it
    NOT_STARTED "job removed" at once."""
    key = request.node.nodeid
    solo = holding("solo", key, max_instances=1)
    a, b = busy_on_a(nodes, clock, key, rarely("solo", key).with_changes(max_instances=1), solo)
    b._processor.run_at(solo, clock.now(), trigger="rerun")
    tick(clock, seconds=2)
    until(lambda: [w.trigger for w in a.state_store.waiting_runs("solo")] == ["rerun"])
    [wait] = a.state_store.waiting_runs()
    assert wait.node == "b"
    [shown] = opsdata.status(a.state_store, a.catalog, clock.now())["waiting"]
    assert (shown["trigger"], shown["node"], shown["busy_on"]) == ("rerun", "b", ["a"])
    assert "room" in shown["reason"]
    b.remove_job("solo")
    until(lambda: any(r.trigger == "rerun" for r in a.history("solo")))
    [rerun] = [r for r in a.history("solo") if r.trigger == "rerun"]
    assert (rerun.state, rerun.reason, rerun.node) == (RunState.NOT_STARTED, REMOVED, "b")
    assert a.state_store.waiting_runs() == []
    pj.gate(key).set()
    idle(a, b)
    assert [c["trigger"] for c in pj.calls(key)] == ["run_now"]


def test_a_rerun_waiting_for_room_ends_on_a_pause(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    solo = holding("solo", key, max_instances=1)
    a, b = busy_on_a(nodes, clock, key, rarely("solo", key).with_changes(max_instances=1), solo)
    b._processor.run_at(solo, clock.now(), trigger="rerun")
    tick(clock, seconds=2)
    until(lambda: len(a.state_store.waiting_runs("solo")) == 1)
    b.pause_job("solo")
    until(lambda: any(r.trigger == "rerun" for r in a.history("solo")), clock)
    [rerun] = [r for r in a.history("solo") if r.trigger == "rerun"]
    assert (rerun.state, rerun.reason) == (RunState.NOT_STARTED, "job paused")
    assert a.state_store.waiting_runs() == []
    pj.gate(key).set()
    idle(a, b)


def test_a_row_held_back_by_its_limit_is_not_taken_again_at_every_poll(
    nodes: Callable[[str], Scheduler],
    clock: FakeClock,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A submitted run of a job at its ``max_instances`` (running on one node) waits in the
    queue: each node's take finds nothing once, then its polls only look (a read) until
    something may change: a row of another job is seen and taken at the next look, and the
    end of the job's run takes the waiting row at once."""
    key = request.node.nodeid
    other_key = key + "-other"
    a, b = nodes("a"), nodes("b")
    for s in (a, b):
        s.add_job(holding("solo", key, max_instances=1))
        s.add_job(on_demand("other", "ok", other_key))
        s.start()
    # The take made again by itself after a while (a row whose room came on a node that
    # could not take it) is not what is counted here.
    monkeypatch.setattr(queue, "HELD_BACK_RETAKE", 3600.0)
    looks = {"a": 0, "b": 0}
    takes = {"a": 0, "b": 0}
    for s in (a, b):
        store = s.state_store
        monkeypatch.setattr(store, "look", counted(store.look, looks, s.node))
        monkeypatch.setattr(store, "take", counted(store.take, takes, s.node))
    tick(clock, a, b)
    pj.wait_calls(key, 1, WAIT)  # slot 60 runs, on one of them
    a.submit("solo")
    until(lambda: takes["a"] >= 1 and takes["b"] >= 1, clock)  # each finds it held back
    first, looked = dict(takes), dict(looks)
    until(lambda: all(looks[n] >= looked[n] + 8 for n in looks), clock)
    # Eight looks each, and at most one take: a take woken before any look had seen the
    # row (a's, by its submit) does not know it is held back; the next look's does.
    assert all(takes[n] - first[n] <= 1 for n in takes), (first, takes)
    assert row_states(a, "solo") == ["pending"]
    # A row of another job inserted by another program (no node woken): seen, taken.
    with closing(SqliteStateStore(tmp_path / "state.db")) as elsewhere:
        elsewhere.submit("other")
    until(lambda: row_states(a, "other") == ["succeeded"], clock)
    assert len(pj.calls(key)) == 1 and row_states(a, "solo") == ["pending"]
    pj.gate(key).set()  # the scheduled run ends: its node takes the waiting row at once
    until(lambda: row_states(a, "solo") == ["succeeded"], clock)
    idle(a, b)
    assert [c["trigger"] for c in pj.calls(key)] == ["schedule", "submit"]


def counted(
    method: Callable[..., object], counts: dict[str, int], node: str
) -> Callable[..., object]:
    """`method`, counting its calls in ``counts[node]``."""

    def call(*args: object, **kwargs: object) -> object:
        counts[node] += 1
        return method(*args, **kwargs)

    return call


def test_the_waiting_slot_of_a_lost_node_shows_awaiting_takeover() -> None:
    """Node b, whose slot waits, stops renewing its lease: until it is taken over, its slot
    still counts and is shown, marked awaiting takeover; the take-over ends it."""
    clock = FakeClock(T0)
    store = MemoryStateStore(clock=clock)
    lease = timedelta(seconds=15)
    for name in ("a", "b"):
        node = NodeInfo(
            name=name, host="h", pid=1, process_started=1.0, started=T0, max_workers=2, lease=lease
        )
        store.join(node, lease=lease)
    assert store.claim_within("j", T0, "schedule", "r1", node="a", started=T0, limit=1) == CLAIMED
    slot = T0 + timedelta(seconds=60)
    assert store.wait_in_line("j", slot, "w", node="b", started=slot, skip=SKIPPED) == WAITING
    now = slot + timedelta(seconds=1)
    [shown] = opsdata.status(store, Catalog(), now)["waiting"]
    assert (shown["node"], shown["busy_on"], shown["awaiting_takeover"]) == ("b", ["a"], False)
    assert shown["waited"] == 1.0
    for _ in range(3):  # a renews its lease, b does not
        clock.advance(timedelta(seconds=10))
        assert store.heartbeat("a", lease=lease)
    [shown] = opsdata.status(store, Catalog(), clock.now())["waiting"]
    assert (shown["node"], shown["awaiting_takeover"]) == ("b", True)
    [lost] = store.take_over("b", by="a")
    assert (lost.run_id, lost.state, lost.reason) == ("w", RunState.ABANDONED, "node lost: b")
    assert opsdata.status(store, Catalog(), clock.now())["waiting"] == []
