"""`pause_after_failures:` counted and paused in the state store (a pause of its own, with
the reason as its note), across restarts and nodes; `resume_after` ends it; resume clears."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import policy_jobs as pj
import pytest
from policy_support import T0, Recorder, internal_job, step_one

from jobscheduler import Event, FakeClock, Job
from jobscheduler.config import load_config
from jobscheduler.model.policies import PauseAfterFailures, Retry
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import MemoryStateStore, StateStore

REASON = "paused after 3 consecutive failures"


def job(name: str, function: str, key: str, **fields: Any) -> Job:
    return internal_job(name, function, key, "60 seconds", **fields)


def step(s: Scheduler, clock: FakeClock, seconds: float = 60) -> None:
    step_one(s, clock, seconds)


def test_three_failures_in_a_row_pause_the_job_and_tell_its_handlers(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    store = MemoryStateStore()
    recorder = Recorder()
    with Scheduler(clock=clock, state=store) as s:
        s.add_job(job("bad", "fail", key, pause_after_failures=3))
        s.add_handler("bad", recorder)
        for _ in range(3):
            step(s, clock)
        assert [x.reason for _, x in recorder.seen][-1] == REASON
        assert [e for e, _ in recorder.seen] == [Event.FAILED] * 3
        assert recorder.seen[0][1].reason != REASON
        assert s.next_run("bad") is None
        pause = store.pause_of("bad")
        assert pause is not None and pause.note == REASON and pause.until is None
        assert pause.node == s.node and pause.paused_at == T0 + timedelta(seconds=180)
        step(s, clock)
        step(s, clock)
        assert len(pj.calls(key)) == 3  # paused: no more runs
        assert s.get_job("bad").enabled  # the definition is untouched
        s.resume_job("bad")
        mark = store.mark("bad")
        assert mark is not None and mark.failures == 0 and store.pause_of("bad") is None
        assert s.next_run("bad") == T0 + timedelta(seconds=360)
        step(s, clock)
        assert len(pj.calls(key)) == 4


def test_a_success_resets_the_count(clock: FakeClock, request: pytest.FixtureRequest) -> None:
    key = request.node.nodeid
    store = MemoryStateStore()
    with Scheduler(clock=clock, state=store) as s:
        # fails twice, then succeeds: never three in a row
        s.add_job(job("flaky", "flaky", key, args={"failures": 2}, pause_after_failures=3))
        for _ in range(4):
            step(s, clock)
        mark = store.mark("flaky")
        assert mark is not None and mark.failures == 0 and store.pause_of("flaky") is None
        assert s.next_run("flaky") is not None


def test_a_run_with_retries_counts_once(clock: FakeClock, request: pytest.FixtureRequest) -> None:
    key = request.node.nodeid
    store = MemoryStateStore()
    retry = Retry(2, backoff=timedelta(seconds=1))
    with Scheduler(clock=clock, state=store) as s:
        s.add_job(job("bad", "fail", key, retry=retry, pause_after_failures=2))
        step(s, clock)
        step(s, clock, 1)  # the retry: the first run's final outcome
        mark = store.mark("bad")
        assert mark is not None and mark.failures == 1 and store.pause_of("bad") is None
        step(s, clock, 59)
        step(s, clock, 1)
        pause = store.pause_of("bad")
        assert pause is not None and pause.note == "paused after 2 consecutive failures"
        assert len(pj.calls(key)) == 4


def _pause_then_restart(
    clock: FakeClock, key: str, state: str | StateStore, path: Path | None = None
) -> None:
    definition = job("bad", "fail", key, pause_after_failures=3)
    first = Scheduler(path, clock=clock, state=state)
    try:
        first.add_job(definition)
        first.start()
        for _ in range(3):
            step(first, clock)
        assert first.next_run("bad") is None
    finally:
        first.shutdown()
    second = Scheduler(path, clock=clock, state=state)
    try:
        if path is None:
            second.add_job(definition)
        assert second.next_run("bad") is None  # still paused, before and after start
        second.start()
        assert second.next_run("bad") is None
        step(second, clock)
        assert len(pj.calls(key)) == 3
        second.resume_job("bad")
        assert second.next_run("bad") is not None
        step(second, clock)
        assert len(pj.calls(key)) == 4
    finally:
        second.shutdown()


def test_the_pause_is_kept_across_a_restart_on_a_shared_store(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    _pause_then_restart(clock, request.node.nodeid, MemoryStateStore())


def test_the_pause_is_kept_in_a_sqlite_store_not_in_the_yaml_file(
    clock: FakeClock, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    path = tmp_path / "jobs.yaml"
    before = None
    url = f"sqlite:///{tmp_path}/jobs.state.db"
    _pause_then_restart(clock, request.node.nodeid, url, path)
    before = path.read_text()
    assert "enabled" not in before and "paused" not in before
    assert load_config(path).job("bad").enabled


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def test_the_command_line_resume_reaches_a_running_scheduler_by_itself(
    clock: FakeClock, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: Any
) -> None:
    from jobscheduler.app.cli import main

    monkeypatch.delenv("JOBSCHEDULER_STATE", raising=False)
    key = request.node.nodeid
    path = tmp_path / "jobs.yaml"
    url = f"sqlite:///{tmp_path}/jobs.state.db"  # where the command line looks by default
    s = Scheduler(path, clock=clock, state=url)
    try:
        s.add_job(job("bad", "fail", key, pause_after_failures=3))
        s.start()
        for _ in range(3):
            step(s, clock)
        assert s.next_run("bad") is None
        assert main(["resume", str(path), "bad"]) == 0
        assert s.state_store.pause_of("bad") is None
        # No reload: the node follows (SQLite: it polls the store, every second of its clock).
        wait_for(lambda: s.next_run("bad") is not None, clock)
        step(s, clock)
        assert len(pj.calls(key)) == 4
    finally:
        s.shutdown()


def wait_for(condition: Any, clock: FakeClock | None = None, timeout: float = 30) -> None:
    """Poll `condition` (a thread of the scheduler's acts on its own) until true; with
    `clock`, moving it on by 0.1 s a poll (a node polling the store waits on it)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        if clock is not None:
            clock.advance(timedelta(milliseconds=100))
        time.sleep(0.01)


def test_resume_after_ends_the_pause_by_itself(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    store = MemoryStateStore()
    policy = PauseAfterFailures(2, resume_after=timedelta(minutes=5))
    with Scheduler(clock=clock, state=store) as s:
        s.add_job(job("bad", "fail", key, pause_after_failures=policy))
        step(s, clock)
        step(s, clock)  # 120 s: the second failure pauses it, for 5 minutes
        pause = store.pause_of("bad")
        assert pause is not None and pause.until == T0 + timedelta(seconds=420)
        assert pause.note == "paused after 2 consecutive failures"
        for _ in range(4):
            step(s, clock)  # 360 s: still paused
        assert len(pj.calls(key)) == 2 and s.next_run("bad") is None
        step(s, clock)  # 420 s: the cool-down is over, on its own
        wait_for(lambda: s.next_run("bad") is not None)
        assert s.pause_of("bad") is None
        step(s, clock)
        step(s, clock)  # two more failures: paused again, counted afresh
        assert len(pj.calls(key)) == 4
        wait_for(lambda: s.next_run("bad") is None)
        pause = store.pause_of("bad")
        assert pause is not None and pause.until is not None and pause.until > clock.now()


def test_a_pause_made_by_another_node_stops_the_next_run_here(
    clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    store = MemoryStateStore()
    with Scheduler(clock=clock, state=store, node="here") as s:
        s.add_job(job("bad", "fail", key, pause_after_failures=3))
        step(s, clock)
        # Another node counted the job's third failure this moment: its pause is in the
        # store before this node has followed it; the claim's check drops the run.
        store.pause(["bad"], node="there", paused_at=clock.now(), note=REASON)
        step(s, clock)
        assert len(pj.calls(key)) == 1
        assert s.history("bad")[0].state.value != "running"
        pause = s.pause_of("bad")
        assert pause is not None and pause.node == "there"


def test_the_yaml_file_is_byte_identical_after_pauses(
    clock: FakeClock, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(
        "# my jobs, with comments\njobs:\n  bad:   # odd spacing kept\n"
        "    type: external\n    command: ['false']\n    start: 2024-01-01 00:00:00\n"
        "    interval: 1 minute\n    pause_after_failures: {failures: 1, resume_after: 1m}\n"
    )
    before = path.read_bytes()
    with Scheduler(path, clock=clock, state=f"sqlite:///{tmp_path}/s.db") as s:
        s.pause_job("bad", note="x")
        s.resume_job("bad")
        s.pause_all(until=clock.now() + timedelta(hours=1))
        s.resume_all()
    assert path.read_bytes() == before
