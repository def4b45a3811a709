"""JobProcessor with its threads, on a FakeClock: the scheduler thread, workers, notices,
life cycle, stopping runs, crashes. Real `Runner` + internal jobs where stopping is the point.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import jobs_for_tests
import pytest
from test_processor_support import T0, WAIT, CountingClock, Harness, at, job, settle

from jobscheduler.clock import SystemClock
from jobscheduler.engine.processor import JobProcessor
from jobscheduler.model.event import Event
from jobscheduler.model.execution import Execution, SchedulerResult
from jobscheduler.model.job import Job, JobType
from jobscheduler.runners.context import RunContext
from jobscheduler.runners.runner import Runner


@pytest.fixture
def clock() -> CountingClock:
    return CountingClock(T0)


@pytest.fixture
def h(clock: CountingClock) -> Iterator[Harness]:
    harness = Harness(clock)
    yield harness
    for gate in harness.gates.values():
        gate.set()
    harness.processor.shutdown(wait=True)


def advance(h: Harness | JobProcessor, clock: CountingClock, seconds: float) -> None:
    """Move the clock once the scheduler thread waits, and return once it waits again
    (so it has seen the new time and dispatched what became due)."""
    p = h.processor if isinstance(h, Harness) else h
    settle(p, clock)
    waits = clock.waits
    clock.advance(seconds)
    clock.wait_for_waits(waits + 1)
    settle(p, clock)


def blocking_job(name: str, key: str, **fields: object) -> Job:
    return Job(
        name,
        type=JobType.INTERNAL,
        command=f"{jobs_for_tests.__name__}:Blocks",
        args={"key": key},
        start=at(3600),
        interval="1 hour",
        timezone="UTC",
        **fields,  # type: ignore[arg-type]
    )


def recording(h: Harness, runner: Runner) -> Callable[[Job, RunContext], Execution]:
    """The real runner's execute, recording starts in `h`."""

    def execute(job: Job, ctx: RunContext) -> Execution:
        with h.cond:
            h.started.append((job.name, ctx.slot, ctx.trigger))
            h.cond.notify_all()
        return runner.execute(job, ctx)

    return execute


def wait_blocking(h: Harness, key: str) -> None:
    """Wait until the Blocks instance `key` runs."""
    for _ in range(int(WAIT * 100)):  # the runner makes the instance after `execute` starts
        if key in jobs_for_tests.INSTANCES:
            break
        with h.cond:
            h.cond.wait(0.01)
    assert jobs_for_tests.instance(key).started.wait(WAIT)


def assert_all_threads_ended(p: JobProcessor) -> None:
    assert p._loop._thread is None
    assert p._pool.workers == set()
    notifier = p._pool.notices._thread
    assert notifier is None or not notifier.is_alive()
    assert p.stats.workers == 0


# -- dispatch with the thread ------------------------------------------------------------------


def test_the_thread_starts_runs_when_the_clock_reaches_their_slots(
    h: Harness, clock: CountingClock
) -> None:
    p = h.processor
    p.set_jobs([job("a", start=10), job("b", start=5)], T0)
    p.start()
    p.start()  # idempotent
    advance(h, clock, 5)
    h.wait_finished(1)
    advance(h, clock, 5)
    h.wait_finished(2)
    assert [(n, s) for n, s, _ in h.started] == [("b", at(5)), ("a", at(10))]
    assert p.next_run("a") == at(70)


def test_one_worker_runs_the_queue_by_priority_then_due_time(
    clock: CountingClock,
) -> None:
    h = Harness(clock, max_workers=1)
    p = h.processor
    release = h.gate("blocker")
    p.set_jobs(
        [
            job("blocker", start=1),
            job("low-old", start=2),
            job("high", start=4, priority=3),
            job("low-new", start=3),
            job("high-old", start=3, priority=3),
        ],
        T0,
    )
    p.start()
    try:
        advance(h, clock, 1)
        h.wait_started(1)
        for _ in range(3):
            advance(h, clock, 1)
        settle(p, clock)
        assert [q.job_name for q in p.queued] == ["high-old", "high", "low-old", "low-new"]
        release.set()
        h.wait_finished(5)
        assert h.names() == ["blocker", "high-old", "high", "low-old", "low-new"]
        assert p.stats.workers == 1
    finally:
        release.set()
        p.shutdown()


def test_max_instances_is_reported_while_every_worker_is_busy(clock: CountingClock) -> None:
    h = Harness(clock, max_workers=1)
    p = h.processor
    release = h.gate("long")
    p.set_jobs([job("long", start=1, every=10, max_instances=1)], T0)
    p.start()
    try:
        advance(h, clock, 1)
        h.wait_started(1)
        advance(h, clock, 10)
        h.wait_finished(1)  # the notice thread reports it: the one worker is still busy
        assert h.events() == [("long", Event.NOT_STARTED, "already running")]
        release.set()
        h.wait_finished(2)
    finally:
        release.set()
        p.shutdown()


def test_run_now_starts_at_once(h: Harness, clock: CountingClock) -> None:
    p = h.processor
    a = job("a", start=1000)
    p.set_jobs([a], T0)
    p.start()
    settle(p, clock)
    p.run_now(a)
    h.wait_finished(1)
    assert h.started == [("a", None, "run_now")]
    assert clock.now() == T0  # nothing had to move the clock


def test_run_at_waits_for_its_instant(h: Harness, clock: CountingClock) -> None:
    p = h.processor
    a = job("a", start=1000)
    p.start()
    settle(p, clock)
    p.run_at(a, at(30))
    advance(h, clock, 29)
    settle(p, clock)
    assert h.started == [] and len(p.pending) == 1
    advance(h, clock, 1)
    h.wait_finished(1)
    assert h.started == [("a", None, "dependence")]


def test_wait_idle(h: Harness, clock: CountingClock) -> None:
    p = h.processor
    release = h.gate("a")
    p.set_jobs([job("a", start=1000)], T0)
    p.start()
    p.run_now(job("a", start=1000))
    h.wait_started(1)
    assert p.wait_idle(timeout=0.01) is False
    release.set()
    assert p.wait_idle(timeout=WAIT) is True
    assert len(h.finished) == 1


def test_executing_lists_running_snapshots(h: Harness, clock: CountingClock) -> None:
    p = h.processor
    release = h.gate("a")
    a = job("a", start=1000)
    p.start()
    p.run_now(a)
    p.run_now(a)
    h.wait_started(2)
    running = p.executing
    assert [(e.job_name, e.trigger, e.event) for e in running] == [("a", "run_now", None)] * 2
    assert running[0].run_id < running[1].run_id
    release.set()
    assert p.wait_idle(WAIT)
    assert p.executing == []


# -- stopping runs -------------------------------------------------------------------------------


@pytest.fixture
def runner(clock: CountingClock) -> Iterator[Runner]:
    with Runner(clock) as r:
        yield r


def test_stop_job_stops_each_running_execution(clock: CountingClock, runner: Runner) -> None:
    h = Harness(clock)
    p = h.processor = JobProcessor(recording(h, runner), h.on_finished, clock=clock)
    blocker = blocking_job("blocks", "stop-job")
    p.start()
    try:
        assert p.stop_job("blocks") == 0
        p.run_now(blocker)
        p.run_now(blocker)
        h.wait_started(2)
        wait_blocking(h, "stop-job")
        assert p.stop_job("blocks", "stopped") == 2
        h.wait_finished(2)
        assert {(e.event, e.result, e.reason) for e in h.finished} == {
            (Event.FAILED, SchedulerResult.ABNORMAL, "stopped")
        }
    finally:
        p.shutdown()


def test_shutdown_wait_lets_running_runs_finish_and_drops_the_queue(
    clock: CountingClock,
) -> None:
    h = Harness(clock, max_workers=1)
    p = h.processor
    release = h.gate("a")
    a = job("a", start=1000)
    p.start()
    p.run_now(a)
    h.wait_started(1)
    p.run_now(job("queued", start=1000))
    p.run_at(a, at(60))
    settle(p, clock)
    done = threading.Event()
    closer = threading.Thread(target=lambda: (p.shutdown(wait=True), done.set()))
    closer.start()
    h.wait_finished(2)  # the queued run and the pending start are reported at once
    assert not done.is_set()  # still waiting for the running run
    release.set()
    closer.join(WAIT)
    assert done.is_set()
    assert sorted(h.events(), key=str) == sorted(
        [
            ("a", Event.SUCCESSFUL, None),
            ("queued", Event.NOT_STARTED, "shutdown"),
            ("a", Event.NOT_STARTED, "shutdown"),
        ],
        key=str,
    )
    assert_all_threads_ended(p)
    p.shutdown()  # again: nothing happens
    with pytest.raises(RuntimeError):
        p.start()


def test_shutdown_nowait_stops_running_runs(clock: CountingClock, runner: Runner) -> None:
    h = Harness(clock)
    p = h.processor = JobProcessor(recording(h, runner), h.on_finished, clock=clock)
    p.start()
    p.run_now(blocking_job("blocks", "nowait-1"))
    p.run_now(blocking_job("blocks2", "nowait-2"))
    h.wait_started(2)
    for key in ("nowait-1", "nowait-2"):
        wait_blocking(h, key)
    p.shutdown(wait=False)
    assert len(h.finished) == 2  # shutdown returned after both ended and were reported
    assert {(e.event, e.result, e.reason) for e in h.finished} == {
        (Event.FAILED, SchedulerResult.ABNORMAL, "shutdown")
    }
    assert_all_threads_ended(p)


def test_run_at_after_shutdown_is_reported_at_once(h: Harness) -> None:
    p = h.processor
    p.start()
    p.shutdown()
    p.run_at(job("late", start=0), at(5))
    assert h.events() == [("late", Event.NOT_STARTED, "shutdown")]


def test_shutdown_from_inside_a_run_does_not_deadlock(clock: CountingClock) -> None:
    def execute(job: Job, ctx: RunContext) -> Execution:
        p.shutdown(wait=True)  # it cannot wait for this very run
        return h.execute(job, ctx)

    h = Harness(clock, execute=execute)
    p = h.processor
    p.start()
    p.run_now(job("a", start=1000))
    h.wait_finished(1)
    assert h.events() == [("a", Event.SUCCESSFUL, None)]


def test_stop_keeps_running_runs_drops_the_queue_and_does_not_make_up(
    clock: CountingClock,
) -> None:
    h = Harness(clock, max_workers=1)
    p = h.processor
    release = h.gate("a")
    p.set_jobs([job("a", start=1, every=60), job("b", start=1, every=60)], T0)
    p.start()
    advance(h, clock, 1)
    h.wait_started(1)
    settle(p, clock)
    p.stop()
    p.stop()  # idempotent
    h.wait_finished(1)
    assert h.events() == [("b", Event.NOT_STARTED, "scheduler stopped")]
    assert p._loop._thread is None
    release.set()
    h.wait_finished(2)  # the running run went on to its end
    clock.set(at(200))  # slots 61 and 121 pass while stopped
    p.start()
    try:
        assert p.next_run("a") == at(241)
        advance(h, clock, 41)
        h.wait_finished(4)
        assert [(n, s) for n, s, _ in h.started] == [("a", at(1)), ("a", at(241)), ("b", at(241))]
    finally:
        p.shutdown()


# -- crashes ---------------------------------------------------------------------------------------


def test_execute_and_on_finished_that_raise_do_not_stop_the_processor(
    clock: CountingClock, caplog: pytest.LogCaptureFixture
) -> None:
    finished: list[Execution] = []
    got = threading.Condition()

    def execute(job: Job, ctx: RunContext) -> Execution:
        if job.name == "bad":
            raise RuntimeError("runner bug")
        return h.execute(job, ctx)

    def on_finished(job: Job, execution: Execution) -> None:
        with got:
            finished.append(execution)
            got.notify_all()
        if job.name == "good":
            raise ValueError("handler bug")

    h = Harness(clock)
    p = JobProcessor(execute, on_finished, clock=clock, max_workers=1)
    p.set_jobs([job("bad", start=1, every=1), job("good", start=1, every=1)], T0)
    p.start()
    try:
        with caplog.at_level(logging.ERROR, "jobscheduler.processor"):
            for count in (2, 4, 6):
                advance(p, clock, 1)
                with got:
                    assert got.wait_for(lambda c=count: len(finished) >= c, WAIT)  # type: ignore[misc]
        assert {(e.job_name, e.event) for e in finished} == {
            ("bad", Event.FAILED),
            ("good", Event.SUCCESSFUL),
        }
        assert "runner bug" in caplog.text and "handler bug" in caplog.text
        assert p.running and p._loop._thread is not None and p._loop._thread.is_alive()
    finally:
        p.shutdown()


def test_the_loop_is_restarted_after_a_crash(
    h: Harness,
    clock: CountingClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p = h.processor
    real_due = p.timeline.due
    crashes = 0

    def due(now: datetime) -> tuple[int, float | None]:
        nonlocal crashes
        if now >= at(5) and crashes == 0:
            crashes += 1
            raise RuntimeError("loop bug")
        return real_due(now)

    monkeypatch.setattr(p.timeline, "due", due)
    p.set_jobs([job("a", start=5)], T0)
    with caplog.at_level(logging.ERROR, "jobscheduler.processor"):
        p.start()
        advance(h, clock, 5)
        h.wait_finished(1)
    assert crashes == 1 and p.stats.restarts == 1
    assert "the scheduler thread crashed" in caplog.text and "loop bug" in caplog.text
    assert h.started == [("a", at(5), "schedule")]


def test_a_dead_scheduler_thread_is_replaced(
    h: Harness,
    clock: CountingClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobscheduler.engine.loop import SchedulerLoop

    p = h.processor
    real = SchedulerLoop._supervise
    deaths = 0

    def supervise(self: SchedulerLoop, epoch: int) -> None:
        nonlocal deaths
        if deaths == 0:
            deaths += 1
            return  # the thread ends as if killed
        real(self, epoch)

    monkeypatch.setattr(SchedulerLoop, "_supervise", supervise)
    p.start()
    assert p._loop._thread is not None
    p._loop._thread.join(WAIT)
    with caplog.at_level(logging.ERROR, "jobscheduler.processor"):
        p.run_now(job("a", start=1000))  # any change checks on the thread
    h.wait_finished(1)
    assert p.stats.restarts == 1
    assert "found dead" in caplog.text


# -- idle ---------------------------------------------------------------------------------------


def test_idle_with_many_future_jobs_never_wakes(h: Harness, clock: CountingClock) -> None:
    p = h.processor
    far = [job(f"j{i}", start=86400 + i) for i in range(5000)]
    p.set_jobs(far, T0)
    p.start()
    settle(p, clock)
    waits = clock.waits
    assert waits == 1  # one wait, for the earliest slot a day away
    # changes that do not make an earlier slot do not wake it
    p.add_jobs([job(f"k{i}", start=90000 + i) for i in range(5000)])
    p.remove_job("j17")
    p.update_job(far[3].with_changes(enabled=False))
    p.cancel_pending("j5")
    settle(p, clock)
    assert clock.waits == waits and p.stats.wakeups == 0
    # one that does, wakes it once
    p.add_job(job("soon", start=10))
    clock.wait_for_waits(waits + 1)
    settle(p, clock)
    assert clock.waits == waits + 1 and p.stats.wakeups == 1
    assert p.run_due(T0) == pytest.approx(10)


def test_concurrent_callers(h: Harness, clock: CountingClock) -> None:
    p = h.processor
    p.start()
    errors: list[BaseException] = []

    def hammer(index: int) -> None:
        try:
            for i in range(50):
                name = f"t{index}-{i % 5}"
                j = job(name, start=1000 + i)
                p.add_job(j)
                p.run_now(j)
                if i % 3 == 0:
                    p.remove_job(name)
                p.next_run(name)
                p.queued  # noqa: B018
                p.executing  # noqa: B018
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert errors == []
    assert p.wait_idle(WAIT)
    assert len(h.finished) == 200  # every run_now ended in exactly one report
    assert len({e.run_id for e in h.finished}) == 200


def test_a_burst_is_started_and_reported_exactly_once(clock: CountingClock) -> None:
    h = Harness(clock, max_workers=3)
    p = h.processor
    jobs = [job(f"b{i:03}", start=1, priority=i % 3) for i in range(300)]
    p.set_jobs(jobs, T0)
    p.start()
    try:
        advance(p, clock, 1)
        h.wait_finished(300)
        assert p.wait_idle(WAIT)
        assert sorted(e.job_name for e in h.finished) == sorted(j.name for j in jobs)
        assert len({e.run_id for e in h.finished}) == 300
        assert p.stats.started == 300
        assert p.executing == [] and p.queued == []
    finally:
        p.shutdown()


# -- stopping a run while it starts --------------------------------------------------------------


class SlowContexts:
    """Holds each worker just after it registered its run, before the run's context exists
    (or, with `after_claim`, just after it claimed it, before it registered it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, after_claim: bool) -> None:
        import jobscheduler.engine.ready as ready
        import jobscheduler.engine.workers as workers

        self.reached = threading.Event()
        self.go = threading.Event()
        if after_claim:
            take = ready.ReadyRuns.take

            def slow_take(ready: ready.ReadyRuns) -> object:
                run = take(ready)
                if run is not None:
                    self.hold()
                return run

            monkeypatch.setattr(ready.ReadyRuns, "take", slow_take)
        else:
            real = workers.RunContext

            def slow_context(*args: object, **kwargs: object) -> RunContext:
                self.hold()
                return real(*args, **kwargs)  # type: ignore[arg-type]

            monkeypatch.setattr(workers, "RunContext", slow_context)

    def hold(self) -> None:
        self.reached.set()
        assert self.go.wait(WAIT)


@pytest.mark.parametrize("after_claim", [False, True])
def test_stop_job_reaches_a_run_that_is_starting(
    clock: CountingClock, monkeypatch: pytest.MonkeyPatch, after_claim: bool
) -> None:
    slow = SlowContexts(monkeypatch, after_claim=after_claim)
    seen: list[str | None] = []

    def execute(job: Job, ctx: RunContext) -> Execution:
        seen.append(ctx.stop_reason)
        return h.execute(job, ctx)

    h = Harness(clock, execute=execute)
    p = h.processor
    a = job("a", start=1000)
    p.add_job(a)
    p.start()
    try:
        p.run_now(a)
        assert slow.reached.wait(WAIT)
        stopped = p.stop_job("a", "stopped early")
        # registered, no context yet: counted; claimed, not registered yet: not counted
        assert stopped == (0 if after_claim else 1)
        slow.go.set()
        h.wait_finished(1)
        assert seen == ["stopped early"]  # its context was stopped before execute
        # a later run of the job is not affected by that stop
        p.run_now(a)
        h.wait_finished(2)
        assert seen == ["stopped early", None]
    finally:
        slow.go.set()
        p.shutdown()


def test_shutdown_nowait_reaches_a_run_that_is_starting(
    clock: CountingClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = SlowContexts(monkeypatch, after_claim=True)
    seen: list[str | None] = []

    def execute(job: Job, ctx: RunContext) -> Execution:
        seen.append(ctx.stop_reason)
        return h.execute(job, ctx)

    h = Harness(clock, execute=execute)
    p = h.processor
    p.start()
    p.run_now(job("a", start=1000))
    assert slow.reached.wait(WAIT)
    closer = threading.Thread(target=p.shutdown, kwargs={"wait": False})
    closer.start()
    for _ in range(int(WAIT * 100)):  # until shutdown has asked every run to stop
        if p._pool.stop_all is not None:
            break
        with h.cond:
            h.cond.wait(0.01)
    slow.go.set()
    closer.join(WAIT)
    assert not closer.is_alive()
    assert seen == ["shutdown"]
    assert_all_threads_ended(p)


def test_max_wait_bounds_each_wait(clock: CountingClock) -> None:
    h = Harness(clock)
    p = h.processor = JobProcessor(h.execute, h.on_finished, clock=clock, max_wait=60)
    p.set_jobs([job("a", start=86400)], T0)
    p.start()
    try:
        settle(p, clock)
        assert clock.timeouts[-1] == 60
        advance(p, clock, 60)
        assert clock.timeouts[-1] == 60
        assert p.next_run("a") == at(86400)
    finally:
        p.shutdown()
    with pytest.raises(ValueError, match="max_wait"):
        JobProcessor(h.execute, h.on_finished, clock=clock, max_wait=0)


def test_a_slot_centuries_away_does_not_break_the_real_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = SystemClock()
    h = Harness(clock)  # type: ignore[arg-type]
    p = h.processor
    far = Job("far", command=["true"], start=datetime(2700, 1, 1, tzinfo=UTC), interval="1 day")
    p.set_jobs([far])
    with caplog.at_level(logging.ERROR, "jobscheduler.processor"):
        p.start()
        try:
            years = 100 * 365 * 86400
            for _ in range(int(WAIT * 100)):  # until the thread waits, centuries long
                with p._lock:
                    if p._loop._deadline > clock.now().timestamp() + years:
                        break
                with h.cond:
                    h.cond.wait(0.01)
            assert p._loop._deadline > clock.now().timestamp() + years
            assert p.stats.restarts == 0 and "crashed" not in caplog.text
            assert p.next_run("far") == far.start
        finally:
            p.shutdown()


def test_a_run_no_longer_counts_as_running_when_it_is_reported(clock: CountingClock) -> None:
    overlaps: list[int] = []
    got = threading.Condition()
    reported: list[Execution] = []

    def on_finished(job: Job, execution: Execution) -> None:
        running = {e.run_id for e in p.executing}
        if execution.run_id in running:
            overlaps.append(execution.run_id)
        with got:
            reported.append(execution)
            got.notify_all()

    h = Harness(clock)
    p = JobProcessor(h.execute, on_finished, clock=clock, max_workers=2)
    one = job("one", start=1, max_instances=1)
    p.set_jobs([job(f"b{i}", start=1) for i in range(50)], T0)
    p.start()
    try:
        advance(p, clock, 1)  # a burst: reports are handed to the notice thread
        assert p.wait_idle(WAIT)
        assert len(reported) == 50
        for count in range(1, 6):  # one at a time: reported by the worker itself
            p.run_now(one)
            with got:
                assert got.wait_for(
                    lambda c=count: sum(e.job_name == "one" for e in reported) == c,  # type: ignore[misc]
                    WAIT,
                )
        assert p.wait_idle(WAIT)
        assert overlaps == []
        assert p.stats.refused == 0  # each run_now found the previous run ended
    finally:
        p.shutdown()


def test_reports_of_short_runs_are_handed_off_while_runs_wait(clock: CountingClock) -> None:
    """While runs wait to start, the worker hands the report of a short run to the notice
    thread and starts the next; after a longer run (0.2 ms or more) it reports it itself."""
    reporters: dict[str, set[str]] = {"short": set(), "long": set()}
    done = threading.Semaphore(0)

    def execute(job: Job, ctx: RunContext) -> Execution:
        now = clock.now()
        took = timedelta(seconds=1) if job.name.startswith("long") else timedelta(0)
        return Execution(job.name, ctx.run_id, ctx.slot, now, now + took, Event.SUCCESSFUL)

    def on_finished(job: Job, execution: Execution) -> None:
        reporters[job.name.rstrip("0123456789")].add(threading.current_thread().name)
        done.release()

    p = JobProcessor(execute, on_finished, clock=clock, max_workers=1)
    p.set_jobs(
        [job(f"short{i}", start=1) for i in range(20)]
        + [job(f"long{i}", start=2) for i in range(20)],
        T0,
    )
    p.start()
    try:
        advance(p, clock, 1)
        for _ in range(20):
            assert done.acquire(timeout=WAIT)
        advance(p, clock, 1)
        for _ in range(20):
            assert done.acquire(timeout=WAIT)
        assert p.wait_idle(WAIT)
    finally:
        p.shutdown()
    assert "jobscheduler-notices" in reporters["short"]
    assert reporters["long"] == {"jobscheduler-worker-1"}


# -- on the real clock: an idle worker spins to the slot and starts the run itself -------------


def real_slots(count: int, spacing: float, lead: float = 0.1) -> tuple[list[Job], list[datetime]]:
    first = SystemClock().now() + timedelta(seconds=lead)
    slots = [first + timedelta(seconds=i * spacing) for i in range(count)]
    jobs = [
        Job(f"r{i}", command=["true"], start=slot, stop=slot, interval="1 day")
        for i, slot in enumerate(slots)
    ]
    return jobs, slots


def test_on_the_real_clock_an_idle_worker_dispatches_the_slot_and_runs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobscheduler.engine import loop

    # The scheduler thread takes over a slot its worker has not dispatched 2 ms after it; on
    # a loaded machine a worker is often later than that: 1 s here, so the worker dispatches.
    monkeypatch.setattr(loop, "_TAKE_OVER", 1.0)
    clock = SystemClock()
    threads: dict[str, str] = {}
    dispatchers: list[str] = []

    def execute(job: Job, ctx: RunContext) -> Execution:
        threads[job.name] = threading.current_thread().name
        return h.execute(job, ctx)

    # On a loaded machine a timed wait oversleeps by tens of ms: the scheduler thread asks a
    # worker 0.25 s ahead (not 0.5 ms), and the first slot is 1 s away (set-up is slow too).
    h = Harness(clock, execute=execute, early_wake=0.5, spin=0.25)  # type: ignore[arg-type]
    p = h.processor
    real_dispatch = p._loop._dispatch_at

    def dispatch_at(deadline: float, epoch: int) -> None:
        dispatchers.append(threading.current_thread().name)
        real_dispatch(deadline, epoch)

    p._loop._dispatch_at = dispatch_at  # type: ignore[method-assign]
    jobs, slots = real_slots(5, 0.02, lead=1.0)
    p.set_jobs(jobs)
    p.start()
    try:
        h.wait_finished(5)
        assert p.wait_idle(WAIT)
    finally:
        p.shutdown()
    assert h.started == [(j.name, slot, "schedule") for j, slot in zip(jobs, slots, strict=True)]
    # Slots found the worker idle: it dispatched them and ran them itself (a slot the
    # scheduler thread woke up too late for is dispatched by that thread).
    assert 1 <= len(dispatchers) <= 5
    assert all(name.startswith("jobscheduler-worker") for name in dispatchers)
    # A worker ran what it dispatched; a slot the scheduler thread dispatched (it woke up too
    # late to ask a worker) runs on whichever worker is free.
    assert set(dispatchers) & set(threads.values())
    assert p.stats.started == 5 and p.stats.restarts == 0


def test_on_the_real_clock_the_scheduler_thread_takes_over_a_slot_not_dispatched() -> None:
    clock = SystemClock()
    h = Harness(clock, early_wake=0.5, spin=0.25)  # type: ignore[arg-type]  # (see above)
    p = h.processor
    asked: list[float] = []
    p._loop._dispatch_at = lambda deadline, epoch: asked.append(deadline)  # type: ignore[method-assign]
    jobs, slots = real_slots(3, 0.01, lead=1.0)
    p.set_jobs(jobs)
    p.start()
    try:
        h.wait_finished(3)
    finally:
        p.shutdown()
    assert asked  # a worker was asked, and did nothing
    assert [(name, slot) for name, slot, _ in h.started] == [
        (j.name, slot) for j, slot in zip(jobs, slots, strict=True)
    ]


def test_a_worker_that_spins_to_a_slot_after_a_stop_dispatches_nothing() -> None:
    clock = SystemClock()
    h = Harness(clock, early_wake=0.5, spin=0.25)  # type: ignore[arg-type]  # (see above)
    p = h.processor
    spinning = threading.Event()
    stopped = threading.Event()
    queued_after: list[int] = []
    real_dispatch = p._loop._dispatch_at

    def dispatch_at(deadline: float, epoch: int) -> None:
        spinning.set()
        assert stopped.wait(WAIT)  # the worker goes on once the processor is stopped
        real_dispatch(deadline, epoch)
        queued_after.append(len(p.timeline.ready))

    p._loop._dispatch_at = dispatch_at  # type: ignore[method-assign]
    jobs, _ = real_slots(1, 0, lead=1.0)
    p.set_jobs(jobs)
    p.start()
    assert spinning.wait(WAIT)
    p.stop()
    stopped.set()
    p.shutdown()
    assert queued_after == [0]
    assert_all_threads_ended(p)


def test_shutdown_waits_for_a_worker_being_started_in_another_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`spawn` runs in whichever thread made runs ready (a worker, a caller of `start`):
    shutdown joins a worker only once it has been started."""
    gate = threading.Event()
    entered = threading.Event()
    real_thread = threading.Thread

    class SlowStart(real_thread):
        def start(self) -> None:
            if self.name.startswith("jobscheduler-worker"):
                entered.set()
                assert gate.wait(WAIT)
            super().start()

    monkeypatch.setattr(threading, "Thread", SlowStart)
    h = Harness(CountingClock(T0))
    p = h.processor
    errors: list[BaseException] = []

    def shut() -> None:
        try:
            p.shutdown()
        except BaseException as exc:
            errors.append(exc)

    starter = real_thread(target=p.start)
    starter.start()
    assert entered.wait(WAIT)  # the first worker is being started
    closer = real_thread(target=shut)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive() and errors == []  # it waits for the start to finish
    gate.set()
    closer.join(WAIT)
    starter.join(WAIT)
    assert errors == []
    assert_all_threads_ended(p)
