"""`pause_after_failures:` paused in the state store's marks, across restarts; resume clears."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import policy_jobs as pj
import pytest
from policy_support import T0, Recorder, internal_job, step_one

from jobscheduler import Event, FakeClock, Job
from jobscheduler.config import load_config
from jobscheduler.model.policies import Retry
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
        mark = store.mark("bad")
        assert mark is not None and mark.failures == 3 and mark.paused_reason == REASON
        step(s, clock)
        step(s, clock)
        assert len(pj.calls(key)) == 3  # paused: no more runs
        assert s.get_job("bad").enabled  # the definition is untouched
        s.resume_job("bad")
        mark = store.mark("bad")
        assert mark is not None and mark.failures == 0 and mark.paused_reason is None
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
        assert mark is not None and mark.failures == 0 and mark.paused_reason is None
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
        assert mark is not None and mark.failures == 1 and mark.paused_reason is None
        step(s, clock, 59)
        step(s, clock, 1)
        mark = store.mark("bad")
        assert mark is not None and mark.paused_reason == "paused after 2 consecutive failures"
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


def test_the_command_line_resume_clears_the_pause_a_daemon_takes_up_on_reload(
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
        mark = s.state_store.mark("bad")
        assert mark is not None and mark.paused_reason is None and mark.failures == 0
        s.reload()  # SIGHUP in the daemon
        assert s.next_run("bad") is not None
        step(s, clock)
        assert len(pj.calls(key)) == 4
    finally:
        s.shutdown()
