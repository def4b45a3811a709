"""Internal runs: classes of each protocol, functions, exceptions, import failures, stopping.

Timeouts run on a FakeClock: the test moves time, the runner's watchdog fires.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jobs_for_tests as jobs
import pytest

from jobscheduler.clock import FakeClock, SystemClock
from jobscheduler.model.event import Event
from jobscheduler.model.execution import Execution, SchedulerResult
from jobscheduler.model.job import Job, JobType
from jobscheduler.model.protocols import Schedulable, ScheduledEnable
from jobscheduler.runners.context import Outcome
from jobscheduler.runners.internal import is_scheduled_enable, judge_status
from jobscheduler.runners.runner import RunContext, Runner
from jobscheduler.triggers.interval import Interval

START = datetime(2024, 1, 1, tzinfo=UTC)
M = jobs.__name__
WAIT = 10.0  # real seconds a test waits for another thread before it fails


def job(name: str, **fields: Any) -> Job:
    command = f"{M}:{name}" if ":" not in name else name
    return Job(
        "int",
        type=JobType.INTERNAL,
        command=command,
        start=START,
        interval=Interval.parse("1 hour"),
        **fields,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def runner(clock: FakeClock) -> Iterator[Runner]:
    with Runner(clock) as r:
        yield r


def run(runner: Runner, j: Job) -> Execution:
    return runner.execute(j, RunContext(j, "run-1", None))


def in_thread(runner: Runner, j: Job, ctx: RunContext) -> tuple[threading.Thread, list[Execution]]:
    results: list[Execution] = []
    thread = threading.Thread(target=lambda: results.append(runner.execute(j, ctx)), daemon=True)
    thread.start()
    return thread, results


def advance_until_done(clock: FakeClock, thread: threading.Thread, step: float) -> None:
    """Move the clock by `step` until `thread` ends (the watchdog may be mid-wait)."""
    for _ in range(int(WAIT / 0.01)):
        thread.join(0.01)
        if not thread.is_alive():
            return
        clock.advance(step)
    raise AssertionError("the run did not end")


# -- the protocols --------------------------------------------------------------------------


def test_protocols_are_runtime_checkable() -> None:
    assert isinstance(jobs.Succeeds(), Schedulable)
    assert not isinstance(jobs.Succeeds(), ScheduledEnable)
    assert isinstance(jobs.Reports(), ScheduledEnable) and isinstance(jobs.Reports(), Schedulable)
    assert not isinstance(jobs.NoRun(), Schedulable)


def test_scheduled_enable_is_detected_without_running_properties() -> None:
    assert is_scheduled_enable(jobs.BrokenReport())  # its properties raise when read
    assert is_scheduled_enable(jobs.OddData())
    assert not is_scheduled_enable(jobs.Succeeds())


# -- Schedulable ----------------------------------------------------------------------------


def test_schedulable_success(runner: Runner) -> None:
    e = run(runner, job("Succeeds", args={"key": "ok-1"}))
    assert (e.event, e.result, e.reason, e.error) == (
        Event.SUCCESSFUL,
        SchedulerResult.NORMAL,
        None,
        None,
    )
    assert jobs.instance("ok-1").runs == 1 and jobs.instance("ok-1").stops == 0
    assert e.exit_code is None and e.pid is None and e.running_status is None


def test_each_run_gets_a_new_instance(runner: Runner) -> None:
    j = job("Succeeds", args={"key": "fresh"})
    run(runner, j)
    first = jobs.instance("fresh")
    run(runner, j)
    assert jobs.instance("fresh") is not first and first.runs == 1


def test_run_happens_in_the_callers_thread(runner: Runner) -> None:
    j = job("add", args={"key": "thread-check"})
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(run(runner, j).reason or "ok"), name="w1")
    thread.start()
    thread.join(WAIT)
    assert seen == ["ok"]


def test_schedulable_raising(runner: Runner, caplog: pytest.LogCaptureFixture) -> None:
    e = run(runner, job("Fails", args={"message": "disk on fire"}))
    assert (e.event, e.result) == (Event.FAILED, SchedulerResult.NORMAL)
    assert e.reason == "raised ValueError"
    assert e.error == "ValueError: disk on fire"
    assert "disk on fire" in caplog.text


def test_system_exit_is_a_failure(runner: Runner) -> None:
    e = run(runner, job("Exits", args={"code": 5}))
    assert (e.event, e.reason, e.error) == (Event.FAILED, "raised SystemExit", "SystemExit: 5")


def test_nested_class(runner: Runner) -> None:
    e = run(runner, job("Outer.Inner", args={"key": "nested"}))
    assert e.event is Event.SUCCESSFUL and jobs.calls("nested") == [{"event": "inner"}]


# -- constructor arguments ------------------------------------------------------------------


def test_constructor_args(runner: Runner) -> None:
    e = run(runner, job("NeedsArgs", args={"count": 3, "label": "x", "key": "args-1"}))
    assert e.event is Event.SUCCESSFUL
    assert jobs.calls("args-1") == [{"count": 3, "label": "x"}]


def test_missing_constructor_args(runner: Runner) -> None:
    e = run(runner, job("NeedsArgs"))
    assert (e.event, e.result) == (Event.NOT_STARTED, SchedulerResult.ABNORMAL)
    assert e.reason is not None and e.reason.startswith(f"cannot create {M}:NeedsArgs: TypeError:")
    assert "count" in e.reason


def test_unknown_constructor_args(runner: Runner) -> None:
    e = run(runner, job("Succeeds", args={"colour": "red"}))
    assert e.event is Event.NOT_STARTED and "colour" in (e.reason or "")


def test_constructor_raising(runner: Runner) -> None:
    e = run(runner, job("BadConstructor"))
    assert (e.event, e.result) == (Event.NOT_STARTED, SchedulerResult.ABNORMAL)
    assert e.reason == f"cannot create {M}:BadConstructor: OSError: no database"
    assert e.error == "OSError: no database"


def test_class_without_run(runner: Runner) -> None:
    e = run(runner, job("NoRun"))
    assert (e.event, e.reason) == (Event.NOT_STARTED, f"{M}:NoRun has no run() method")


# -- import failures ------------------------------------------------------------------------


def test_module_not_found(runner: Runner) -> None:
    e = run(runner, job("no_such_module_4f1c.sub:Job"))
    assert (e.event, e.result) == (Event.NOT_STARTED, SchedulerResult.ABNORMAL)
    assert e.reason == (
        "cannot import no_such_module_4f1c.sub: "
        "ModuleNotFoundError: No module named 'no_such_module_4f1c'"
    )


def test_attribute_not_found(runner: Runner) -> None:
    e = run(runner, job("Missing"))
    assert (e.event, e.reason) == (Event.NOT_STARTED, f"{M} has no attribute 'Missing'")
    e = run(runner, job("Outer.Missing"))
    assert e.reason == f"{M} has no attribute 'Outer.Missing'"


def test_module_raising_on_import(
    runner: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_jobs_4f1c.py").write_text("raise RuntimeError('bad module')\n")
    (tmp_path / "syntax_jobs_4f1c.py").write_text("def (:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    e = run(runner, job("broken_jobs_4f1c:Job"))
    assert (e.event, e.reason) == (
        Event.NOT_STARTED,
        "cannot import broken_jobs_4f1c: RuntimeError: bad module",
    )
    e = run(runner, job("syntax_jobs_4f1c:Job"))
    assert e.event is Event.NOT_STARTED and "SyntaxError" in (e.reason or "")
    for name in ("broken_jobs_4f1c", "syntax_jobs_4f1c"):
        sys.modules.pop(name, None)


def test_the_target_is_looked_up_on_every_run(
    runner: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing stale is kept between runs: a patched attribute, a module dropped from
    sys.modules and imported again, a module that appears later are all seen at once."""
    monkeypatch.setattr(jobs, "add", lambda **_: jobs._record("patched", seen=True))
    assert run(runner, job("add")).event is Event.SUCCESSFUL
    assert jobs.calls("patched") == [{"seen": True}]
    monkeypatch.undo()
    assert run(runner, job("add", args={"key": "fn-2"})).event is Event.SUCCESSFUL
    assert jobs.calls("fn-2") == [{"total": 3}]

    monkeypatch.syspath_prepend(str(tmp_path))
    assert run(runner, job("later_jobs_4f1c:go")).event is Event.NOT_STARTED
    sys.modules.pop("later_jobs_4f1c", None)
    (tmp_path / "later_jobs_4f1c.py").write_text("def go():\n    return 1\n")
    importlib.invalidate_caches()  # the import system's own cache of the directory
    assert run(runner, job("later_jobs_4f1c:go")).event is Event.SUCCESSFUL
    sys.modules.pop("later_jobs_4f1c")
    (tmp_path / "later_jobs_4f1c.py").write_text("def other():\n    return 1\n")
    importlib.invalidate_caches()
    e = run(runner, job("later_jobs_4f1c:go"))
    assert (e.event, e.reason) == (Event.NOT_STARTED, "later_jobs_4f1c has no attribute 'go'")
    sys.modules.pop("later_jobs_4f1c", None)


def test_an_outcome_carries_every_other_field_of_an_execution() -> None:
    """The runner writes an Execution as its identity fields plus the outcome's fields."""
    identity = {"job_name", "run_id", "slot", "started", "ended", "trigger", "attempt"}
    outcome = {f.name for f in dataclasses.fields(Outcome)}
    assert identity | outcome == {f.name for f in dataclasses.fields(Execution)}
    assert not identity & outcome


def test_not_callable(runner: Runner) -> None:
    e = run(runner, job("NOT_CALLABLE"))
    assert (e.event, e.reason) == (
        Event.NOT_STARTED,
        f"{M}:NOT_CALLABLE is not a class or a function",
    )


# -- functions ------------------------------------------------------------------------------


def test_plain_function_with_args(runner: Runner) -> None:
    e = run(runner, job("add", args={"a": 40, "b": 2, "key": "fn-1"}))
    assert (e.event, e.result, e.reason) == (Event.SUCCESSFUL, SchedulerResult.NORMAL, None)
    assert jobs.calls("fn-1") == [{"total": 42}]


def test_plain_function_raising(runner: Runner) -> None:
    e = run(runner, job("explode"))
    assert (e.event, e.result, e.reason, e.error) == (
        Event.FAILED,
        SchedulerResult.NORMAL,
        "raised KeyError",
        "KeyError: 'kaboom'",
    )


def test_function_with_wrong_args_fails(runner: Runner) -> None:
    e = run(runner, job("add", args={"c": 1}))
    assert (e.event, e.reason) == (Event.FAILED, "raised TypeError")


def test_a_function_cannot_be_stopped_but_its_timeout_counts(
    runner: Runner, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    j = job("wait_for", args={"key": "fn-stop"}, timeout=5)
    ctx = RunContext(j, "run-1", None)
    thread, results = in_thread(runner, j, ctx)
    assert jobs.event("fn-stop:started").wait(WAIT)
    while ctx.stop_reason is None:
        clock.advance(5)
        jobs.event("never").wait(0.01)
    assert thread.is_alive()  # stopping a function is impossible: it runs on
    jobs.event("fn-stop").set()
    thread.join(WAIT)
    [e] = results
    assert (e.event, e.result, e.reason) == (Event.FAILED, SchedulerResult.ABNORMAL, "timed out")
    assert "cannot be stopped" in caplog.text


def test_a_stopped_function_that_returns_within_kill_grace_is_not_given_up(
    runner: Runner, clock: FakeClock
) -> None:
    j = job("wait_for", args={"key": "fn-grace"}, timeout=5, kill_grace=30)
    ctx = RunContext(j, "run-1", None)
    thread, results = in_thread(runner, j, ctx)
    assert jobs.event("fn-grace:started").wait(WAIT)
    while ctx.stop_reason is None:
        clock.advance(5)
        jobs.event("never").wait(0.01)
    jobs.event("fn-grace").set()  # returns within its kill_grace
    thread.join(WAIT)
    assert not thread.is_alive()
    clock.advance(60)  # past the kill_grace: the give-up, had it been kept, would fire now
    jobs.event("never").wait(0.05)
    [e] = results
    assert (e.event, e.reason) == (Event.FAILED, "timed out")
    assert ctx.snapshot() is e  # the final Execution is the run's own, not a given-up one


def test_a_stop_after_a_function_returned_gives_nothing_up(runner: Runner) -> None:
    from jobscheduler.runners.internal import Abandon

    j = job("add", args={"key": "late-stop"})
    ctx = RunContext(j, "run-1", None)
    e = runner.execute(j, ctx)
    assert e.event is Event.SUCCESSFUL and ctx.settled
    abandon = Abandon(j, ctx, runner)
    abandon.stopped()  # a stop whose stopper was read just before the run settled
    assert runner.watchdog is None  # no give-up scheduled: no watchdog was needed


def test_async_functions_are_told_from_plain_ones() -> None:
    import functools

    from jobscheduler.runners.internal import is_async

    async def coroutine() -> None: ...

    def plain() -> None: ...

    def marked() -> None: ...

    marked.note = "an attribute"  # type: ignore[attr-defined]
    assert is_async(coroutine) and not is_async(plain) and not is_async(marked)
    assert is_async(functools.partial(coroutine)) and not is_async(functools.partial(plain))


# -- ScheduledEnable ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "event", "reason"),
    [
        ("successful", Event.SUCCESSFUL, None),
        ("SUCCESSFUL", Event.SUCCESSFUL, None),
        (" Successful ", Event.SUCCESSFUL, None),
        ("failed", Event.FAILED, "job reported failed"),
        ("Failed", Event.FAILED, "job reported failed"),
        ("not started", Event.NOT_STARTED, "job reported not started"),
        ("NotStarted", Event.NOT_STARTED, "job reported not started"),
        ("disk full", Event.FAILED, "disk full"),
        ("both", Event.FAILED, "both"),
        ("", Event.FAILED, "no running status"),
        (None, Event.FAILED, "no running status"),
    ],
)
def test_running_status(
    runner: Runner, status: str | None, event: Event, reason: str | None
) -> None:
    assert judge_status(status) == (event, reason)
    e = run(runner, job("Reports", args={"status": status}))
    assert (e.event, e.result, e.reason) == (event, SchedulerResult.NORMAL, reason)
    assert e.running_status == status


def test_message_data_is_copied(runner: Runner) -> None:
    data = {"rows": 12, "table": "orders"}
    e = run(runner, job("Reports", args={"data": data}))
    assert e.event is Event.SUCCESSFUL and dict(e.message_data) == data
    data["rows"] = 0
    assert e.message_data["rows"] == 12
    with pytest.raises(TypeError):
        e.message_data["rows"] = 1  # type: ignore[index]


def test_message_data_none_or_not_a_mapping(
    runner: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    assert dict(run(runner, job("Reports", args={"data": None})).message_data) == {}
    e = run(runner, job("OddData"))
    assert e.event is Event.SUCCESSFUL and dict(e.message_data) == {}
    assert "not a mapping" in caplog.text


def test_scheduled_enable_raising_keeps_its_report(runner: Runner) -> None:
    j = job("Reports", args={"status": "failed", "data": {"k": 1}, "raise_in_run": True})
    e = run(runner, j)
    assert (e.event, e.result, e.reason, e.error) == (
        Event.FAILED,
        SchedulerResult.NORMAL,
        "raised RuntimeError",
        "RuntimeError: broken",
    )
    assert e.running_status == "failed" and dict(e.message_data) == {"k": 1}


def test_broken_properties_fail_the_run_not_the_runner(
    runner: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    e = run(runner, job("BrokenReport"))
    assert (e.event, e.result, e.reason) == (
        Event.FAILED,
        SchedulerResult.NORMAL,
        "no running status",
    )
    assert "status broken" in caplog.text and "data broken" in caplog.text


def test_waits_for_is_done_after_run_returns(runner: Runner, clock: FakeClock) -> None:
    j = job("ReportsLater", args={"key": "later-1"})
    ctx = RunContext(j, "run-1", None)
    thread, results = in_thread(runner, j, ctx)
    for _ in range(int(WAIT / 0.01)):
        if "later-1" in jobs.INSTANCES and jobs.instance("later-1").returned.is_set():
            break
        jobs.event("never").wait(0.01)
    instance = jobs.instance("later-1")
    clock.advance(1)
    assert thread.is_alive()  # run() returned, the work goes on
    snap = ctx.snapshot()
    assert snap.event is None and snap.running_status == "running"
    assert dict(snap.message_data) == {"phase": "running"}
    instance.finish.set()
    advance_until_done(clock, thread, 1)
    [e] = results
    assert (e.event, e.running_status, dict(e.message_data)) == (
        Event.SUCCESSFUL,
        "successful",
        {"phase": "successful"},
    )


def test_a_stopped_job_that_never_finishes_is_given_up_after_kill_grace(
    runner: Runner, clock: FakeClock
) -> None:
    j = job("ReportsLater", args={"key": "later-2", "ignore_stop": True}, timeout=5, kill_grace=3)
    ctx = RunContext(j, "run-1", None)
    thread, results = in_thread(runner, j, ctx)
    advance_until_done(clock, thread, 1)
    [e] = results
    assert (e.event, e.result, e.reason) == (Event.FAILED, SchedulerResult.ABNORMAL, "timed out")
    assert jobs.instance("later-2").stop_calls == 1
    assert e.duration is not None and e.duration >= 8  # timeout + kill_grace on the fake clock
    jobs.instance("later-2").finish.set()  # end the job's own thread


# -- stopping -------------------------------------------------------------------------------


def test_timeout_calls_stop(runner: Runner, clock: FakeClock) -> None:
    j = job("Blocks", args={"key": "t-1"}, timeout=timedelta(minutes=5))
    ctx = RunContext(j, "run-1", None)
    thread, results = in_thread(runner, j, ctx)
    for _ in range(int(WAIT / 0.01)):
        if "t-1" in jobs.INSTANCES and jobs.instance("t-1").started.is_set():
            break
        jobs.event("never").wait(0.01)
    clock.advance(299)
    thread.join(0.05)
    assert thread.is_alive()  # not yet
    advance_until_done(clock, thread, 1)
    [e] = results
    instance = jobs.instance("t-1")
    assert (e.event, e.result, e.reason) == (Event.FAILED, SchedulerResult.ABNORMAL, "timed out")
    assert instance.stop_calls == 1 and instance.finished
    assert instance.stop_thread.startswith("jobscheduler-stop-")
    assert e.duration is not None and e.duration >= 300


def test_stop_from_another_thread(runner: Runner) -> None:
    j = job("Blocks", args={"key": "s-1", "stop_raises": True})
    ctx = RunContext(j, "run-1", None)
    thread, results = in_thread(runner, j, ctx)
    for _ in range(int(WAIT / 0.01)):
        if "s-1" in jobs.INSTANCES and jobs.instance("s-1").started.is_set():
            break
        jobs.event("never").wait(0.01)
    ctx.stop("shutdown")  # the instance's stop() raises: logged, not raised here
    ctx.stop("stopped")
    thread.join(WAIT)
    [e] = results
    assert (e.event, e.result, e.reason) == (Event.FAILED, SchedulerResult.ABNORMAL, "shutdown")
    assert jobs.instance("s-1").stop_calls == 1


def test_stop_raising_is_logged(runner: Runner, caplog: pytest.LogCaptureFixture) -> None:
    j = job("Blocks", args={"key": "s-2", "stop_raises": True})
    ctx = RunContext(j, "run-1", None)
    thread, _ = in_thread(runner, j, ctx)
    assert wait_started("s-2")
    with caplog.at_level(logging.ERROR, logger="jobscheduler.runners"):
        ctx.stop()
        thread.join(WAIT)
        # stop() runs in a thread of its own: it may log just after run() has returned.
        for _ in range(int(WAIT / 0.01)):
            if "stop failed on purpose" in caplog.text:
                break
            jobs.event("never").wait(0.01)
        assert "stop failed on purpose" in caplog.text


def wait_started(key: str) -> bool:
    for _ in range(int(WAIT / 0.01)):
        if key in jobs.INSTANCES and jobs.instance(key).started.is_set():
            return True
        jobs.event("never").wait(0.01)
    return False


def test_stop_before_start_does_not_run(runner: Runner) -> None:
    j = job("Succeeds", args={"key": "pre-stop"})
    jobs.INSTANCES.pop("pre-stop", None)
    ctx = RunContext(j, "run-1", None)
    ctx.stop("shutdown")
    e = runner.execute(j, ctx)
    assert (e.event, e.result, e.reason) == (
        Event.NOT_STARTED,
        SchedulerResult.ABNORMAL,
        "shutdown",
    )
    assert "pre-stop" not in jobs.INSTANCES  # not even created


def test_stop_while_the_instance_is_created_does_not_run_it(runner: Runner) -> None:
    j = job("SlowConstructor", args={"key": "slow-init"})
    ctx = RunContext(j, "run-1", None)
    thread, results = in_thread(runner, j, ctx)
    assert jobs.event("slow-init:constructing").wait(WAIT)
    ctx.stop("shutdown")
    jobs.event("slow-init").set()
    thread.join(WAIT)
    [e] = results
    assert (e.event, e.result, e.reason) == (
        Event.NOT_STARTED,
        SchedulerResult.ABNORMAL,
        "shutdown",
    )
    assert jobs.calls("slow-init") == []  # neither run() nor stop()


def test_a_context_runs_once(runner: Runner) -> None:
    j = job("Succeeds", args={"key": "twice"})
    ctx = RunContext(j, "run-1", None)
    first = runner.execute(j, ctx)
    second = runner.execute(j, ctx)
    assert first.event is Event.SUCCESSFUL and ctx.snapshot() is first
    assert second.event is Event.NOT_STARTED and "already run" in (second.reason or "")
    assert jobs.instance("twice").runs == 1


def test_internal_timeouts_on_the_system_clock() -> None:
    with Runner(SystemClock()) as r:
        j = job("Blocks", args={"key": "real"}, timeout=0.05)
        e = r.execute(j, RunContext(j, "run-1", None))
    assert (e.event, e.reason) == (Event.FAILED, "timed out")
