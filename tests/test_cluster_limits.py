"""`max_instances` and `overlap` across nodes: two real schedulers ("a" and "b") on one SQLite
file (a store object each, as two processes would have), on one FakeClock. Each dispatches
every slot of the jobs it defines; the store decides in the claim (`cluster.limits`).

The jobs are `policy_jobs.Holds`: a run holds until its gate opens or it is stopped. Their
starts are counted by the jobs themselves (`policy_jobs.calls`), never by the scheduler.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import policy_jobs as pj
import pytest
from policy_support import T0, WAIT, Recorder, internal_job

from jobscheduler import Event, FakeClock, Job
from jobscheduler.cluster.limits import ALREADY_RUNNING
from jobscheduler.model.execution import Execution
from jobscheduler.policies.overlap import REPLACED, SKIPPED
from jobscheduler.policies.runpolicies import RunPolicies
from jobscheduler.policies.slottrigger import SlotTrigger
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import RunState, StateStore
from jobscheduler.state.sqlite import SqliteStateStore
from jobscheduler.state.values import WAITING


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def nodes(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[[str], Scheduler]]:
    made: list[Scheduler] = []

    def make(name: str) -> Scheduler:
        store = SqliteStateStore(tmp_path / "state.db")
        # A lease of an hour: the clock jumps by a minute (and the nodes' heartbeats, on
        # their thread, follow it as they can); a shorter lease would fence them meanwhile.
        s = Scheduler(clock=clock, state=store, node=name, max_workers=4, lease=3600)
        made.append(s)
        return s

    yield make
    for s in made:
        s.shutdown(wait=False)
        s.state_store.close()


def holding(name: str, key: str, **fields: Any) -> Job:
    """A job that holds, every 60 s from T0 + 60 s."""
    return internal_job(name, "Holds", key, "60 seconds", **fields)


def rarely(name: str, key: str) -> Job:
    """The same job as another node defines it: daily, its first slot a day away (it runs
    here on `run_now` only, in these tests)."""
    return internal_job(name, "Holds", key, "1 day").with_changes(start=T0 + timedelta(days=1))


def tick(clock: FakeClock, *schedulers: Scheduler, seconds: float = 60) -> None:
    """Move the clock on; each node dispatches what is due (its loop body, on this clock)."""
    clock.advance(timedelta(seconds=seconds))
    for s in schedulers:
        s._processor.run_due(clock.now())


def until(condition: Callable[[], bool], clock: FakeClock | None = None) -> None:
    """Wait (real time) for `condition`; with `clock`, moving it on by 0.5 s each look (a
    slot that waits for its busy job asks the store again as the clock goes on)."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        if clock is not None:
            clock.advance(timedelta(seconds=0.5))
        time.sleep(0.01)


def records(store: StateStore, name: str) -> list[tuple[RunState, str | None, int]]:
    """(state, reason, slot's second) of `name`'s runs, by slot."""
    runs = sorted(store.history(name), key=lambda r: (r.slot or T0, r.started))
    return [(r.state, r.reason, int(((r.slot or T0) - T0).total_seconds())) for r in runs]


def idle(*schedulers: Scheduler) -> None:
    """Every node idle, and every outcome written (a run's outcome is written a moment
    after its end: read through another node's store, it shows once written)."""
    for s in schedulers:
        assert s.wait_idle(WAIT)
        s.state_store.history(limit=1)  # a read through a store writes what it posted


def settled(store: StateStore, name: str, expected: list[tuple[RunState, str | None, int]]) -> None:
    until(lambda: records(store, name) == expected)
    assert records(store, name) == expected


def busy_on_a(
    nodes: Callable[[str], Scheduler], clock: FakeClock, key: str, on_a: Job, on_b: Job
) -> tuple[Scheduler, Scheduler]:
    """Nodes a and b sharing a store, job `on_a` on a and `on_b` on b (the same name); a
    run of it started on node a by ``run_now`` (outside b's schedule), running when this
    returns."""
    a, b = nodes("a"), nodes("b")
    a.add_job(on_a)
    b.add_job(on_b)
    for s in (a, b):
        s.start()
    a.run_now(on_a.name)
    tick(clock, a, seconds=0.001)
    pj.wait_calls(key, 1, WAIT)
    return a, b


def test_skip_a_slot_finds_the_job_busy_on_the_other_node(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    a, b = nodes("a"), nodes("b")
    heard = Recorder()
    for s in (a, b):
        s.add_job(holding("slow", key, overlap="skip", max_instances=1))
        s.add_handler("slow", heard)
        s.start()
    tick(clock, a, b)
    pj.wait_calls(key, 1, WAIT)
    tick(clock, a, b)  # one node runs it: the other's claim finds it busy
    tick(clock, a, b)
    until(lambda: len(a.history("slow")) == 3)
    pj.gate(key).set()
    idle(a, b)
    assert len(pj.calls(key)) == 1  # started once: counted by the job itself
    settled(
        a.state_store,
        "slow",
        [
            (RunState.SUCCEEDED, None, 60),
            (RunState.SKIPPED, SKIPPED, 120),
            (RunState.SKIPPED, SKIPPED, 180),
        ],
    )
    assert [e for e, _ in heard.seen] == [Event.SUCCESSFUL]  # skips are silent


def test_max_instances_refuses_a_slot_once_across_nodes(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    a, b = nodes("a"), nodes("b")
    heard = Recorder()
    for s in (a, b):
        s.add_job(holding("slow", key, max_instances=1))
        s.add_handler("slow", heard)
        s.start()
    tick(clock, a, b)
    pj.wait_calls(key, 1, WAIT)
    tick(clock, a, b)
    until(lambda: len(a.history("slow")) == 2)
    pj.gate(key).set()
    idle(a, b)
    assert len(pj.calls(key)) == 1
    settled(
        a.state_store,
        "slow",
        [
            (RunState.SUCCEEDED, None, 60),
            (RunState.NOT_STARTED, ALREADY_RUNNING, 120),
        ],
    )
    # The refusal is told by the node whose record of it was written (the running node's
    # engine refuses it too, on its own runs, and tells it as it always did).
    refused = [x for e, x in heard.seen if e is Event.NOT_STARTED]
    assert 1 <= len(refused) <= 2 and {x.reason for x in refused} == {ALREADY_RUNNING}


def test_queue_waits_for_the_other_nodes_run_then_runs_once(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    a, b = nodes("a"), nodes("b")
    for s in (a, b):
        s.add_job(holding("slow", key, overlap="queue"))
        s.start()
    tick(clock, a, b)
    pj.wait_calls(key, 1, WAIT)
    tick(clock, a, b, seconds=10)  # not a slot yet
    tick(clock, a, b, seconds=50)  # slot 120: held on the running node, waits on the other
    until(lambda: len(pj.calls(key)) == 1 and not any(a.history("slow", limit=5)[1:]))
    pj.gate(key).clear()
    first = pj.calls(key)[0]["run_id"]
    assert [r.state for r in a.history("slow")] == [RunState.RUNNING]
    pj.gate(key).set()  # the first run ends: slot 120 runs, on one node
    until(lambda: len(pj.calls(key)) == 2, clock)
    # The node that waited asks the store again only as its clock moves on: it finds the
    # slot taken at its next look, and is idle then.
    until(lambda: all(s.wait_idle(0.01) for s in (a, b)), clock)
    idle(a, b)
    assert len(pj.calls(key)) == 2 and pj.calls(key)[0]["run_id"] == first
    settled(
        a.state_store,
        "slow",
        [
            (RunState.SUCCEEDED, None, 60),
            (RunState.SUCCEEDED, None, 120),
        ],
    )


def waiting_slots(folder: Path) -> list[tuple[str, int]]:
    """(job, slot's second) of the slots waiting in the store (the cluster's one per job)."""
    with closing(sqlite3.connect(folder / "state.db")) as db:
        rows = db.execute("SELECT job, slot FROM jobscheduler_waiting ORDER BY job").fetchall()
    t0 = round(T0.timestamp() * 1_000_000)
    return [(job, (slot - t0) // 1_000_000) for job, slot in rows]


def slot_waiting_on_b(
    nodes: Callable[[str], Scheduler], clock: FakeClock, key: str, folder: Path
) -> tuple[Scheduler, Scheduler]:
    """`busy_on_a` with ``slow`` (``overlap: queue`` on b); b's slot 60 is due while the
    run on a goes on, so it waits in the store when this returns."""
    a, b = busy_on_a(nodes, clock, key, rarely("slow", key), holding("slow", key, overlap="queue"))
    tick(clock, b, seconds=60)  # slot 60 on b: busy on a, waits
    until(lambda: waiting_slots(folder) == [("slow", 60)])
    return a, b


def test_a_queued_slot_keeps_its_place_and_the_next_slot_is_skipped(
    nodes: Callable[[str], Scheduler],
    clock: FakeClock,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """The other node's run goes on past the next slot: the first slot that found the job
    busy keeps waiting (one waiting slot for the cluster), the next one is recorded skipped
    at once, and the waiting one runs once the job is idle."""
    key = request.node.nodeid
    a, b = slot_waiting_on_b(nodes, clock, key, tmp_path)
    tick(clock, b, seconds=60)  # slot 120 on b: one slot waits already, skipped
    until(lambda: any(r.state is RunState.SKIPPED for r in b.history("slow")), clock)
    assert len(pj.calls(key)) == 1  # still one run, slot 60 waiting
    pj.gate(key).set()
    until(lambda: len(pj.calls(key)) == 2, clock)
    idle(a, b)
    states = records(b.state_store, "slow")
    assert (RunState.SKIPPED, SKIPPED, 120) in states
    ran = [r for r in b.history("slow") if r.state is RunState.SUCCEEDED and r.node == "b"]
    assert [r.slot for r in ran] == [T0 + timedelta(seconds=60)]


def test_a_waiting_slot_leaves_the_line_when_its_node_stops(
    nodes: Callable[[str], Scheduler],
    clock: FakeClock,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """Node b's slot waits for the job busy on node a; b stops: its slot ends NOT_STARTED
    "scheduler stopped" and waits no longer, so the next slot to find the job busy waits in
    its place."""
    key = request.node.nodeid
    a, b = busy_on_a(
        nodes,
        clock,
        key,
        holding("slow", key, overlap="queue").with_changes(start=T0 + timedelta(days=1)),
        holding("slow", key, overlap="queue"),
    )
    tick(clock, b, seconds=60)  # slot 60 on b: busy on a, waits
    until(lambda: waiting_slots(tmp_path) == [("slow", 60)])
    b.shutdown(wait=True)  # its waiting slot gives up; a's run goes on
    assert waiting_slots(tmp_path) == []
    [given_up] = [r for r in a.history("slow") if r.slot == T0 + timedelta(seconds=60)]
    assert (given_up.state, given_up.reason) == (RunState.NOT_STARTED, "scheduler stopped")
    # The job is still busy on a: the next slot that finds it so waits in its place.
    store, slot = a.state_store, T0 + timedelta(seconds=120)
    asked = store.wait_in_line("slow", slot, "probe", node="a", started=slot, skip=SKIPPED)
    assert asked == WAITING
    assert store.leave_line("slow", "probe")
    pj.gate(key).set()
    until(lambda: len(pj.calls(key)) == 1 and a.wait_idle(0.01), clock)


def test_a_waiting_slot_of_a_job_paused_meanwhile_ends_not_started(
    nodes: Callable[[str], Scheduler],
    clock: FakeClock,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    key = request.node.nodeid
    a, b = slot_waiting_on_b(nodes, clock, key, tmp_path)
    b.pause_job("slow", note="maintenance")
    slot = T0 + timedelta(seconds=60)
    until(lambda: any(r.slot == slot for r in b.history("slow")), clock)
    [given_up] = [r for r in b.history("slow") if r.slot == slot]
    assert (given_up.state, given_up.reason) == (RunState.NOT_STARTED, "job paused")
    assert waiting_slots(tmp_path) == []
    pj.gate(key).set()
    idle(a, b)
    assert len(pj.calls(key)) == 1  # the paused job's slot never ran


def test_replace_stops_the_run_on_the_other_node(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    a, b = busy_on_a(
        nodes, clock, key, rarely("slow", key), holding("slow", key, overlap="replace")
    )
    tick(clock, b, seconds=60)  # b's slot: a kill request for a's run, then b runs
    until(lambda: len(pj.calls(key)) == 2, clock)
    pj.gate(key).set()
    idle(a, b)
    ended = sorted(b.history("slow"), key=lambda r: r.started)
    assert [(r.node, r.state) for r in ended] == [
        ("a", RunState.FAILED),
        ("b", RunState.SUCCEEDED),
    ]
    assert ended[0].ended is not None and ended[0].ended <= ended[1].started
    # The kill request carried the reason "replaced" to node a, as a replace on one node.
    reason = ended[0].reason or ""
    assert reason.startswith(REPLACED)  # then what the job raised when stopped
    assert not reason.startswith("killed")


def test_replace_of_a_run_on_the_slots_own_node_gives_the_same_reason(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    """On a shared store a node's own run is replaced through the store as another node's
    is: the same reason, "replaced"."""
    key = request.node.nodeid
    b = nodes("b")
    b.add_job(holding("slow", key, overlap="replace"))
    b.start()
    tick(clock, b, seconds=60)  # slot 60 runs (and holds)
    pj.wait_calls(key, 1, WAIT)
    tick(clock, b, seconds=60)  # slot 120 replaces it
    until(lambda: len(pj.calls(key)) == 2, clock)
    pj.gate(key).set()
    idle(b)
    first, second = sorted(b.history("slow"), key=lambda r: r.started)
    assert (first.slot, first.state) == (T0 + timedelta(seconds=60), RunState.FAILED)
    assert (first.reason or "").startswith(REPLACED)
    assert (second.state, second.node) == (RunState.SUCCEEDED, "b")


def test_a_claimed_ahead_slot_skipped_is_settled_skipped(tmp_path: Path, clock: FakeClock) -> None:
    """A slot claimed before it was due has a ``running`` record (its claim); skipped, it is
    settled ``skipped`` under its run id, never left ``running``."""
    store = SqliteStateStore(tmp_path / "state.db")
    try:
        job = holding("slow", "unused", overlap="skip")
        assert store.claim("slow", T0, "schedule", "r-ahead", node="a", started=T0)
        policies = RunPolicies(
            store=store, node="a", clock=clock, catalog=lambda: None,  # type: ignore[arg-type,return-value]
            run_at=lambda *a: None, schedule=lambda *a: None, report=lambda *a: None,
        )  # fmt: skip
        skipped = Execution.not_started("slow", "r-ahead", T0, T0, SKIPPED, "schedule")
        verdict = policies.verdict(job, skipped)
        assert verdict is not None and not verdict.record
        record = store.run("r-ahead")
        assert record is not None
        assert (record.state, record.reason) == (RunState.SKIPPED, SKIPPED)
        assert store.history("slow", state=RunState.RUNNING) == []
    finally:
        store.close()


class _Keeper:
    """What `ClusterLimits` reads of a node: its store, its name, where slots end."""

    def __init__(self, store: StateStore, name: str) -> None:
        self.store = store
        self.name = name
        self.moved: list[tuple[str, object]] = []

    def ended(self, job: str, slot: object) -> None:
        self.moved.append((job, slot))


def test_a_node_claims_the_slots_it_owns_at_once_and_the_others_after_a_delay(
    tmp_path: Path, clock: FakeClock
) -> None:
    """Two live nodes: node a claims its own share of a burst of limited slots at once, and
    the others' only once `SHARE_DELAY` has passed (their owner, b, never claims them here:
    a takes them then)."""
    from jobscheduler.cluster.limits import SHARE_DELAY, ClusterLimits
    from jobscheduler.runners.context import RunContext
    from jobscheduler.state import NodeInfo

    store = SqliteStateStore(tmp_path / "state.db")
    try:
        for name in ("a", "b"):
            info = NodeInfo(name=name, host="h", pid=1, process_started=1.0, started=T0)
            store.join(info, lease=timedelta(hours=1))
        keeper = _Keeper(store, "a")
        limits = ClusterLimits(keeper, clock, lambda: None)  # type: ignore[arg-type]
        slot = clock.now()
        runs = []
        for i in range(20):
            job = holding(f"j{i}", "unused", overlap="skip")
            runs.append((job, RunContext(job, f"r{i}", slot, "schedule", created=slot, node="a")))
        answers: list[object] = []
        worker = threading.Thread(target=lambda: answers.extend(limits.claim_many(runs)))
        worker.start()
        until(lambda: len(store.history(limit=100)) > 0)
        time.sleep(0.2)  # (a look that the others' are not claimed before the delay)
        first = {r.run_id for r in store.history(limit=100)}
        assert 0 < len(first) < 20 and worker.is_alive()
        clock.advance(timedelta(seconds=SHARE_DELAY))
        worker.join(WAIT)
        assert answers == [True] * 20
        assert len(store.history(limit=100)) == 20
    finally:
        store.close()


def test_a_backfill_run_of_a_job_busy_on_the_other_node_is_refused_under_its_slot(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    """A backfill's run (started by ``Backfill``, past its own look at the store) of a job
    running on node a, with ``overlap: skip`` and no ``max_instances``: b's claim counts a's
    run (one at a time), so it is refused "already running", under its own slot and
    attempt (the backfill waits and runs the slot again); never beside a's run."""
    key = request.node.nodeid
    slot = T0 - timedelta(days=3)
    a, b = busy_on_a(
        nodes, clock, key, rarely("slow", key).with_changes(overlap="skip"),
        rarely("slow", key).with_changes(overlap="skip"),
    )  # fmt: skip
    b._processor.run_at(b.get_job("slow"), clock.now(), SlotTrigger("backfill", slot, 2))
    tick(clock, b, seconds=0.001)
    until(lambda: any(r.trigger == "backfill" for r in a.history("slow")))
    [refused] = [r for r in a.history("slow") if r.trigger == "backfill"]
    assert (refused.slot, refused.attempt, refused.state, refused.reason, refused.node) == (
        slot, 2, RunState.NOT_STARTED, ALREADY_RUNNING, "b",
    )  # fmt: skip
    pj.gate(key).set()
    idle(a, b)
    assert len(pj.calls(key)) == 1  # a's run alone started


def test_a_slot_claimed_ahead_is_a_live_run_for_a_run_now_before_it_is_due(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    """Node a or b claims slot 60 of the idle job ahead (within `ahead.LEAD` of it): from
    then on its claim is a live run of the job on every node, so b's ``run_now`` before the
    slot is refused "already running"; the slot then runs once, without a claim of its own."""
    key = request.node.nodeid
    a, b = nodes("a"), nodes("b")
    for s in (a, b):
        s.add_job(holding("slow", key, max_instances=1, overlap="skip"))
        s.start()
    # The claims ahead look (so close to the slot that each node claims it at once, whichever
    # owns it): the job is idle.
    clock.advance(timedelta(seconds=60 - 0.08))
    until(lambda: [r.state for r in a.history("slow")] == [RunState.RUNNING])
    [ahead] = a.history("slow")
    assert ahead.slot == T0 + timedelta(seconds=60)
    b.run_now("slow")
    tick(clock, b, seconds=0.001)
    until(lambda: len(a.history("slow")) == 2)
    tick(clock, a, b, seconds=0.08)  # slot 60 comes: it runs on its claim
    pj.wait_calls(key, 1, WAIT)
    pj.gate(key).set()
    idle(a, b)
    assert [c["run_id"] for c in pj.calls(key)] == [ahead.run_id]  # started once
    settled(
        a.state_store,
        "slow",
        [
            (RunState.NOT_STARTED, ALREADY_RUNNING, 0),  # the run_now (no slot)
            (RunState.SUCCEEDED, None, 60),
        ],
    )


def test_a_busy_jobs_slot_is_decided_when_due_after_its_claim_ahead(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    """The job runs on node a when b looks at slot 60 ahead: nothing is claimed ahead; the
    slot is decided when due, over the job's runs then (busy: recorded skipped)."""
    key = request.node.nodeid
    a, b = busy_on_a(
        nodes,
        clock,
        key,
        rarely("slow", key),
        holding("slow", key, max_instances=1, overlap="skip"),
    )
    clock.advance(timedelta(seconds=60 - 0.08))  # b claims slot 60 at once (see above)
    until(lambda: b._processor._ahead is not None and b._processor._ahead.rounds > 0)
    assert len(a.history("slow")) == 1  # the run_now only: nothing claimed ahead
    tick(clock, b, seconds=0.08)
    until(lambda: len(b.history("slow")) == 2)
    pj.gate(key).set()
    idle(a, b)
    assert len(pj.calls(key)) == 1
    settled(
        a.state_store,
        "slow",
        [(RunState.SUCCEEDED, None, 0), (RunState.SKIPPED, SKIPPED, 60)],
    )
