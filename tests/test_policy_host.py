"""`host:` runs pinned to matching nodes; "no node for host" when none is alive."""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

import policy_jobs as pj
import pytest
from policy_support import T0, WAIT, Recorder, internal_job

from jobscheduler import Event, FakeClock, Job
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import MemoryStateStore, RunState
from jobscheduler.state.values import NodeInfo


def job(name: str, key: str, **fields: Any) -> Job:
    return internal_job(name, "ok", key, "1 hour", **fields)


def step(nodes: list[Scheduler], clock: FakeClock, seconds: float) -> None:
    clock.advance(timedelta(seconds=seconds))
    for node in nodes:
        node._processor.run_due(clock.now())
    for node in nodes:
        assert node.wait_idle(WAIT)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def test_only_a_matching_node_runs_the_job(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    store = MemoryStateStore(clock=clock)
    recorders = [Recorder(), Recorder()]
    # Leases longer than the clock's steps: the two nodes must not take each other over.
    nodes = [
        Scheduler(clock=clock, state=store, node=name, lease=3600) for name in ("web-1", "db-1")
    ]
    try:
        for node, recorder in zip(nodes, recorders, strict=True):
            node.add_job(job("dump", key, host="db-*"))
            node.add_handler("dump", recorder)
            node.start()
        step(nodes, clock, 60)
        step(nodes, clock, 60)  # past the lease: web-1 asks again, finds the slot taken
        runs = pj.calls(key)
        assert len(runs) == 1
        assert [r.node for r in store.history("dump")] == ["db-1"]
        assert recorders[0].seen == []  # web-1 heard nothing
        assert [e for e, _ in recorders[1].seen] == [Event.SUCCESSFUL]
    finally:
        for node in nodes:
            node.shutdown(wait=False)


def test_a_run_no_live_node_matches_is_not_started_once_a_lease_late(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    recorder = Recorder()
    store = MemoryStateStore(clock=clock)
    with Scheduler(clock=clock, state=store, node="web-1") as s:
        s.add_job(job("dump", key, host="db-*"))
        s.add_handler("dump", recorder)
        step([s], clock, 60)
        assert store.history("dump") == [] and recorder.seen == []  # not yet: a lease to wait
        step([s], clock, 29)
        assert store.history("dump") == []
        step([s], clock, 1)
        records = store.history("dump")
        assert [(r.state, r.reason, r.slot) for r in records] == [
            (RunState.NOT_STARTED, "no node for host db-*", T0 + timedelta(seconds=60))
        ]
        assert [(e, x.reason) for e, x in recorder.seen] == [
            (Event.NOT_STARTED, "no node for host db-*")
        ]
    assert pj.calls(key) == []


def test_a_live_matching_node_elsewhere_is_left_the_run(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    store = MemoryStateStore(clock=clock)
    other = NodeInfo(name="db-7", host="db-host", pid=1, process_started=0.0, started=T0)
    store.join(other, lease=timedelta(minutes=10))
    with Scheduler(clock=clock, state=store, node="web-1") as s:
        s.add_job(job("dump", key, host="db-*"))
        for _ in range(4):
            clock.advance(timedelta(seconds=29))
            assert store.heartbeat("db-7", lease=timedelta(seconds=30))  # db-7 is alive
            step([s], clock, 1)
    assert pj.calls(key) == [] and store.history("dump") == []


def test_the_host_name_matches_too(clock: FakeClock, request: pytest.FixtureRequest) -> None:
    key = request.node.nodeid
    with Scheduler(clock=clock, node="node-a") as s:
        s.add_job(job("here", key, host=socket.gethostname()))
        step([s], clock, 60)
    assert len(pj.calls(key)) == 1
