"""Async internal jobs (``async def`` functions, classes whose ``run()`` is async) on the
scheduler's own event loop: many at once without holding workers, cancelled by a timeout,
``stop_job`` and ``shutdown(wait=False)``, ``current_run()`` inside, and sync jobs beside them
that never block the loop. The jobs measure what they see from inside."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest

from jobscheduler import FakeClock, Job, JobType, RunInfo, current_run
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import RunState

T0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
WAIT = 60.0  # seconds: reached only when a test fails, even on a loaded machine


def wait_until(check: Callable[[], object], within: float = WAIT) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


class Seen:
    """What the jobs of one test saw, written from the loop's thread and read by the test."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.threads: set[str] = set()
        self.runs: list[RunInfo | None] = []
        self.all_in: asyncio.Event | None = None  # made on the loop by the first job

    def enter(self, name: str) -> None:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.started.append(name)
            self.threads.add(threading.current_thread().name)

    def leave(self) -> None:
        with self.lock:
            self.running -= 1


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def sched(clock: FakeClock) -> Iterator[Scheduler]:
    s = Scheduler(clock=clock, max_workers=2)
    yield s
    s.shutdown(wait=False)


def records(s: Scheduler, name: str) -> list[Any]:
    return s.history(name)


def ended(s: Scheduler, name: str, count: int = 1) -> bool:
    return len([r for r in s.history(name) if r.state is not RunState.RUNNING]) >= count


def test_fifty_async_runs_overlap_while_two_workers_exist(sched: Scheduler, seen: Seen) -> None:
    async def gather_all() -> None:
        run = current_run()
        assert run is not None
        seen.enter(run.job)
        if seen.all_in is None:
            seen.all_in = asyncio.Event()
        if seen.running == 50:
            seen.all_in.set()
        await asyncio.wait_for(seen.all_in.wait(), WAIT)  # only if all 50 wait at once
        seen.leave()

    sched.add_jobs(
        Job(f"a{i}", type=JobType.INTERNAL, command=gather_all, on_demand=True) for i in range(50)
    )
    sched.start()
    for i in range(50):
        sched.run_now(f"a{i}")
    assert sched.wait_idle(WAIT)
    assert seen.peak == 50
    assert seen.threads == {"jobscheduler-asyncio"}
    states = [r.state for r in sched.history(limit=100)]
    assert states == [RunState.SUCCEEDED] * 50
    workers = [t for t in threading.enumerate() if t.name.startswith("jobscheduler-worker")]
    assert len(workers) <= 2


def test_current_run_inside_an_async_job_and_its_tasks(sched: Scheduler, seen: Seen) -> None:
    async def child() -> None:
        seen.runs.append(current_run())

    async def parent(day: str) -> None:
        seen.runs.append(current_run())
        await asyncio.create_task(child())
        seen.started.append(day)

    sched.add_job(
        Job("ident", type=JobType.INTERNAL, command=parent, args={"day": "mon"}, on_demand=True)
    )
    sched.start()
    sched.run_now("ident")
    assert sched.wait_idle(WAIT)
    [record] = records(sched, "ident")
    assert record.state is RunState.SUCCEEDED
    assert seen.started == ["mon"]
    assert [(r.job, r.run_id, r.trigger) for r in seen.runs if r] == [
        ("ident", record.run_id, "run_now")
    ] * 2
    assert current_run() is None


def test_a_timeout_cancels_the_job_which_sees_cancelled_error(
    sched: Scheduler, seen: Seen, clock: FakeClock
) -> None:
    async def slow() -> None:
        seen.enter("slow")
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.cancelled.append("slow")
            raise

    sched.add_job(
        Job("slow", type=JobType.INTERNAL, command=slow, on_demand=True, timeout=timedelta(5))
    )
    sched.start()
    sched.run_now("slow")
    wait_until(lambda: seen.started)
    clock.advance(timedelta(days=5))  # the watchdog's clock
    wait_until(lambda: ended(sched, "slow"))
    [record] = records(sched, "slow")
    assert (record.state, record.reason) == (RunState.FAILED, "timed out")
    assert seen.cancelled == ["slow"]


def test_stop_job_cancels_it_even_when_it_swallows_the_cancellation(
    sched: Scheduler, seen: Seen
) -> None:
    async def stubborn() -> None:
        seen.enter("stubborn")
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.cancelled.append("stubborn")  # and returns normally: still a stopped run

    sched.add_job(Job("stubborn", type=JobType.INTERNAL, command=stubborn, on_demand=True))
    sched.start()
    sched.run_now("stubborn")
    wait_until(lambda: seen.started)
    assert [e.job_name for e in sched.executing] == ["stubborn"]
    assert sched.stop_job("stubborn") == 1
    wait_until(lambda: ended(sched, "stubborn"))
    [record] = records(sched, "stubborn")
    assert (record.state, record.reason) == (RunState.FAILED, "stopped")
    assert seen.cancelled == ["stubborn"]
    assert sched.executing == []


def test_shutdown_without_waiting_cancels_async_runs(seen: Seen) -> None:
    s = Scheduler(max_workers=1)  # the real clock: the queue of submitted runs is polled

    async def forever(n: int) -> None:
        seen.enter(f"f{n}")
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            with seen.lock:
                seen.cancelled.append(f"f{n}")
            raise

    s.add_job(Job("forever", type=JobType.INTERNAL, command=forever, on_demand=True))
    s.start()
    for n in range(3):
        s.submit("forever", {"n": n})  # .submit's args reach a job defined in code
    wait_until(lambda: len(seen.started) == 3)
    s.shutdown(wait=False)
    assert sorted(seen.cancelled) == ["f0", "f1", "f2"]
    states = {(r.state, r.reason) for r in s.history("forever")}
    assert states == {(RunState.FAILED, "shutdown")}
    assert not [t for t in threading.enumerate() if t.name == "jobscheduler-asyncio"]


def test_shutdown_waits_for_async_runs_to_finish(clock: FakeClock, seen: Seen) -> None:
    s = Scheduler(clock=clock)
    gate = threading.Event()

    async def until_gate() -> None:
        seen.enter("gated")
        while not gate.is_set():
            await asyncio.sleep(0.01)
        seen.leave()

    s.add_job(Job("gated", type=JobType.INTERNAL, command=until_gate, on_demand=True))
    s.start()
    s.run_now("gated")
    wait_until(lambda: seen.started)
    closer = threading.Thread(target=s.shutdown)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # waiting for the run
    gate.set()
    closer.join(WAIT)
    assert not closer.is_alive()
    [record] = s.history("gated")
    assert record.state is RunState.SUCCEEDED


def test_a_blocked_sync_job_never_holds_up_the_loop(sched: Scheduler, seen: Seen) -> None:
    release = threading.Event()

    def blocking() -> None:
        seen.enter("sync")
        release.wait(WAIT)

    async def quick() -> None:
        seen.enter("async")
        await asyncio.sleep(0)

    sched.add_jobs(
        [
            Job("sync", type=JobType.INTERNAL, command=blocking, on_demand=True),
            Job("async", type=JobType.INTERNAL, command=quick, on_demand=True),
        ]
    )
    sched.start()
    sched.run_now("sync")
    wait_until(lambda: "sync" in seen.started)
    sched.run_now("async")
    wait_until(lambda: ended(sched, "async"))  # while the sync job still blocks its worker
    assert [r.state for r in records(sched, "async")] == [RunState.SUCCEEDED]
    assert records(sched, "sync")[0].state is RunState.RUNNING
    release.set()
    assert sched.wait_idle(WAIT)
    assert any(t.startswith("jobscheduler-worker") for t in seen.threads)
    assert "jobscheduler-asyncio" in seen.threads


class AsyncReport:
    """A class whose run() is async: made in a worker with the job's args, run on the loop."""

    made_in: ClassVar[list[str]] = []

    def __init__(self, day: str) -> None:
        self.day = day
        AsyncReport.made_in.append(threading.current_thread().name)

    async def run(self) -> None:
        await asyncio.sleep(0)
        if self.day == "bad":
            raise ValueError("no such day")


def test_an_async_class_and_its_failures(sched: Scheduler) -> None:
    AsyncReport.made_in.clear()
    sched.add_jobs(
        [
            Job("good", type=JobType.INTERNAL, command=f"{__name__}:AsyncReport",
                args={"day": "mon"}, on_demand=True),
            Job("bad", type=JobType.INTERNAL, command=AsyncReport, args={"day": "bad"},
                on_demand=True),
        ]
    )  # fmt: skip
    sched.start()
    sched.run_now("good")
    sched.run_now("bad")
    assert sched.wait_idle(WAIT)
    assert records(sched, "good")[0].state is RunState.SUCCEEDED
    [bad] = records(sched, "bad")
    assert (bad.state, bad.reason) == (RunState.FAILED, "raised ValueError: no such day")
    assert all(name.startswith("jobscheduler-worker") for name in AsyncReport.made_in)


def test_system_exit_fails_the_run_and_the_loop_goes_on(sched: Scheduler) -> None:
    async def exits() -> None:
        raise SystemExit(3)

    async def fine() -> None:
        await asyncio.sleep(0)

    sched.add_jobs(
        [
            Job("exits", type=JobType.INTERNAL, command=exits, on_demand=True),
            Job("fine", type=JobType.INTERNAL, command=fine, on_demand=True),
        ]
    )
    sched.start()
    sched.run_now("exits")
    wait_until(lambda: ended(sched, "exits"))
    sched.run_now("fine")
    assert sched.wait_idle(WAIT)
    assert records(sched, "exits")[0].state is RunState.FAILED
    assert records(sched, "fine")[0].state is RunState.SUCCEEDED


def test_max_instances_holds_for_async_runs(sched: Scheduler, seen: Seen) -> None:
    gate = threading.Event()

    async def held() -> None:
        seen.enter("held")
        while not gate.is_set():
            await asyncio.sleep(0.01)

    sched.add_job(Job("held", type=JobType.INTERNAL, command=held, on_demand=True, max_instances=1))
    sched.start()
    sched.run_now("held")
    wait_until(lambda: seen.started)
    sched.run_now("held")
    wait_until(lambda: ended(sched, "held"))
    [refused] = [r for r in records(sched, "held") if r.state is not RunState.RUNNING]
    assert (refused.state, refused.reason) == (RunState.NOT_STARTED, "already running")
    gate.set()
    assert sched.wait_idle(WAIT)
    assert len(seen.started) == 1


def test_a_run_that_ignores_cancellation_is_given_up(clock: FakeClock, seen: Seen) -> None:
    s = Scheduler(clock=clock)
    done = threading.Event()

    async def ignores() -> None:
        seen.enter("ignores")
        while not done.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                seen.cancelled.append("ignores")

    s.add_job(Job("ignores", type=JobType.INTERNAL, command=ignores, on_demand=True, kill_grace=2))
    s.start()
    s.run_now("ignores")
    wait_until(lambda: seen.started)
    s.stop_job("ignores")
    wait_until(lambda: seen.cancelled)
    clock.advance(timedelta(seconds=2))  # kill_grace on the watchdog's clock
    wait_until(lambda: ended(s, "ignores"))
    [record] = s.history("ignores")
    assert (record.state, record.reason) == (RunState.FAILED, "did not stop")
    s.shutdown(wait=True)  # does not wait for the given-up run
    done.set()
