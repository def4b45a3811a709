"""The Watchdog and RunContext on a FakeClock, and the Runner's thread discipline."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobscheduler.clock import FakeClock
from jobscheduler.model.event import Event
from jobscheduler.model.job import Job, JobType
from jobscheduler.runners.runner import RunContext, Runner
from jobscheduler.runners.watchdog import Watchdog
from jobscheduler.triggers.interval import Interval

START = datetime(2024, 1, 1, tzinfo=UTC)
WAIT = 10.0


def job(**fields: Any) -> Job:
    return Job("j", command=("true",), start=START, interval=Interval.parse("1 day"), **fields)


class Calls:
    """Records each callback's name and the clock time it ran at."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.fired: list[tuple[str, float]] = []
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def callback(self, name: str) -> Callable[[], None]:
        def call() -> None:
            with self._lock:
                self.fired.append((name, (self.clock.now() - START).total_seconds()))
                self.threads.add(threading.current_thread().name)

        return call

    @property
    def names(self) -> list[str]:
        with self._lock:
            return [name for name, _ in self.fired]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


def new_threads(before: set[threading.Thread]) -> list[str]:
    """Names of the live threads that were not in `before`."""
    return sorted(t.name for t in set(threading.enumerate()) - before)


def drive(clock: FakeClock, until: Callable[[], bool], step: float) -> None:
    """Advance the clock by `step` until `until()` (the watchdog may not be waiting yet)."""
    pause = threading.Event()
    for _ in range(int(WAIT / 0.005)):
        if until():
            return
        clock.advance(step)
        pause.wait(0.005)
    raise AssertionError("the watchdog did not call back in time")


def test_no_thread_until_something_is_scheduled(clock: FakeClock) -> None:
    before = set(threading.enumerate())
    watchdog = Watchdog(clock)
    assert not watchdog.running and new_threads(before) == []
    watchdog.schedule(5, lambda: None)
    assert watchdog.running and new_threads(before) == ["jobscheduler-watchdog"]
    watchdog.close()
    assert not watchdog.running and new_threads(before) == []


def test_callbacks_fire_in_deadline_order_at_their_time(clock: FakeClock) -> None:
    calls = Calls(clock)
    watchdog = Watchdog(clock)
    watchdog.schedule(timedelta(seconds=30), calls.callback("c"))
    watchdog.schedule(10, calls.callback("a"))
    watchdog.schedule(20, calls.callback("b"))
    watchdog.schedule(20, calls.callback("b2"))  # same deadline: scheduling order
    try:
        drive(clock, lambda: len(calls.names) == 4, 0.5)
        assert calls.names == ["a", "b", "b2", "c"]
        deadlines = {"a": 10, "b": 20, "b2": 20, "c": 30}
        assert all(at >= deadlines[name] for name, at in calls.fired)  # never early
        assert calls.threads == {"jobscheduler-watchdog"}
        assert watchdog.pending == 0
    finally:
        watchdog.close()


def test_nothing_fires_early(clock: FakeClock) -> None:
    fired = threading.Event()
    watchdog = Watchdog(clock)
    watchdog.schedule(10, fired.set)
    try:
        clock.advance(9.999)
        assert not fired.wait(0.1)
        drive(clock, fired.is_set, 0.001)
    finally:
        watchdog.close()


def test_an_earlier_deadline_wakes_the_thread(clock: FakeClock) -> None:
    calls = Calls(clock)
    watchdog = Watchdog(clock)
    try:
        watchdog.schedule(100, calls.callback("late"))
        watchdog.schedule(1, calls.callback("early"))
        drive(clock, lambda: bool(calls.names), 0.5)
        assert calls.names == ["early"] and calls.fired[0][1] < 100
    finally:
        watchdog.close()


def test_cancel(clock: FakeClock) -> None:
    calls = Calls(clock)
    watchdog = Watchdog(clock)
    try:
        dropped = watchdog.schedule(5, calls.callback("dropped"))
        watchdog.schedule(10, calls.callback("kept"))
        assert dropped.cancel() is True and dropped.cancel() is False
        assert watchdog.pending == 1
        drive(clock, lambda: bool(calls.names), 1)
        assert calls.names == ["kept"]
    finally:
        watchdog.close()


def test_cancelled_timers_do_not_pile_up(clock: FakeClock) -> None:
    watchdog = Watchdog(clock)
    try:
        keep = watchdog.schedule(3600, lambda: None)
        for _ in range(10_000):
            watchdog.schedule(7200, lambda: None).cancel()
        assert watchdog.pending == 1 and len(watchdog._heap) <= 18
        keep.cancel()
    finally:
        watchdog.close()


def test_a_failing_callback_is_logged_and_the_others_run(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    calls = Calls(clock)
    watchdog = Watchdog(clock)

    def broken() -> None:
        raise RuntimeError("callback broke")

    try:
        watchdog.schedule(1, broken)
        watchdog.schedule(2, calls.callback("after"))
        drive(clock, lambda: bool(calls.names), 1)
        assert "callback broke" in caplog.text and calls.names == ["after"]
    finally:
        watchdog.close()


def test_close_drops_pending_timers_and_can_restart(clock: FakeClock) -> None:
    calls = Calls(clock)
    watchdog = Watchdog(clock)
    watchdog.schedule(1, calls.callback("dropped"))
    watchdog.close()
    watchdog.close()  # idempotent
    clock.advance(10)
    watchdog.schedule(1, calls.callback("new"))
    try:
        drive(clock, lambda: bool(calls.names), 1)
        assert calls.names == ["new"]
    finally:
        watchdog.close()


def test_a_callback_may_schedule_and_close(clock: FakeClock) -> None:
    calls = Calls(clock)
    watchdog = Watchdog(clock)

    def chain() -> None:
        watchdog.schedule(1, calls.callback("second"))
        calls.callback("first")()

    watchdog.schedule(1, chain)
    drive(clock, lambda: len(calls.names) == 2, 1)
    assert calls.names == ["first", "second"]
    closed = threading.Event()

    def close() -> None:
        watchdog.close()  # from its own thread: must not join itself
        closed.set()

    watchdog.schedule(1, close)
    drive(clock, closed.is_set, 1)
    assert not watchdog.running or threading.current_thread() is not None


def test_essential_timers_survive_close(clock: FakeClock) -> None:
    calls = Calls(clock)
    watchdog = Watchdog(clock)
    watchdog.schedule(5, calls.callback("timeout"))
    watchdog.schedule(5, calls.callback("sigkill"), essential=True)
    watchdog.close()  # returns at once: an essential timer is pending
    assert watchdog.pending == 1 and watchdog.running
    drive(clock, lambda: bool(calls.names), 1)
    assert calls.names == ["sigkill"]
    for _ in range(int(WAIT / 0.01)):  # the thread ends by itself after the last one
        if not watchdog.running:
            break
        threading.Event().wait(0.01)
    assert not watchdog.running


def test_a_draining_watchdog_ends_when_its_essential_timer_is_cancelled(clock: FakeClock) -> None:
    watchdog = Watchdog(clock)
    kill = watchdog.schedule(5, lambda: None, essential=True)
    watchdog.close()
    assert watchdog.running
    kill.cancel()
    for _ in range(int(WAIT / 0.01)):
        if not watchdog.running:
            break
        threading.Event().wait(0.01)
    assert not watchdog.running


# -- RunContext -----------------------------------------------------------------------------


def test_snapshot_before_the_run() -> None:
    j = job()
    slot = datetime(2024, 3, 1, tzinfo=UTC)
    queued = datetime(2024, 3, 1, 0, 0, 5, tzinfo=UTC)
    assert RunContext(j, "run-1", slot).snapshot().started == slot
    ctx = RunContext(j, "run-2", slot, "dependence", created=queued)
    snap = ctx.snapshot()
    assert (snap.job_name, snap.run_id, snap.slot, snap.started, snap.trigger) == (
        "j",
        "run-2",
        slot,
        queued,
        "dependence",
    )
    assert snap.event is None and not snap.finished and ctx.started is None
    assert RunContext(j, "run-3", None).snapshot().started == datetime(1970, 1, 1, tzinfo=UTC)


def test_stop_is_idempotent_and_thread_safe() -> None:
    ctx = RunContext(job(), "run-1", None)
    calls: list[str] = []
    ctx._begin(START)
    ctx._attach(calls.append)
    threads = [threading.Thread(target=ctx.stop, args=(f"r{i}",)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and ctx.stop_reason == calls[0]
    assert ctx.snapshot().reason == calls[0]


def test_a_stop_before_the_stopper_is_attached_is_applied_on_attach() -> None:
    ctx = RunContext(job(), "run-1", None)
    ctx._begin(START)
    ctx.stop("timed out")
    calls: list[str] = []
    ctx._attach(calls.append)
    assert calls == ["timed out"]


def test_a_failing_stopper_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    ctx = RunContext(job(), "run-1", None)
    ctx._begin(START)

    def broken(reason: str) -> None:
        raise OSError("cannot signal")

    ctx._attach(broken)
    ctx.stop()
    assert "cannot signal" in caplog.text and ctx.stop_reason == "stopped"


def test_stops_after_the_work_ended_change_nothing() -> None:
    ctx = RunContext(job(), "run-1", None)
    ctx._begin(START)
    assert ctx._settle() is None
    ctx.stop()
    assert ctx.stop_reason is None


# -- the Runner's threads -------------------------------------------------------------------


def test_runner_starts_a_watchdog_only_for_timeouts(clock: FakeClock) -> None:
    before = set(threading.enumerate())
    runner = Runner(clock)
    e = runner.execute(job(), RunContext(job(), "run-1", None))
    assert e.event is Event.SUCCESSFUL and runner.watchdog is None
    assert new_threads(before) == []
    timed = job(timeout=60)
    assert runner.execute(timed, RunContext(timed, "run-2", None)).event is Event.SUCCESSFUL
    watchdog = runner.watchdog
    assert watchdog is not None and watchdog.running and watchdog.pending == 0
    runner.close()
    runner.close()
    assert runner.watchdog is None and new_threads(before) == []
    assert runner.execute(timed, RunContext(timed, "run-3", None)).event is Event.SUCCESSFUL
    runner.close()


def test_runner_never_raises_on_its_own_errors(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import jobscheduler.runners.runner as runners

    def broken(*args: object) -> None:
        raise RuntimeError("runner bug")

    monkeypatch.setattr(runners, "run_internal", broken)
    j = Job(
        "i", type=JobType.INTERNAL, command="x:y", start=START, interval=Interval.parse("1 day")
    )
    ctx = RunContext(j, "run-1", None)
    e = Runner(clock).execute(j, ctx)
    assert (e.event, e.reason, e.error) == (
        Event.FAILED,
        "runner error",
        "RuntimeError: runner bug",
    )
    assert ctx.finished and ctx.snapshot() is e
    assert "runner bug" in caplog.text
