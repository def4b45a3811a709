"""The node's life in the state store, on a FakeClock: join, heartbeats, take-over of dead
nodes (by lease, and at once for a dead process of this host), on_node_loss, missed ranges,
marks, retention. Real schedulers over a real memory store sharing the test's clock; the
multi-process tests with kill -9 are in test_cluster_processes.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_node_definitions import clock, made, store
from test_scheduler import T0, Recorder, internal, settle

from jobscheduler import Event, FakeClock
from jobscheduler.cluster.node import DEFAULT_LEASE
from jobscheduler.cluster.nodesetup import default_state, state_file
from jobscheduler.model.node import default_node_name
from jobscheduler.runners.procs import process_alive, process_start_time, stop_group
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import (
    MemoryStateStore,
    NodeInfo,
    NodeNameTakenError,
    RunState,
    StoreUnavailableError,
)
from jobscheduler.state.sqlite import SqliteStateStore

LEASE = timedelta(seconds=15)


__all__ = ["clock", "made", "store"]  # the fixtures, used by name


def node(store: MemoryStateStore, made: list[Scheduler], clock: FakeClock, name: str) -> Scheduler:
    s = Scheduler(clock=clock, state=store, node=name, lease=LEASE)
    made.append(s)
    return s


def beat(s: Scheduler) -> None:
    """One heartbeat now, in this thread (what the node's thread does every lease/3)."""
    s._keeper.beat()


def wait_out(s: Scheduler, clock: FakeClock, lease: timedelta = LEASE) -> None:
    """Let `lease` and a beat pass, beating all along (as the node's thread does)."""
    for _ in range(4):
        clock.advance(lease / 3 + timedelta(milliseconds=1))
        beat(s)


def other_node(
    store: MemoryStateStore, name: str, *, host: str = "elsewhere", pid: int = 1
) -> None:
    store.join(
        NodeInfo(name=name, host=host, pid=pid, process_started=1.0, started=T0), lease=LEASE
    )


def test_a_node_joins_at_start_and_leaves_at_shutdown(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    s = node(store, made, clock, "a")
    assert s.nodes == []
    s.start()
    [me] = s.nodes
    assert (me.name, me.state, me.pid, me.host) == ("a", "up", os.getpid(), socket.gethostname())
    assert me.process_started == pytest.approx(process_start_time(os.getpid()), abs=0.05)
    s.shutdown()
    assert [n.state for n in store.nodes()] == ["left"]


def test_a_live_nodes_name_is_refused(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    node(store, made, clock, "a").start()
    second = node(store, made, clock, "a")
    with pytest.raises(NodeNameTakenError, match="'a' is taken by a live node"):
        second.start()
    assert not second.running


def test_heartbeats_keep_the_lease(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    s = node(store, made, clock, "a")
    s.start()
    for _ in range(10):
        clock.advance(LEASE / 3)
        beat(s)
    assert store.expired_nodes(lease=LEASE) == []
    assert store.nodes()[0].heartbeat == clock.now()


def test_an_expired_node_is_taken_over_and_its_runs_abandoned_and_reported(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    s = node(store, made, clock, "a")
    s.add_job(internal("job", "k"))
    recorder = Recorder()
    s.add_handler("job", recorder)
    other_node(store, "b")
    assert store.claim("job", T0, "schedule", "r1", node="b", started=T0)
    s.start()
    beat(s)
    assert store.history()[0].state is RunState.RUNNING  # b's lease still runs
    wait_out(s, clock)
    [lost] = store.history("job")
    assert (lost.run_id, lost.state, lost.reason) == (
        "r1",
        RunState.ABANDONED,
        "node lost, may have run: b",
    )
    assert [n.state for n in store.nodes()] == ["up", "dead"]
    settle(s)
    [(name, event, execution)] = recorder.seen
    assert (name, event, execution.reason, execution.run_id) == (
        "job",
        Event.FAILED,
        "node lost, may have run: b",
        "r1",
    )
    beat(s)  # taken over once
    assert len(recorder.seen) == 1


def test_on_node_loss_rerun_runs_the_slot_again_with_the_next_attempt(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    s = node(store, made, clock, "a")
    s.add_job(internal("job", "k", on_node_loss="rerun", start=T0 + timedelta(days=1)))
    other_node(store, "b")
    assert store.claim("job", T0, "schedule", "r1", node="b", started=T0)
    s.start()
    wait_out(s, clock)
    settle(s)
    rerun, lost = store.history("job")
    assert lost.state is RunState.ABANDONED
    assert (rerun.slot, rerun.attempt, rerun.trigger, rerun.node, rerun.state) == (
        T0,
        2,
        "rerun",
        "a",
        RunState.SUCCEEDED,
    )


def test_a_dead_process_of_this_host_is_taken_over_at_once(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert not process_alive(gone.pid, 1.0)
    other_node(store, "dead-here", host=socket.gethostname(), pid=gone.pid)
    other_node(store, "alive-here", host=socket.gethostname(), pid=os.getpid())
    store.join(
        NodeInfo(
            name="alive-here",
            host=socket.gethostname(),
            pid=os.getpid(),
            process_started=process_start_time(os.getpid()),
            started=T0,
        ),
        lease=timedelta(seconds=-1),  # replaces the entry above
    )
    assert store.claim("job", T0, "schedule", "r1", node="dead-here", started=T0)
    s = node(store, made, clock, "a")
    s.start()  # no time passes: the lease of dead-here is still running
    states = {n.name: n.state for n in store.nodes()}
    assert states == {"a": "up", "alive-here": "up", "dead-here": "dead"}
    assert store.history()[0].state is RunState.ABANDONED


def test_a_restarted_node_abandons_what_its_previous_process_left(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    other_node(store, "a", host=socket.gethostname(), pid=gone.pid)
    assert store.claim("job", T0, "schedule", "r1", node="a", started=T0)
    s = node(store, made, clock, "a")
    s.start()  # its old lease has not run out: the pid tells it is gone
    assert store.history()[0].state is RunState.ABANDONED
    assert [(n.name, n.state, n.pid) for n in store.nodes()] == [("a", "up", os.getpid())]


def test_missed_slots_are_one_record_and_move_the_mark(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    job = internal("job", "k", start=T0, interval="1 minute")
    store.set_mark("job", last_slot=T0)
    store.set_mark("fresh", last_slot=None)
    clock.set(T0 + timedelta(minutes=10, seconds=30))
    s = node(store, made, clock, "a")
    s.add_jobs([job, internal("fresh", "k2", start=T0, interval="1 minute")])
    s.start()
    [missed] = store.history("job")
    assert (missed.state, missed.slot, missed.last_slot) == (
        RunState.MISSED,
        T0 + timedelta(minutes=1),
        T0 + timedelta(minutes=10),
    )
    assert missed.reason is not None and missed.reason.startswith("10 slots missed")
    assert store.history("fresh") == []  # no mark: nothing missed
    mark = store.mark("job")
    assert mark is not None and mark.last_slot == T0 + timedelta(minutes=10)


def test_every_run_that_ends_moves_its_jobs_mark_at_the_next_beat(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    s = node(store, made, clock, "a")
    s.add_job(internal("job", "k", start=T0 + timedelta(seconds=4), interval="4 seconds"))
    s.start()
    for _ in range(2):  # less than a heartbeat apart: the lease never runs out
        clock.advance(4)
        settle(s)
        beat(s)
    mark = store.mark("job")
    assert mark is not None and mark.last_slot == T0 + timedelta(seconds=8)


class CallsStore(MemoryStateStore):
    """Counts the calls a node's heartbeat makes; `set_marks` fails while `failing`."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.calls: list[str] = []
        self.failing = False

    def nodes(self) -> list[NodeInfo]:
        self.calls.append("nodes")
        return super().nodes()

    def due_alerts(self, **kwargs: Any) -> Any:
        self.calls.append("due_alerts")
        return super().due_alerts(**kwargs)

    def set_marks(self, last_slots: Mapping[str, datetime]) -> None:
        self.calls.append(f"set_marks {len(last_slots)}")
        if self.failing:
            raise StoreUnavailableError("the database is away")
        super().set_marks(last_slots)


def test_marks_are_written_in_one_call_a_beat_and_kept_when_the_store_fails(
    clock: FakeClock, made: list[Scheduler]
) -> None:
    store = CallsStore(clock)
    s = node(store, made, clock, "a")  # type: ignore[arg-type]
    s.start()
    keeper = s._keeper
    at = [T0 + timedelta(seconds=n) for n in range(4)]
    for n in range(3):  # what the end of a run tells the node
        keeper.ended(f"job{n}", at[1])
    store.failing = True
    store.calls.clear()
    beat(s)  # the failure goes to the node's outage, told once
    assert keeper.outage.away
    # (The node's own thread may beat too, woken by this one: hence sets, not lists.)
    assert set(store.calls) == {"set_marks 3"} and store.marks() == {}  # kept for the next
    store.failing = False
    keeper.ended("job0", at[3])  # later: it wins
    keeper.ended("job1", at[0])  # earlier than the kept one: it loses
    beat(s)
    slots = {job: mark.last_slot for job, mark in store.marks().items()}
    assert slots == {"job0": at[3], "job1": at[1], "job2": at[1]}
    written = len(store.calls)
    beat(s)
    assert len(store.calls) == written  # nothing ran since: nothing written


def test_a_lone_nodes_heartbeat_lists_no_nodes_and_reads_no_outbox(
    clock: FakeClock, made: list[Scheduler]
) -> None:
    store = CallsStore(clock)
    s = node(store, made, clock, "a")  # type: ignore[arg-type]
    s.start()
    store.calls.clear()
    for _ in range(3):
        beat(s)
    assert store.calls == []  # one `beat` each, nothing after it
    store.hold_alert("smtp", b"Subject: x\r\n\r\nbody\r\n", ["ops@example.org"])
    beat(s)
    assert store.calls == ["due_alerts"]  # an alert is due: handed back
    other_node(store, "b")  # another host, its lease running
    beat(s)
    assert "nodes" not in store.calls
    wait_out(s, clock)  # "a" beats on, "b" expires: listed and taken over
    assert "nodes" in store.calls and s._keeper.takeovers == 1


def test_missed_ranges_are_left_alone_while_another_node_is_up(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    store.set_mark("job", last_slot=T0)
    clock.set(T0 + timedelta(minutes=10))
    other_node(store, "b")  # up (and so running the job's slots) while "a" was away
    s = node(store, made, clock, "a")
    s.add_job(internal("job", "k", start=T0, interval="1 minute"))
    s.start()
    assert store.history("job") == []


def test_the_node_thread_beats_on_the_clock(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    s = node(store, made, clock, "a")
    s.start()
    first = store.nodes()[0].heartbeat
    clock.advance(LEASE / 3)
    deadline = time.monotonic() + 60
    while store.nodes()[0].heartbeat == first and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.nodes()[0].heartbeat == clock.now()


def test_retention_prunes_by_age_on_the_first_beat(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    old = T0 - timedelta(days=40)
    store.record(
        "job", old, "schedule", "old", node="x", state=RunState.SUCCEEDED, started=old, ended=old
    )
    store.record(
        "job", T0, "schedule", "new", node="x", state=RunState.SUCCEEDED, started=T0, ended=T0
    )
    s = node(store, made, clock, "a")
    s.start()
    beat(s)
    assert [r.run_id for r in store.history()] == ["new"]


def test_the_default_state_store(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBSCHEDULER_STATE", raising=False)
    assert state_file("/etc/jobs.yaml").name == "jobs.state.db"
    assert default_state(None, "/etc/jobs.yaml") == "sqlite:////etc/jobs.state.db"
    assert default_state(None, None) is None
    assert default_state("memory", "/etc/jobs.yaml") == "memory"
    monkeypatch.setenv("JOBSCHEDULER_STATE", "postgresql://db/x")
    assert default_state(None, "/etc/jobs.yaml") == "postgresql://db/x"
    assert timedelta(seconds=15) == DEFAULT_LEASE


def test_two_schedulers_of_one_process_on_one_file_are_two_nodes(tmp_path: Path) -> None:
    config = tmp_path / "jobs.yaml"
    config.write_text("jobs: {}\n")
    with Scheduler(config) as first, Scheduler(config) as second:
        # HOSTNAME-PID, then HOSTNAME-PID-2 (-3, … if other schedulers of this process run)
        assert first.node.startswith(default_node_name())
        assert second.node.startswith(f"{default_node_name()}-") and second.node != first.node
        assert [n.name for n in first.nodes if n.state == "up"] == sorted([first.node, second.node])
        assert first.state_store is not second.state_store
    store = SqliteStateStore(tmp_path / "jobs.state.db")
    assert {n.state for n in store.nodes()} == {"left"}
    store.close()


def test_a_process_is_known_by_its_pid_and_start_time() -> None:
    me = os.getpid()
    started = process_start_time(me)
    assert abs(started - time.time()) < 24 * 3600 * 365 and started > 1e9
    assert process_alive(me, started)
    assert not process_alive(me, started - 100)  # the pid reused by another process
    assert process_start_time(2**22 + 12345) == 0.0  # no such pid
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        born = process_start_time(child.pid)
        assert not stop_group(child.pid, born + 100)  # not that process: left alone
        assert child.poll() is None
        assert stop_group(child.pid, born)
        assert child.wait(60) == -9
    finally:
        child.kill()
        child.wait()


def test_a_node_declared_dead_stops_its_runs_refuses_claims_and_joins_again(
    store: MemoryStateStore, clock: FakeClock, made: list[Scheduler]
) -> None:
    import jobs_for_tests as jft

    from jobscheduler import Job, JobType

    s = node(store, made, clock, "a")
    s.add_job(
        Job(
            "blocks",
            type=JobType.INTERNAL,
            command=f"{jft.__name__}:Blocks",
            args={"key": "declared-dead"},
            start=T0 + timedelta(days=1),
            interval="1 day",
        )
    )
    s.start()
    s.run_now("blocks")
    deadline = time.monotonic() + 60
    while "declared-dead" not in jft.INSTANCES and time.monotonic() < deadline:
        time.sleep(0.01)
    instance = jft.instance("declared-dead")
    assert instance.started.wait(60)
    [running] = s.executing
    # Another node decides "a" is dead (its process was frozen past the lease, say).
    assert [r.run_id for r in store.take_over("a", by="b")] == [running.run_id]
    beat(s)  # its heartbeat is refused: it stops what it runs and joins again
    assert instance.stopped.wait(60)
    settle(s)
    [run] = store.history("blocks")
    assert (run.state, run.reason) == (RunState.ABANDONED, "node lost, may have run: a")
    assert [(n.name, n.state) for n in store.nodes()] == [("a", "up")]
    s.run_now("blocks")  # joined again: runs start again
    deadline = time.monotonic() + 60
    while len(store.history("blocks")) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.history("blocks")[0].state is RunState.RUNNING
    s.stop_job("blocks")


def test_on_node_loss_is_read_checked_and_written() -> None:
    from jobscheduler.config import dump_config, parse_config
    from jobscheduler.errors import ConfigFileError

    text = (
        "jobs:\n"
        "  a: {command: [true], start: 2024-01-01 00:00, interval: 1 minute,"
        " on_node_loss: rerun}\n"
        "  b: {command: [true], start: 2024-01-01 00:00, interval: 1 minute}\n"
    )
    catalog = parse_config(text)
    assert catalog.job("a").on_node_loss == "rerun"
    assert catalog.job("b").on_node_loss == "abandon"
    dumped = dump_config(catalog)
    assert "on_node_loss: rerun" in dumped and dumped.count("on_node_loss") == 1
    with pytest.raises(ConfigFileError) as caught:
        parse_config(text.replace("rerun", "retry"), filename="jobs.yaml")
    assert str(caught.value.problems[0]) == (
        "jobs.yaml:2, job 'a', key 'on_node_loss': on_node_loss must be abandon or rerun, "
        "not 'retry'"
    )


class AwayForWaits(MemoryStateStore):
    """A store whose waited finishes fail as if the database were away; posted ones work
    (a SQL store keeps them and writes them once the database is back)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.waits: list[bool] = []

    def _finish(self, run_id: str, state: RunState, *rest: Any) -> bool:
        wait = rest[-2]  # (…, settle, wait, started)
        self.waits.append(wait)
        if wait:
            raise StoreUnavailableError("the state store is away")
        return super()._finish(run_id, state, *rest)


def test_a_rerun_jobs_finish_is_waited_for_and_posted_when_the_store_is_away(
    clock: FakeClock, made: list[Scheduler]
) -> None:
    """`on_node_loss: rerun`: the finish is committed before the run is reported; with the
    store away, it is posted (kept until written) rather than lost, which would leave the
    run `running`, to be rerun. An `abandon` job's finish is posted as before."""
    store = AwayForWaits(clock)
    s = node(store, made, clock, "a")
    s.add_job(internal("again", "k1", on_node_loss="rerun", start=T0 + timedelta(days=1)))
    s.add_job(internal("once", "k2", start=T0 + timedelta(days=1)))
    s.start()
    s.run_now("again")
    settle(s)
    assert store.waits == [True, False]  # waited for; away: posted
    s.run_now("once")
    settle(s)
    assert store.waits == [True, False, False]
    assert {r.job: r.state for r in store.history()} == {
        "again": RunState.SUCCEEDED,
        "once": RunState.SUCCEEDED,
    }
