"""`pause_after_failures` with overlapping runs on two nodes: two real schedulers ("a" and "b")
on one SQLite file, one FakeClock (as `test_cluster_limits`). The job's runs hold, each until
its own gate opens, then fail: which run ends when is the test's choice.

Decided: the job is paused after exactly N counted failures; a run that had started before
the pause ends as it ends (recorded FAILED, its handlers told) and is not counted, even when
it ends after the pause has ended by itself (`resume_after`): the next streak counts only
runs started after the pause was made; no run starts while the pause holds, on either node.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from policy_support import T0, WAIT, Recorder, internal_job
from test_cluster_limits import clock, idle, nodes, tick, until

from jobscheduler import Event, FakeClock, current_run
from jobscheduler.model.policies import PauseAfterFailures
from jobscheduler.policies.pausing import pause_reason
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import RunState

__all__ = ["clock", "nodes"]  # the fixtures, used by name

_lock = threading.Lock()
_GATES: dict[str, threading.Event] = {}
_STARTS: dict[str, list[int]] = {}


def gate(key: str, second: int) -> threading.Event:
    with _lock:
        return _GATES.setdefault(f"{key}@{second}", threading.Event())


def starts(key: str) -> list[int]:
    """The slots (seconds after T0) of the runs of `key` that started, in order."""
    with _lock:
        return list(_STARTS.get(key, []))


def holds_then_fails(key: str) -> None:
    """An internal job: notes its start, waits for the gate of its slot (bounded), fails."""
    ctx = current_run()
    assert ctx is not None and ctx.slot is not None
    second = int((ctx.slot - T0).total_seconds())
    with _lock:
        _STARTS.setdefault(key, []).append(second)
    gate(key, second).wait(WAIT)
    raise RuntimeError(f"run of slot {second} fails")


def test_overlapping_failures_pause_after_exactly_n_and_stragglers_never_count(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    a, b = nodes("a"), nodes("b")
    heard = Recorder()
    throttle = PauseAfterFailures(failures=2, resume_after=timedelta(minutes=5))
    job = internal_job(
        "flaky", "placeholder", key, "60 seconds", pause_after_failures=throttle
    ).with_changes(command=f"{__name__}:holds_then_fails")
    for s in (a, b):
        s.add_job(job)
        s.add_handler("flaky", heard)
        s.start()

    def failures() -> list[str | None]:
        """The reasons of the FAILED events heard (a slot queued on a node when it learns
        of the pause ends NOT_STARTED "job paused": no run)."""
        return [x.reason for e, x in heard.seen if e is Event.FAILED]

    for count in (1, 2, 3):  # slots 60, 120, 180 start, all three running at once
        tick(clock, a, b)
        until(lambda n=count: len(starts(key)) == n)  # (a slot due before is taken coalesces)
    assert starts(key) == [60, 120, 180]
    store = a.state_store

    gate(key, 60).set()  # failure 1
    until(lambda: len(failures()) == 1)
    gate(key, 120).set()  # failure 2: paused
    until(lambda: len(failures()) == 2)
    pause = store.pause_of("flaky")
    assert pause is not None and pause.note == pause_reason(2)
    assert pause.until == pause.paused_at + timedelta(minutes=5)
    assert failures()[-1] == pause_reason(2)

    # While paused, no run starts on either node (each node asks the store before a start).
    for _ in range(4):
        tick(clock, a, b)
    assert sorted(starts(key)) == [60, 120, 180]
    # The pause ends by itself; slot 180's run, started before it, still runs.
    until(lambda: clock.now() >= pause.until, clock)  # type: ignore[operator]
    tick(clock, a, b)
    until(lambda: len(starts(key)) == 4, clock)
    new_slot = starts(key)[3]
    assert T0 + timedelta(seconds=new_slot) >= pause.until  # type: ignore[operator]

    gate(key, 180).set()  # a straggler of the streak that paused the job: not counted
    until(lambda: len(failures()) == 3)
    assert {(e, x.reason) for e, x in heard.seen if e is not Event.FAILED} <= {
        (Event.NOT_STARTED, "job paused")
    }
    mark = store.mark("flaky")
    assert mark is not None and mark.failures == 0

    gate(key, new_slot).set()  # the new streak's first failure: counted 1, not paused
    until(lambda: len(failures()) == 4)
    mark = store.mark("flaky")
    assert mark is not None and mark.failures == 1
    paused = store.pause_of("flaky")
    assert paused is None or not paused.in_force(clock.now())
    for s in (a, b):
        s.pause_job("flaky")  # stop the schedule: the test ends
    for second in range(0, 100_000, 60):
        gate(key, second).set()
    idle(a, b)
    failed = [r for r in store.history("flaky", limit=100) if r.state is RunState.FAILED]
    assert len(failed) == len(starts(key))
    assert failures().count(pause_reason(2)) == 1  # one run paused the job
