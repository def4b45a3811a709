"""The Scheduler facade on a FakeClock: definitions, persistence, life cycle, handlers."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jobs_for_tests as jft
import pytest

from jobscheduler import (
    Dependence,
    DuplicateNameError,
    Event,
    Execution,
    FakeClock,
    InvalidJobError,
    Job,
    JobActionError,
    JobGroup,
    JobType,
    UnknownNameError,
)
from jobscheduler.config import load_config
from jobscheduler.events.dispatch import HandlerRegistry
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import RunState

T0 = datetime(2024, 1, 1, tzinfo=UTC)
WAIT = 10.0


def internal(name: str, key: str, **fields: Any) -> Job:
    """An internal job that records each run under `key` in jobs_for_tests."""
    if "dependence" not in fields:
        fields.setdefault("start", T0 + timedelta(seconds=60))
        fields.setdefault("interval", "60 seconds")
    return Job(
        name,
        type=JobType.INTERNAL,
        command=f"{jft.__name__}:add",
        args={"key": key},
        timezone="UTC",
        **fields,
    )


def failing(name: str, **fields: Any) -> Job:
    if "dependence" not in fields:
        fields.setdefault("start", T0 + timedelta(seconds=60))
        fields.setdefault("interval", "60 seconds")
    return Job(
        name, type=JobType.INTERNAL, command=f"{jft.__name__}:explode", timezone="UTC", **fields
    )


class Recorder:
    """An EventHandler that remembers (job name, event, execution)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Event, Execution]] = []
        self.lock = threading.Lock()

    def handle(self, job: Job, event: Event, execution: Execution) -> None:
        with self.lock:
            self.seen.append((job.name, event, execution))

    def events(self) -> list[tuple[str, Event]]:
        with self.lock:
            return [(name, event) for name, event, _ in self.seen]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def key(request: pytest.FixtureRequest, suffix: str = "") -> str:
    return f"{request.node.nodeid}{suffix}"


def settle(s: Scheduler) -> None:
    assert s.wait_idle(WAIT)


def step(s: Scheduler, clock: FakeClock, seconds: float) -> None:
    clock.advance(timedelta(seconds=seconds))
    settle(s)


def outcomes(s: Scheduler, name: str | None = None) -> list[tuple[str, RunState]]:
    """(job, state) of the runs kept, oldest first."""
    return [(r.job, r.state) for r in reversed(s.history(name))]


# -- schedule and definitions -----------------------------------------------------------------


def test_runs_on_its_slots_and_reports_next_run(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    k = key(request)
    scheduler.add_job(internal("tick", k))
    assert scheduler.next_run("tick") == T0 + timedelta(seconds=60)
    scheduler.start()
    step(scheduler, clock, 59)
    assert jft.calls(k) == []
    step(scheduler, clock, 1)
    assert len(jft.calls(k)) == 1
    assert scheduler.next_run("tick") == T0 + timedelta(seconds=120)
    step(scheduler, clock, 60)
    assert len(jft.calls(k)) == 2
    [second, first] = scheduler.history("tick")  # newest first
    assert first.slot == T0 + timedelta(seconds=60)
    assert second.slot == T0 + timedelta(seconds=120)
    assert first.state is RunState.SUCCEEDED


def test_duplicate_unknown_and_invalid_are_refused(scheduler: Scheduler) -> None:
    scheduler.add_job(internal("a", "x"))
    with pytest.raises(DuplicateNameError, match="'a'"):
        scheduler.add_job(internal("a", "x"))
    with pytest.raises(UnknownNameError):
        scheduler.modify_job(internal("nope", "x"))
    with pytest.raises(UnknownNameError):
        scheduler.remove_job("nope")
    with pytest.raises(UnknownNameError):
        scheduler.run_now("nope")
    with pytest.raises(InvalidJobError, match="unknown job 'ghost'"):
        scheduler.add_job(internal("b", "x", dependence=Dependence("ghost")))
    assert [j.name for j in scheduler.jobs] == ["a"]


def test_remove_refused_while_depended_on_or_alone_in_a_group(scheduler: Scheduler) -> None:
    scheduler.add_jobs([internal("a", "x"), internal("b", "y", dependence=Dependence("a"))])
    scheduler.add_group(JobGroup("g", ["a"]))
    with pytest.raises(JobActionError, match="'b'") as info:
        scheduler.remove_job("a")
    assert "'g'" in str(info.value)
    scheduler.remove_job("b")
    scheduler.remove_group("g")
    scheduler.remove_job("a")
    assert scheduler.jobs == []


def test_modify_reschedules_and_remove_unschedules(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    k = key(request)
    scheduler.add_job(internal("j", k))
    scheduler.start()
    scheduler.modify_job(internal("j", k, start=T0 + timedelta(seconds=30), interval="30 seconds"))
    assert scheduler.next_run("j") == T0 + timedelta(seconds=30)
    step(scheduler, clock, 30)
    assert len(jft.calls(k)) == 1
    scheduler.remove_job("j")
    step(scheduler, clock, 120)
    assert len(jft.calls(k)) == 1
    with pytest.raises(UnknownNameError):
        scheduler.next_run("j")


def test_pause_and_resume_persist_in_the_store_not_the_file(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "jobs.yaml"
    with Scheduler(path, clock=clock) as s:
        s.add_job(internal("p", "unused"))
        before = path.read_bytes()
        s.pause_job("p", note="deploy", until=T0 + timedelta(hours=1))
        assert s.next_run("p") is None
        assert path.read_bytes() == before  # byte for byte
        pause = s.pause_of("p")
        assert pause is not None and pause.node == s.node and pause.note == "deploy"
        assert pause.paused_at == T0 and pause.until == T0 + timedelta(hours=1)
    with Scheduler(path, clock=clock) as s:  # a restart finds it paused
        assert s.next_run("p") is None and s.get_job("p").enabled
        s.resume_job("p")
        assert s.pause_of("p") is None
        assert s.next_run("p") == T0 + timedelta(seconds=60)
        assert path.read_bytes() == before


def test_bad_pauses_are_refused(scheduler: Scheduler, clock: FakeClock) -> None:
    scheduler.add_job(internal("p", "unused"))
    with pytest.raises(ValueError, match="aware"):
        scheduler.pause_job("p", until=datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="has passed"):
        scheduler.pause_job("p", until=T0 - timedelta(seconds=1))
    with pytest.raises(TypeError, match="note"):
        scheduler.pause_job("p", note=5)  # type: ignore[arg-type]
    with pytest.raises(UnknownNameError):
        scheduler.pause_job("nosuch")
    assert scheduler.pause_of("p") is None


def test_paused_job_does_not_run(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    k = key(request)
    scheduler.add_job(internal("p", k))
    scheduler.pause_job("p")
    scheduler.start()
    step(scheduler, clock, 300)
    assert jft.calls(k) == []
    assert scheduler.history("p") == []  # its slots are not recorded one by one
    scheduler.resume_job("p")
    assert scheduler.next_run("p") == T0 + timedelta(seconds=360)
    step(scheduler, clock, 60)
    assert len(jft.calls(k)) == 1


def test_a_disabled_job_is_not_a_paused_one(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    k = key(request)
    scheduler.add_job(internal("p", k, enabled=False))
    scheduler.start()
    scheduler.resume_job("p")  # no pause to end: still disabled (a definition)
    step(scheduler, clock, 120)
    assert jft.calls(k) == [] and scheduler.next_run("p") is None


def test_a_pause_for_a_while_ends_by_itself(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    k = key(request)
    scheduler.add_job(internal("p", k))
    scheduler.add_job(internal("q", k + "q"))
    scheduler.start()
    scheduler.pause_all(note="maintenance", until=T0 + timedelta(seconds=150))
    assert scheduler.pause_of("q") is not None
    step(scheduler, clock, 120)
    assert jft.calls(k) == []
    step(scheduler, clock, 60)  # 180 s: the pause ended at 150 s, on its own
    deadline = time.monotonic() + 30
    while scheduler.next_run("q") is None and time.monotonic() < deadline:
        time.sleep(0.01)  # the follower's thread hands them back to the engine
    assert scheduler.pause_of("p") is None
    assert scheduler.next_run("p") == T0 + timedelta(seconds=240)
    step(scheduler, clock, 60)
    assert len(jft.calls(k)) == 1 and len(jft.calls(k + "q")) == 1
    scheduler.pause_all()
    assert sorted(scheduler.resume_all()) == ["p", "q"]


def test_no_make_up_after_stop_and_start(
    tmp_path: Path, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    k = key(request)
    s = Scheduler(tmp_path / "jobs.yaml", clock=clock)
    try:
        s.add_job(internal("j", k))
        s.start()
        step(s, clock, 60)
        s.stop()
        clock.advance(timedelta(seconds=600))  # 10 slots missed while stopped
        s.start()
        settle(s)
        assert len(jft.calls(k)) == 1
        assert s.next_run("j") == T0 + timedelta(seconds=720)
    finally:
        s.shutdown(wait=False)


def test_stop_then_start_rereads_the_file(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "jobs.yaml"
    s = Scheduler(path, clock=clock)
    try:
        s.add_job(internal("j", "unused"))
        s.start()
        s.stop()
        text = path.read_text()
        path.write_text(text.replace("60 seconds", "2 minutes"))
        s.start()
        assert str(s.get_job("j").interval) == "2 minutes"
    finally:
        s.shutdown(wait=False)


def test_reload_applies_edits_and_keeps_old_on_bad_file(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "jobs.yaml"
    s = Scheduler(path, clock=clock)
    try:
        s.add_jobs([internal("a", "unused"), internal("b", "unused")])
        s.start()
        other = Scheduler(path, clock=clock)  # another process's edit, through the same store
        other.remove_job("b")
        other.add_job(internal("c", "unused", start=T0 + timedelta(seconds=10)))
        s.reload()
        assert [j.name for j in s.jobs] == ["a", "c"]
        assert s.next_run("c") == T0 + timedelta(seconds=10)
        path.write_text(path.read_text() + "\nbogus_key: 1\n")
        with pytest.raises(JobActionError, match="bogus_key"):
            s.reload()
        assert [j.name for j in s.jobs] == ["a", "c"]
    finally:
        s.shutdown(wait=False)


def test_in_memory_scheduler_writes_no_file(
    scheduler: Scheduler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    scheduler.add_job(internal("a", "x"))
    assert scheduler.config_path is None
    assert list(tmp_path.iterdir()) == []


# -- runs, handlers, audit ----------------------------------------------------------------------


def test_every_run_fires_one_event_to_job_and_group_handlers(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    scheduler.add_jobs([internal("ok", key(request)), failing("bad")])
    scheduler.add_group(JobGroup("both", ["ok", "bad"]))
    scheduler.add_group(JobGroup("just-bad", ["bad"]))
    job_handler, group_handler, bad_group = Recorder(), Recorder(), Recorder()
    scheduler.add_handler("ok", job_handler)
    scheduler.add_handler("both", group_handler)
    scheduler.add_handler("just-bad", bad_group)
    scheduler.start()
    step(scheduler, clock, 60)
    assert job_handler.events() == [("ok", Event.SUCCESSFUL)]
    assert sorted(group_handler.events()) == [("bad", Event.FAILED), ("ok", Event.SUCCESSFUL)]
    assert bad_group.events() == [("bad", Event.FAILED)]
    [(_, _, execution)] = [s for s in bad_group.seen]
    assert "KeyError" in (execution.error or "")


def test_a_raising_handler_harms_no_one(
    scheduler: Scheduler,
    clock: FakeClock,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Raises:
        def handle(self, job: Job, event: Event, execution: Execution) -> None:
            raise RuntimeError("handler bug")

    recorder = Recorder()
    scheduler.add_job(internal("j", key(request)))
    scheduler.add_handler("j", Raises())
    scheduler.add_handler("j", recorder)
    scheduler.start()
    with caplog.at_level(logging.ERROR, logger="jobscheduler.events"):
        step(scheduler, clock, 60)
        step(scheduler, clock, 60)
    assert recorder.events() == [("j", Event.SUCCESSFUL)] * 2
    assert "handler bug" in caplog.text


def test_handlers_can_be_removed_and_need_a_known_name(scheduler: Scheduler) -> None:
    scheduler.add_job(internal("j", "x"))
    recorder = Recorder()
    with pytest.raises(UnknownNameError):
        scheduler.add_handler("ghost", recorder)
    scheduler.add_handler("j", recorder)
    assert scheduler.handlers("j") == [recorder]
    scheduler.remove_handler("j", recorder)
    assert scheduler.handlers("j") == []
    with pytest.raises(UnknownNameError):
        scheduler.remove_handler("j", recorder)


def test_audit_line_for_each_run(
    scheduler: Scheduler,
    clock: FakeClock,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    scheduler.add_jobs([internal("ok", key(request)), failing("bad")])
    scheduler.start()
    with caplog.at_level(logging.INFO, logger="jobscheduler.audit"):
        step(scheduler, clock, 60)
    lines = sorted(r.getMessage() for r in caplog.records if r.name == "jobscheduler.audit")
    stamp = (T0 + timedelta(seconds=60)).isoformat(timespec="seconds")
    assert lines == [
        f"bad : {stamp} : {stamp} : normal : FAILED (raised KeyError)",
        f"ok : {stamp} : {stamp} : normal : SUCCESSFUL",
    ]


def test_run_now_runs_outside_the_schedule(
    scheduler: Scheduler, request: pytest.FixtureRequest
) -> None:
    k = key(request)
    scheduler.add_job(internal("j", k))
    scheduler.start()
    scheduler.run_now("j")
    settle(scheduler)
    [run] = scheduler.history("j")
    assert run.trigger == "run_now"
    assert run.slot is None
    assert scheduler.next_run("j") == T0 + timedelta(seconds=60)


def test_history_is_bounded_and_filtered(clock: FakeClock, request: pytest.FixtureRequest) -> None:
    s = Scheduler(clock=clock, history_limit=3)
    try:
        s.add_jobs([internal("a", key(request)), failing("b")])
        s.start()
        runs_of_b = []
        for _ in range(4):
            step(s, clock, 60)
            runs_of_b.append(s.history("b")[0].run_id)
        kept = s.history()
        assert len(kept) == 3  # of 8 runs
        # Newest first; the job holding the most gives up its oldest, so both keep their last.
        assert [r.started for r in kept] == sorted((r.started for r in kept), reverse=True)
        assert {r.job for r in kept} == {"a", "b"}
        assert s.history("b")[0].run_id == runs_of_b[-1]
        assert s.history("b")[0].state is RunState.FAILED
        assert len(s.history(limit=1)) == 1
        assert s.history(since=clock.now()) == [r for r in kept if r.started == clock.now()]
    finally:
        s.shutdown(wait=False)


def test_context_manager_starts_and_shuts_down(clock: FakeClock) -> None:
    with Scheduler(clock=clock) as s:
        assert s.running
    assert not s.running
    with pytest.raises(RuntimeError, match="shut down"):
        s.start()


def test_max_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_workers"):
        Scheduler(max_workers=0)


def test_history_of_a_removed_job_is_still_found(
    scheduler: Scheduler, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    scheduler.add_job(internal("gone", key(request)))
    scheduler.start()
    step(scheduler, clock, 60)
    scheduler.remove_job("gone")
    assert [r.job for r in scheduler.history("gone")] == ["gone"]
    assert scheduler.history("never-existed") == []


def test_set_email_persists_and_enables_messages(tmp_path: Path, clock: FakeClock) -> None:
    from jobscheduler import EmailConfiguration, Message

    path = tmp_path / "jobs.yaml"
    s = Scheduler(path, clock=clock)
    try:
        alert = {Event.FAILED: Message(("ops@example.com",))}
        with pytest.raises(JobActionError, match="email"):
            s.add_job(internal("j", "unused", messages=alert))
        s.set_email(EmailConfiguration("scheduler@example.com"))
        s.add_job(internal("j", "unused", messages=alert))
        loaded = load_config(path)
        assert loaded.email is not None
        assert loaded.email.from_address == "scheduler@example.com"
        assert loaded.job("j").messages[Event.FAILED].recipients == ("ops@example.com",)
    finally:
        s.shutdown(wait=False)


def test_reload_of_a_missing_file_keeps_the_jobs(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "jobs.yaml"
    s = Scheduler(path, clock=clock)
    try:
        s.add_job(internal("a", "unused"))
        s.start()
        path.unlink()
        with pytest.raises(JobActionError, match="missing"):
            s.reload()
        assert [j.name for j in s.jobs] == ["a"]
    finally:
        s.shutdown(wait=False)


def test_documented_call_shapes_are_accepted() -> None:
    """Lists, interval text and seconds, as DESIGN.md writes them, are normalised."""
    job = Job("j", command=["echo", "hi"], start=T0, interval="1 day", timeout=2.5, kill_grace=1)
    assert job.command == ("echo", "hi")
    assert str(job.interval) == "1 day"
    assert job.timeout == timedelta(seconds=2.5)
    assert job.kill_grace == timedelta(seconds=1)
    group = JobGroup("g", ["j"])
    assert group.job_names == ("j",)
    assert Dependence("j", "failed", timedelta(seconds=0.5)).event is Event.FAILED


def test_handlers_are_dispatched_only_when_someone_listens(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = HandlerRegistry(1)
    j = failing("j")
    execution = Execution("j", "r1", None, T0, T0, Event.FAILED)
    registry.dispatch(j, Event.FAILED, execution, ["j", "group"])
    assert registry._pool is None  # nobody listens: no thread, no task
    heard: list[Execution] = []

    class Handler:
        def handle(self, job: Job, event: Event, e: Execution) -> None:
            heard.append(e)

    registry.add("group", Handler())
    registry.dispatch(j, Event.FAILED, execution, ["j", "group"])
    assert registry.join(WAIT) and heard == [execution]
    registry.close()
    with caplog.at_level(logging.WARNING, "jobscheduler.events"):
        registry.dispatch(j, Event.FAILED, execution, ["j"])
    assert "after shutdown: handlers not called" in caplog.text
    assert heard == [execution]


def test_stop_job_reaches_the_run_of_a_removed_job(scheduler: Scheduler, clock: FakeClock) -> None:
    """DESIGN: removing a job never cuts its running run short; stop_job(name) still reaches
    that run. A real process: it must be gone after the stop."""
    import os
    import time

    scheduler.add_job(
        Job(
            "sleeper",
            command=["sleep", "30"],
            start=T0 + timedelta(days=1),
            interval="1 day",
            timezone="UTC",
        )
    )
    scheduler.start()
    scheduler.run_now("sleeper")
    deadline = time.monotonic() + WAIT
    while not [e for e in scheduler.executing if e.pid is not None]:
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.02)
    [running] = scheduler.executing
    scheduler.remove_job("sleeper")
    assert [e.job_name for e in scheduler.executing] == ["sleeper"]  # not cut short
    assert scheduler.stop_job("sleeper") == 1
    settle(scheduler)
    [done] = scheduler.history("sleeper")
    assert (done.state, done.reason) == ("failed", "stopped")
    assert running.pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(running.pid, 0)
    with pytest.raises(UnknownNameError):  # unknown, and nothing of that name runs
        scheduler.stop_job("sleeper")
    with pytest.raises(UnknownNameError):
        scheduler.stop_job("never-existed")
