"""JobProcessor's loop body, `run_due`, driven directly on a FakeClock: no threads.

Runs made ready by `run_due` wait in the queue until `drain` runs them in the test's thread.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from test_processor_support import T0, Harness, at, job

from jobscheduler.clock import FakeClock
from jobscheduler.engine.processor import JobProcessor
from jobscheduler.model.event import Event
from jobscheduler.model.execution import Execution, SchedulerResult
from jobscheduler.model.job import Dependence, Job
from jobscheduler.policies.slottrigger import SlotTrigger
from jobscheduler.runners.context import RunContext


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def h(clock: FakeClock) -> Harness:
    return Harness(clock)


def slots(h: Harness) -> list[tuple[str, datetime | None]]:
    return [(name, slot) for name, slot, _ in h.started]


# -- dispatch order ----------------------------------------------------------------------------


def test_run_due_returns_the_seconds_to_the_earliest_slot(h: Harness) -> None:
    p = h.processor
    assert p.run_due(T0) is None  # nothing scheduled
    p.set_jobs([job("a", start=30), job("b", start=12.5)], T0)
    assert p.run_due(T0) == pytest.approx(12.5)
    assert p.run_due(at(12.5)) == pytest.approx(17.5)
    assert p.next_run("a") == at(30)
    assert p.next_run("b") == at(72.5)


def test_dispatch_order_is_time_then_priority_then_definition(h: Harness) -> None:
    p = h.processor
    p.set_jobs(
        [
            job("late", start=20),
            job("low", start=10),
            job("high", start=10, priority=5),
            job("low-too", start=10),
            job("early", start=5, priority=-3),
        ],
        T0,
    )
    for second in (5, 10, 20):
        p.run_due(at(second))
        p.drain()
    assert h.names() == ["early", "high", "low", "low-too", "late"]


def test_ready_queue_orders_by_priority_then_due_time(h: Harness) -> None:
    p = h.processor
    p.set_jobs(
        [
            job("old-low", start=1),
            job("new-high", start=3, priority=2),
            job("mid-low", start=2),
            job("old-high", start=2, priority=2),
        ],
        T0,
    )
    p.run_due(at(5))  # all due at once: nothing has run yet
    assert [q.job_name for q in p.queued] == ["old-high", "new-high", "old-low", "mid-low"]
    assert p.drain() == 4
    assert h.names() == ["old-high", "new-high", "old-low", "mid-low"]
    assert p.queued == []


def test_a_run_carries_its_slot_and_trigger(h: Harness) -> None:
    p = h.processor
    p.set_jobs([job("a", start=10)], T0)
    p.run_due(at(10))
    (queued,) = p.queued
    assert (queued.job_name, queued.slot, queued.due, queued.trigger) == (
        "a",
        at(10),
        at(10),
        "schedule",
    )
    p.drain()
    assert h.started == [("a", at(10), "schedule")]
    (execution,) = h.finished
    assert execution.slot == at(10) and execution.event is Event.SUCCESSFUL


# -- anchoring, make-up, stop dates --------------------------------------------------------------


def test_a_late_start_does_not_shift_later_slots(h: Harness) -> None:
    p = h.processor
    p.set_jobs([job("a", start=0, every=60)], at(-1))
    assert p.run_due(at(25)) == pytest.approx(35)  # 25 s late; the next slot stays at 60
    assert p.next_run("a") == at(60)
    p.drain()
    p.run_due(at(60.5))
    p.drain()
    assert slots(h) == [("a", at(0)), ("a", at(60))]
    assert p.next_run("a") == at(120)


def test_a_scheduler_held_up_for_several_intervals_runs_once_and_skips(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    p = h.processor
    p.set_jobs([job("a", start=0, every=60)], at(-1))
    with caplog.at_level(logging.WARNING, "jobscheduler.processor"):
        p.run_due(at(150))
    p.drain()
    assert slots(h) == [("a", at(0))]  # the due slot once, not 0, 60 and 120
    assert p.next_run("a") == at(180)  # anchored: the first slot after now
    assert p.stats.skipped == 2
    assert "2 slot(s)" in caplog.text and "'a'" in caplog.text


def test_no_make_up_after_a_restart(h: Harness) -> None:
    p = h.processor
    a = job("a", start=0, every=60)
    p.set_jobs([a], at(-1))
    p.run_due(at(0))
    p.drain()
    # "restarted" much later: slots 60 … 960 were missed while stopped
    p.set_jobs([a.with_changes(priority=1)], at(1000))
    assert p.run_due(at(1000)) == pytest.approx(20)
    assert p.drain() == 0
    p.run_due(at(1020))
    p.drain()
    assert slots(h) == [("a", at(0)), ("a", at(1020))]


def test_set_jobs_replaces_the_set_and_skips_past_slots(h: Harness) -> None:
    p = h.processor
    a = job("a", start=0, every=60)
    p.set_jobs([a, job("b", start=5)], at(-1))
    p.set_jobs([a], at(0.5))  # slot 0 was not dispatched before the new set: not made up
    assert p.next_run("a") == at(60)
    assert p.next_run("b") is None
    assert p.run_due(at(0.5)) == pytest.approx(59.5)
    assert p.drain() == 0


def test_stop_is_inclusive_then_the_job_leaves_the_timeline(h: Harness) -> None:
    p = h.processor
    p.set_jobs([job("a", start=0, every=60, stop=at(120))], at(-1))
    for second in (0, 60, 120):
        p.run_due(at(second))
        p.drain()
    assert slots(h) == [("a", at(0)), ("a", at(60)), ("a", at(120))]
    assert p.next_run("a") is None
    assert p.run_due(at(500)) is None  # nothing left to wait for
    assert p.drain() == 0


def test_a_job_past_its_stop_is_never_scheduled(h: Harness) -> None:
    p = h.processor
    p.set_jobs([job("a", start=0, every=60, stop=at(60))], at(100))
    assert p.next_run("a") is None
    assert p.run_due(at(100)) is None


def test_a_dependent_job_has_no_slots(h: Harness) -> None:
    p = h.processor
    dependent = Job("d", command=["true"], dependence=Dependence("a"))
    p.set_jobs([job("a"), dependent], T0)
    assert p.next_run("d") is None


def test_a_large_batch_is_dispatched_in_order(h: Harness) -> None:
    """A burst (split off the timeline at once) is queued in the order one-by-one dispatch
    gives, and the entries that are not due stay on the timeline."""
    p = h.processor
    due = [job(f"d{i:03}", start=i % 7, priority=i % 3) for i in range(300)]
    later = [job(f"l{i:02}", start=100 + i) for i in range(20)]
    p.set_jobs(later + due, at(-1))
    extra = job("extra", start=50)
    p.run_at(extra, at(3), trigger="dependence")
    assert p.run_due(at(6)) == pytest.approx(54)  # d000 next, at 60
    expected = sorted(
        [(-j.priority, j.start, index, j.name) for index, j in enumerate(due)]
        + [(0, at(3), 10**6, "extra")]
    )
    assert [q.job_name for q in p.queued] == [name for *_, name in expected]
    assert [p.next_run(j.name) for j in later] == [at(100 + i) for i in range(20)]
    assert p.next_run("d010") == at(3 + 60)
    assert p.drain() == 301


def test_ready_keys_order_by_priority_then_due_then_sequence() -> None:
    """The ready queue's int keys sort as (-priority, due, sequence) would, for any priority
    and for instants from year 1 to 9999, to the microsecond."""
    from jobscheduler.engine.keys import micros, run_key

    rng = random.Random(7)
    instants = [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(1684, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        T0,
        T0 + timedelta(microseconds=1),
        datetime(2255, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    ]
    triples = [
        (rng.choice([-(10**12), -5, -1, 0, 1, 3, 10**12]), rng.choice(instants), seq)
        for seq in rng.sample(range(10**6), 400)
    ]
    by_key = sorted(triples, key=lambda t: run_key(t[0], micros(t[1]), t[2]))
    assert by_key == sorted(triples, key=lambda t: (-t[0], t[1], t[2]))


def test_the_first_runs_of_a_batch_are_announced_while_it_is_moved() -> None:
    """`due` tells `on_ready` of runs made ready every few runs, so idle workers can start
    them while the rest of a burst is still being moved; the rest is in its result."""
    from jobscheduler.engine.timeline import Timeline

    queue = Timeline(itertools.count(1))
    heard: list[tuple[int, int]] = []
    queue.connect(lambda count: heard.append((count, len(queue.ready))), lambda name, why: 0)
    queue.put([job(f"j{i}", start=1) for i in range(10)], T0)
    pushed, delay = queue.due(at(1))
    assert heard == [(4, 4), (4, 8)]
    assert (pushed, delay) == (10, pytest.approx(60))


# -- limits --------------------------------------------------------------------------------------


def test_a_queued_scheduled_run_is_not_duplicated(h: Harness) -> None:
    p = h.processor
    p.set_jobs([job("a", start=0, every=1), job("b", start=0, every=1, priority=1)], at(-1))
    for second in range(5):
        p.run_due(at(second))
    assert [(q.job_name, q.slot) for q in p.queued] == [("b", at(0)), ("a", at(0))]
    assert p.stats.coalesced == 8
    assert p.drain() == 2  # no NOT_STARTED notices for the coalesced slots
    assert h.events() == [("b", Event.SUCCESSFUL, None), ("a", Event.SUCCESSFUL, None)]
    assert p.next_run("a") == at(5)


def test_run_now_is_not_coalesced_with_a_queued_scheduled_run(h: Harness) -> None:
    p = h.processor
    a = job("a", start=0)
    p.set_jobs([a], at(-1))
    p.run_due(at(0))
    p.run_now(a)
    p.run_due(at(0))
    assert [q.trigger for q in p.queued] == ["schedule", "run_now"]


@pytest.mark.parametrize(
    ("limit", "ran", "refused"),
    [(1, [0], [10, 20]), (2, [0, 10], []), (None, [0, 10], [])],
)
def test_max_instances_refuses_with_already_running(
    clock: FakeClock, limit: int | None, ran: list[int], refused: list[int]
) -> None:
    def execute(job: Job, ctx: RunContext) -> Execution:
        if ctx.slot == at(0):  # while the first run is active, the next slots come due
            for second in (10, 20):
                clock.set(at(second))
                p.run_due(at(second))
        return h.execute(job, ctx)

    h = Harness(clock, execute=execute)
    p = h.processor
    p.set_jobs([job("a", every=10, max_instances=limit)], at(-1))
    p.run_due(at(0))
    p.drain()
    assert [slot for _, slot in slots(h)] == [at(s) for s in ran]
    not_started = [e for e in h.finished if e.event is Event.NOT_STARTED]
    assert [e.slot for e in not_started] == [at(s) for s in refused]
    for e in not_started:
        assert (e.reason, e.result, e.trigger) == (
            "already running",
            SchedulerResult.ABNORMAL,
            "schedule",
        )
        assert e.started == e.ended
    assert p.stats.refused == len(refused)
    assert len({e.run_id for e in h.finished}) == len(h.finished)
    # with room for two, slot 20 came while slot 10 still waited in the queue: coalesced
    assert p.stats.coalesced == (1 if limit != 1 else 0)


def test_max_instances_counts_run_now_too(h: Harness) -> None:
    p = h.processor
    a = job("a", start=100, max_instances=1)
    p.set_jobs([a], T0)
    p.run_now(a)
    p.run_now(a)
    p.run_due(T0)
    assert [q.trigger for q in p.queued] == ["run_now"]
    p.drain()
    assert h.events() == [
        ("a", Event.NOT_STARTED, "already running"),
        ("a", Event.SUCCESSFUL, None),
    ]


def test_a_refused_one_off_with_a_slot_trigger_is_reported_under_its_slot_and_attempt(
    h: Harness,
) -> None:
    """A one-off start for a slot (a backfill, a retry) refused at the job's limit, or
    dropped with its job, is reported as that slot's try: its waiter (a backfill waits for
    its (slot, attempt)) hears of it, and its record is written under its own key."""
    p = h.processor
    a = job("a", start=100, max_instances=1)
    p.set_jobs([a], T0)
    p.run_now(a)
    p.run_at(a, T0, SlotTrigger("backfill", at(-3600), 2))
    p.run_due(T0)
    p.drain()
    refused = [e for e in h.finished if e.event is Event.NOT_STARTED]
    assert [(e.slot, e.attempt, e.trigger, e.reason) for e in refused] == [
        (at(-3600), 2, "backfill", "already running")
    ]
    # A pending one cancelled (its job paused or changed) is reported, not dropped silently.
    p.run_at(a, at(50), SlotTrigger("backfill", at(-5400), 1))
    assert p.cancel_pending("a", "job paused") == 1
    p.drain()
    cancelled = [e for e in h.finished if e.event is Event.NOT_STARTED][1:]
    assert [(e.slot, e.attempt, e.reason) for e in cancelled] == [(at(-5400), 1, "job paused")]
    # A pending one dropped with its job (removed) is reported so too.
    p.run_at(a, at(50), SlotTrigger("backfill", at(-7200), 3, reported="backfill"))
    p.remove_job("a", T0)
    p.drain()
    dropped = [e for e in h.finished if e.event is Event.NOT_STARTED][2:]
    assert [(e.slot, e.attempt, e.trigger, e.reason) for e in dropped] == [
        (at(-7200), 3, "backfill", "job removed")
    ]


def test_a_backfill_run_of_a_job_with_an_overlap_policy_is_held_to_one_at_a_time(
    h: Harness,
) -> None:
    """Without ``max_instances``, an `overlap` policy limits a backfill's runs to one at once
    (refused "already running" beside a run: the backfill waits and tries again); a
    ``run_now`` is not limited so, as before."""
    p = h.processor
    a = job("a", start=100, overlap="skip")
    p.set_jobs([a], T0)
    p.run_now(a)
    p.run_at(a, T0, SlotTrigger("backfill", at(-3600)))
    p.run_now(a)
    p.run_due(T0)
    assert [q.trigger for q in p.queued] == ["run_now", "run_now"]
    p.drain()
    refused = [e for e in h.finished if e.event is Event.NOT_STARTED]
    assert [(e.slot, e.trigger, e.reason) for e in refused] == [
        (at(-3600), "backfill", "already running")
    ]


# -- pause, resume, update, remove ---------------------------------------------------------------


def test_pause_and_resume(h: Harness) -> None:
    p = h.processor
    a = job("a", start=0, every=60)
    p.set_jobs([a], at(-1))
    p.run_due(at(0))  # slot 0 queued
    p.update_job(a.with_changes(enabled=False), at(1))
    assert p.next_run("a") is None
    assert p.queued == []
    assert p.run_due(at(500)) is None
    p.drain()
    assert h.events() == [("a", Event.NOT_STARTED, "job paused")]
    p.update_job(a, at(500))  # resumed: from the first slot after now
    assert p.next_run("a") == at(540)
    p.run_due(at(540))
    p.drain()
    assert slots(h) == [("a", at(540))]


def test_pause_keeps_queued_run_now(h: Harness) -> None:
    p = h.processor
    a = job("a", start=100)
    p.set_jobs([a], T0)
    p.run_now(a)
    p.run_due(T0)
    p.update_job(a.with_changes(enabled=False))
    assert [q.trigger for q in p.queued] == ["run_now"]


def test_a_paused_job_can_run_now(h: Harness) -> None:
    p = h.processor
    paused = job("a", start=0, enabled=False)
    p.set_jobs([paused], at(-1))
    assert p.next_run("a") is None
    p.run_now(paused)
    p.run_due(T0)
    p.drain()
    assert h.started == [("a", None, "run_now")]


def test_update_with_the_same_schedule_keeps_the_slot(h: Harness) -> None:
    p = h.processor
    a = job("a", start=0, every=60)
    p.set_jobs([a, job("b", start=0)], at(-1))
    p.update_job(a.with_changes(priority=9, description="x"), at(0.5))  # slot 0 due, kept
    p.run_due(at(0.5))
    assert [q.job_name for q in p.queued] == ["a", "b"]  # with its new priority
    p.update_job(a.with_changes(interval="90 seconds"), at(10))  # a new schedule: from now
    assert p.next_run("a") == at(90)


def test_remove_job_reports_its_queued_and_pending_runs(h: Harness) -> None:
    p = h.processor
    a = job("a", start=0)
    p.set_jobs([a, job("b", start=0)], at(-1))
    p.run_due(at(0))
    p.run_at(a, at(30))
    assert p.remove_job("a", at(1)) is True
    assert p.remove_job("a", at(1)) is False
    assert p.next_run("a") is None
    assert [q.job_name for q in p.queued] == ["b"]
    assert p.pending == []
    p.drain()
    assert h.events() == [
        ("a", Event.NOT_STARTED, "job removed"),
        ("a", Event.NOT_STARTED, "job removed"),
        ("b", Event.SUCCESSFUL, None),
    ]
    assert p.run_due(at(30)) == pytest.approx(30)  # b at 60; nothing of a


def test_many_changes_keep_the_timeline_small(h: Harness) -> None:
    p = h.processor
    jobs = [job(f"j{i}", start=100) for i in range(50)]
    p.set_jobs(jobs, T0)
    for round_ in range(100):
        p.add_jobs([j.with_changes(interval=f"{61 + round_} seconds") for j in jobs], T0)
    assert len(p.timeline.timeline) < 50 + 2 * 1024  # stale entries were compacted away
    p.run_due(at(100))
    assert len(p.queued) == 50


# -- one-off starts --------------------------------------------------------------------------------


def test_run_now_runs_once_outside_the_schedule(h: Harness) -> None:
    p = h.processor
    a = job("a", start=100)
    p.set_jobs([a], T0)
    p.run_now(a)
    assert p.next_run("a") == T0
    p.run_due(T0)
    p.drain()
    assert h.started == [("a", None, "run_now")]
    assert p.next_run("a") == at(100)  # the schedule is untouched


def test_run_at_and_cancel_pending(h: Harness) -> None:
    p = h.processor
    d = Job("d", command=["true"], dependence=Dependence("a"))
    p.set_jobs([d], T0)
    p.run_at(d, at(30))
    p.run_at(d, at(40), trigger="custom")
    assert [(q.due, q.trigger) for q in p.pending] == [(at(30), "dependence"), (at(40), "custom")]
    assert p.next_run("d") == at(30)
    assert p.run_due(at(29)) == pytest.approx(1)
    p.run_due(at(30))
    assert [(q.slot, q.due, q.trigger) for q in p.queued] == [(None, at(30), "dependence")]
    assert p.cancel_pending("d") == 1
    assert p.cancel_pending("d") == 0
    assert p.run_due(at(40)) is None
    p.drain()
    assert h.started == [("d", None, "dependence")]  # the cancelled one: no run, no event
    assert len(h.finished) == 1


class _Claimed(str):
    """A one-off start's trigger that brings the run id of a run claimed already (as a
    submitted run claimed with its queue row's take)."""

    run_id: str

    def __new__(cls, run_id: str) -> _Claimed:
        self = super().__new__(cls, "submit")
        self.run_id = run_id
        return self


def test_cancel_pending_reports_a_start_claimed_already(h: Harness) -> None:
    """A dropped start whose run was claimed already ends NOT_STARTED under that run id (its
    record and queue row end), not silently; an unclaimed one is dropped silently."""
    p = h.processor
    d = Job("d", command=["true"], on_demand=True)
    p.set_jobs([d], T0)
    p.run_at(d, at(30), trigger=_Claimed("run-7"))
    p.run_at(d, at(40), trigger="custom")
    assert p.cancel_pending("d", "job paused") == 2
    assert p.run_due(at(40)) is None
    p.drain()
    assert h.started == []
    [ended] = h.finished
    assert (ended.run_id, ended.event, ended.reason) == ("run-7", Event.NOT_STARTED, "job paused")


def test_run_at_a_job_that_is_not_registered(h: Harness) -> None:
    p = h.processor
    stranger = job("stranger", start=0)
    p.run_at(stranger, at(5))
    assert p.next_run("stranger") == at(5)
    p.run_due(at(5))
    p.drain()
    assert h.started == [("stranger", None, "dependence")]
    assert p.next_run("stranger") is None  # it was never scheduled
    assert "stranger" not in p.timeline.states  # forgotten once idle


# -- exceptions ----------------------------------------------------------------------------------


def test_an_execute_that_raises_is_a_failed_run(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    def execute(job: Job, ctx: RunContext) -> Execution:
        if job.name == "bad":
            raise RuntimeError("runner bug")
        return h.execute(job, ctx)

    h = Harness(clock, execute=execute)
    p = h.processor
    p.set_jobs([job("bad", start=0, priority=1), job("good", start=0)], at(-1))
    p.run_due(at(0))
    with caplog.at_level(logging.ERROR, "jobscheduler.processor"):
        p.drain()
    bad, good = h.finished
    assert (bad.job_name, bad.event, bad.result, bad.reason) == (
        "bad",
        Event.FAILED,
        SchedulerResult.ABNORMAL,
        "scheduler error",
    )
    assert bad.error == "RuntimeError: runner bug" and bad.ended is not None
    assert good.event is Event.SUCCESSFUL
    assert "runner bug" in caplog.text


def test_an_on_finished_that_raises_is_logged(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def on_finished(job: Job, execution: Execution) -> None:
        seen.append(job.name)
        raise ValueError("handler bug")

    h = Harness(clock)
    p = JobProcessor(h.execute, on_finished, clock=clock)
    p.set_jobs([job("a", start=0), job("b", start=0)], at(-1))
    p.run_due(at(0))
    with caplog.at_level(logging.ERROR, "jobscheduler.processor"):
        assert p.drain() == 2
    assert seen == ["a", "b"]
    assert caplog.text.count("on_finished for run") == 2


def test_a_trigger_that_raises_drops_only_its_job(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    p = h.processor
    model = job("broken", start=0)
    calls = 0

    class Broken(Job):
        """A job whose trigger works once, then raises."""

        __slots__ = ()

        def next_after(self, t: datetime) -> datetime | None:
            nonlocal calls
            calls += 1
            if calls > 1:
                raise ArithmeticError("trigger bug")
            return at(0)

    broken = Broken(**{f.name: getattr(model, f.name) for f in dataclasses.fields(model)})
    p.set_jobs([broken, job("fine", start=0)], at(-1))
    with caplog.at_level(logging.ERROR, "jobscheduler.processor"):
        p.run_due(at(0))
    p.drain()
    assert sorted(h.names()) == ["broken", "fine"]
    assert p.next_run("broken") is None
    assert p.next_run("fine") == at(60)
    assert "trigger bug" in caplog.text


def test_invalid_arguments() -> None:
    clock = FakeClock(T0)
    with pytest.raises(ValueError, match="max_workers"):
        JobProcessor(lambda j, c: None, lambda j, e: None, clock=clock, max_workers=0)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="negative"):
        JobProcessor(lambda j, c: None, lambda j, e: None, clock=clock, early_wake=-1)  # type: ignore[arg-type,return-value]


def test_due_with_a_limit_leaves_the_rest_on_the_timeline() -> None:
    """A worker that dispatches a slot itself moves only the first few runs; the rest stays
    due on the timeline, in order, for the scheduler thread."""
    from jobscheduler.engine.timeline import Timeline

    queue = Timeline(itertools.count(1))
    queue.put([job(f"j{i}", start=1, priority=i % 2) for i in range(10)], T0)
    pushed, delay = queue.due(at(1), limit=4)
    assert (pushed, delay) == (4, 0.0)
    assert [q.job_name for q in queue.ready.runs()] == ["j1", "j3", "j5", "j7"]
    pushed, delay = queue.due(at(1))
    assert (pushed, delay) == (6, pytest.approx(60))
    order = ["j1", "j3", "j5", "j7", "j9", "j0", "j2", "j4", "j6", "j8"]
    assert [q.job_name for q in queue.ready.runs()] == order


def test_a_bug_in_a_large_batch_loses_no_other_slot(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entries of a burst not reached when dispatching one of them raised go back on the
    timeline: they run at the next pass; the schedule of the one that raised goes on."""
    from jobscheduler.engine.timeline import Timeline

    p = h.processor
    real_admit = Timeline._admit
    raised = []

    def admit(self: Timeline, state: Any, job: Job, *args: Any) -> int:
        if job.name == "j100" and not raised:
            raised.append(job.name)
            raise RuntimeError("dispatch bug")
        return real_admit(self, state, job, *args)

    monkeypatch.setattr(Timeline, "_admit", admit)
    p.set_jobs([job(f"j{i:03}", start=1) for i in range(300)], T0)
    with pytest.raises(RuntimeError, match="dispatch bug"):
        p.run_due(at(1))
    p.run_due(at(1))
    p.drain()
    assert raised == ["j100"]
    assert sorted(h.names()) == [f"j{i:03}" for i in range(300) if i != 100]
    assert all(p.next_run(f"j{i:03}") == at(61) for i in range(300))


# -- state bookkeeping (jobstate) -------------------------------------------------------------


def test_an_index_reused_after_a_removal_does_not_wake_the_old_entry(h: Harness) -> None:
    """A removed job's state is forgotten and its table index reused by the next new job;
    the old job's timeline entry still names that index, and must stay dead."""
    p = h.processor
    p.set_jobs([job("old", start=10)], at(-1))
    assert p.remove_job("old", at(0))
    p.add_job(job("new", start=20), at(0))
    assert p.timeline.states["new"].index == 0  # the index "old" had
    p.run_due(at(10))
    p.drain()
    assert h.names() == []
    p.run_due(at(20))
    p.drain()
    assert slots(h) == [("new", at(20))]
    assert p.next_run("new") == at(80)


def test_a_waiting_job_holds_no_activity_until_it_is_next(h: Harness) -> None:
    """Only the job whose slot is next gets its Activity (and its slot's datetime) ahead of
    its run, while the processor waits for it."""
    p = h.processor
    p.set_jobs([job("a", start=10), job("b", start=30), job("c", start=50)], at(-1))
    states = p.timeline.states
    assert [states[n].act for n in "abc"] == [None, None, None]
    p.run_due(at(10))
    assert states["a"].act is not None and states["b"].act is not None
    assert states["c"].act is None
    p.drain()
    act = states["a"].act
    assert states["a"].idle and states["a"].on_timeline
    assert act.scheduled is act.scheduled_slot is act.scheduled_job is None  # nothing kept


def test_slots_before_1970_are_kept_to_the_microsecond() -> None:
    start = datetime(1960, 5, 1, 12, 0, 0, 250, tzinfo=UTC)
    h = Harness(FakeClock(start - timedelta(seconds=1)))
    p = h.processor
    early = Job("early", command=["true"], start=start, interval="1 minute", timezone="UTC")
    p.set_jobs([early], start - timedelta(seconds=1))
    assert p.next_run("early") == start
    p.run_due(start)
    p.drain()
    assert slots(h) == [("early", start)]
    assert p.next_run("early") == start + timedelta(minutes=1)


def test_priorities_beyond_the_key_range_still_order_first() -> None:
    h = Harness(FakeClock(T0), max_workers=1)
    p = h.processor
    p.set_jobs(
        [job("low", start=1, priority=-(10**20)), job("high", start=1, priority=10**20)],
        at(0),
    )
    p.run_due(at(1))
    p.drain()
    assert h.names() == ["high", "low"]


def test_a_naive_now_given_to_the_processor_is_utc(h: Harness) -> None:
    p = h.processor
    naive = T0.replace(tzinfo=None)
    p.set_jobs([job("a", start=10)], naive)
    assert p.run_due(naive + timedelta(seconds=5)) == pytest.approx(5)
    p.run_due(naive + timedelta(seconds=10))
    p.drain()
    assert slots(h) == [("a", at(10))]
