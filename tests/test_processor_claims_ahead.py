"""Claims ahead (`JobProcessor.claim_ahead`, `engine.ahead`): scheduled slots claimed before
they are due, in one call per round, and started without a claim when they come. The loop
body `ClaimsAhead.claim_due(now)` is called directly, on a `FakeClock`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_processor_support import T0, WAIT, Harness, at, job

from jobscheduler.clock import FakeClock
from jobscheduler.engine import ahead as ahead_module
from jobscheduler.engine.ahead import GRACE, LEAD, SHARE_DELAY, ClaimsAhead
from jobscheduler.engine.keys import micros, time_of
from jobscheduler.engine.timeline import Timeline
from jobscheduler.model.event import Event
from jobscheduler.model.job import Job
from jobscheduler.model.node import default_node_name
from jobscheduler.model.runid import RunIds
from jobscheduler.policies.overlap import SKIPPED
from jobscheduler.runners.context import RunContext


class Store:
    """The claims of a node: ahead (answers by job name, default True), at the start, the
    confirms and the releases, recorded."""

    def __init__(self, answers: dict[str, bool | Exception] | None = None) -> None:
        self.answers = answers or {}
        self.error: Exception | None = None
        self.rounds: list[list[tuple[str, datetime, str]]] = []
        self.single: list[tuple[str, str]] = []
        self.confirmed: list[tuple[str, str]] = []
        self.released: list[str] = []
        self.fenced = False
        self.hold: threading.Event | None = None  # a round waits for it

    def ahead(self, slots: Sequence[tuple[Job, datetime, str]]) -> list[bool | Exception]:
        self.rounds.append([(job.name, slot, rid) for job, slot, rid in slots])
        if self.hold is not None:
            assert self.hold.wait(WAIT)
        if self.error is not None:
            raise self.error
        return [self.answers.get(job.name, True) for job, _, _ in slots]

    def one(self, job: Job, ctx: RunContext) -> bool:
        self.single.append((job.name, ctx.run_id))
        return True

    def confirm(self, job: Job, ctx: RunContext) -> bool:
        if self.fenced:
            raise RuntimeError("fenced")
        self.confirmed.append((job.name, ctx.run_id))
        return True

    def release(self, run_ids: Sequence[str]) -> int:
        self.released.extend(run_ids)
        return len(run_ids)

    def run_id(self, name: str, slot: datetime) -> str:
        """The run id slot `slot` of job `name` was claimed ahead with."""
        return next(rid for r in self.rounds for n, s, rid in r if (n, s) == (name, slot))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def _set_up(
    clock: FakeClock, store: Store, nodes: list[str] | None = None
) -> tuple[Harness, ClaimsAhead]:
    """A processor claiming ahead through `store`; `nodes`: the live nodes it shares the
    slots with (its own name added), else none (alone)."""
    h = Harness(clock, claim=store.one)
    live = None if nodes is None else [*nodes, default_node_name()]  # the processor's name
    ahead = h.processor.claim_ahead(
        store.ahead, store.confirm, store.release, None if live is None else lambda: live
    )
    ahead.start(thread=False)
    return h, ahead


def test_the_slots_due_within_the_lead_are_claimed_in_one_round(clock: FakeClock) -> None:
    store = Store()
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("a", start=1), job("b", start=1.2), job("c", start=2)], T0)
    # Up to 1.15 s: "a" only; the next round is LEAD before "b" (before a's dispatch).
    assert ahead.claim_due(at(0.9)) == pytest.approx(1.2 - LEAD - 0.9)
    assert [[name for name, _, _ in r] for r in store.rounds] == [["a"]]
    ahead.claim_due(at(0.95))
    assert [[name for name, _, _ in r] for r in store.rounds] == [["a"], ["b"]]
    assert ahead.claim_due(at(0.96)) == pytest.approx(1.1 - 0.96)  # nothing new: after a's start
    assert len(store.rounds) == 2


def test_a_large_round_is_sent_in_parts_soonest_first(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ahead_module, "ROUND", 2)
    store = Store()
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job(f"j{i}", start=1.2 - i / 100) for i in range(5)], T0)
    ahead.claim_due(at(0.96))
    assert [[name for name, _, _ in r] for r in store.rounds] == [
        ["j4", "j3"],
        ["j2", "j1"],
        ["j0"],
    ]
    p.run_due(at(1.2))
    assert p.drain() == 5 and store.single == []


def test_a_slot_claimed_ahead_starts_without_a_claim_under_its_run_id(clock: FakeClock) -> None:
    store = Store()
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("a", start=1), job("b", start=1)], T0)
    ahead.claim_due(at(0.8))
    p.run_due(at(1))
    assert p.drain() == 2
    assert sorted(h.names()) == ["a", "b"]
    assert store.single == []  # not claimed again
    assert sorted(store.confirmed) == sorted(
        (name, store.run_id(name, at(1))) for name in ("a", "b")
    )
    assert {e.run_id for e in h.finished} == {store.run_id(n, at(1)) for n in ("a", "b")}
    assert ahead.slots == {}


def test_a_slot_another_node_claimed_is_dropped_without_a_report(clock: FakeClock) -> None:
    store = Store({"a": False})
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("a", start=1), job("b", start=1)], T0)
    ahead.claim_due(at(0.8))
    p.run_due(at(1))
    p.drain()
    assert h.names() == ["b"]
    assert [e.job_name for e in h.finished] == ["b"]
    assert p.stats.claims_refused == 1 and p.stats.started == 1 and p.running_count == 0


def test_a_round_that_failed_leaves_the_claims_to_the_start(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store()
    store.error = ConnectionError("store away")
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("a", start=1, every=1), job("b", start=1, every=1)], T0)
    with caplog.at_level(logging.WARNING, "jobscheduler.processor"):
        ahead.claim_due(at(0.8))
        ahead.claim_due(at(1.8))
    warned = [r for r in caplog.records if "claiming" in r.getMessage()]
    assert len(warned) == 1  # once until a round works
    assert "store away" in warned[0].getMessage()
    p.run_due(at(1))
    p.drain()
    assert sorted(name for name, _ in store.single) == ["a", "b"]  # claimed when due
    assert sorted(h.names()) == ["a", "b"]


def test_a_run_that_comes_before_its_answer_waits_for_it(clock: FakeClock) -> None:
    store = Store()
    store.hold = threading.Event()
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("a", start=1)], T0)
    claiming = threading.Thread(target=ahead.claim_due, args=(at(0.9),))
    claiming.start()
    for _ in range(1000):
        if store.rounds:
            break
        threading.Event().wait(0.005)
    p.run_due(at(1))
    draining = threading.Thread(target=p.drain)
    draining.start()
    draining.join(0.2)
    assert draining.is_alive() and h.names() == []  # waits for the round's answer
    store.hold.set()
    claiming.join(WAIT)
    draining.join(WAIT)
    assert h.names() == ["a"] and store.single == []


def test_jobs_with_a_limit_are_claimed_ahead_and_busy_ones_when_due(clock: FakeClock) -> None:
    """A slot of a job with a limit is claimed ahead too (its claim counts the job's runs on
    every node: `StoreClaims.claim_ahead`); answered due (None: the job was busy), it is
    forgotten and its run claimed when it starts, where the limit decides."""
    store = Store({"busy": None})
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs(
        [
            job("plain", start=1),
            job("limited", start=1, max_instances=2),
            job("skipping", start=1, overlap="skip"),
            job("queued", start=1, overlap="queue"),
            job("busy", start=1, max_instances=1, overlap="skip"),
        ],
        T0,
    )
    ahead.claim_due(at(0.9))
    assert [sorted(name for name, _, _ in r) for r in store.rounds] == [
        ["busy", "limited", "plain", "queued", "skipping"]
    ]
    assert sorted(name for name, _ in ahead.slots) == ["limited", "plain", "queued", "skipping"]
    p.run_due(at(1))
    p.drain()
    assert [name for name, _ in store.single] == ["busy"]  # claimed when due, a new run id
    assert store.single[0][1] != store.run_id("busy", at(1))
    assert sorted(name for name, _ in store.confirmed) == ["limited", "plain", "queued", "skipping"]
    assert sorted(h.names()) == ["busy", "limited", "plain", "queued", "skipping"]
    assert ahead.slots == {}


def test_a_run_dispatched_before_its_due_answer_is_claimed_when_it_starts(
    clock: FakeClock,
) -> None:
    store = Store({"busy": None})
    store.hold = threading.Event()
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("busy", start=1, max_instances=1)], T0)
    claiming = threading.Thread(target=ahead.claim_due, args=(at(0.9),))
    claiming.start()
    for _ in range(1000):
        if store.rounds:
            break
        threading.Event().wait(0.005)
    p.run_due(at(1))  # dispatched with its claim ahead, not answered yet
    draining = threading.Thread(target=p.drain)
    draining.start()
    store.hold.set()
    claiming.join(WAIT)
    draining.join(WAIT)
    # Claimed as it starts, under the run id of its claim ahead (nothing was written).
    assert store.single == [("busy", store.run_id("busy", at(1)))]
    assert h.names() == ["busy"] and store.confirmed == []


def test_a_stop_leaves_the_slots_answered_due_unrecorded(clock: FakeClock) -> None:
    store = Store({"busy": None})
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("busy", start=1, overlap="skip"), job("won", start=1, overlap="skip")], T0)
    ahead.claim_due(at(0.9))
    with p._lock:
        ahead.close()
        assert ahead.drop_future(at(0.95), "scheduler stopped") == 1  # "won" only


def test_a_slot_refused_when_due_is_reported_under_its_claims_run_id(clock: FakeClock) -> None:
    store = Store()
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("a", start=1)], T0)
    ahead.claim_due(at(0.9))  # claimed ahead before the job had a limit
    a = job("a", start=1, max_instances=1)
    p.update_job(a, at(0.92))  # the same schedule: it keeps its slot, claimed
    clock.set(at(0.95))
    p.run_now(a)  # queued first: the slot finds the job at its limit
    p.run_due(at(1))
    p.drain()
    refused = [e for e in h.finished if e.event is Event.NOT_STARTED]
    assert [(e.job_name, e.reason, e.run_id) for e in refused] == [
        ("a", "already running", store.run_id("a", at(1)))
    ]
    assert ahead.slots == {}


def test_a_skipped_slot_is_reported_under_its_claims_run_id(clock: FakeClock) -> None:
    store = Store()
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("a", start=1, every=1)], T0)
    gate = h.gate("a")
    ahead.claim_due(at(0.9))
    p.run_due(at(1))
    worker = threading.Thread(target=p.drain)
    worker.start()
    h.wait_started(1)
    ahead.claim_due(at(1.9))  # claimed ahead before the job had a limit
    p.update_job(job("a", start=1, every=1, overlap="skip"), at(1.92))
    p.run_due(at(2))  # a is still running: the slot is skipped
    gate.set()
    worker.join(WAIT)
    p.drain()
    skipped = [e for e in h.finished if e.reason == SKIPPED]
    assert [e.run_id for e in skipped] == [store.run_id("a", at(2))]


def test_claims_whose_runs_never_come_are_released_after_the_grace(clock: FakeClock) -> None:
    store = Store()
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("a", start=1, every=1), job("gone", start=1)], T0)
    ahead.claim_due(at(0.8))
    p.remove_job("gone")  # its slot is never dispatched
    p.run_due(at(1))  # a's slot 1 is queued, and stays so (no worker takes it)
    ahead.claim_due(at(1.8))
    p.run_due(at(2))  # slot 2 comes while slot 1 waits: merged into it (coalesced)
    assert p.stats.coalesced == 1
    ahead.claim_due(at(1 + GRACE - 0.1))
    assert store.released == []  # not past the grace yet
    ahead.claim_due(at(2 + GRACE + 0.1))
    assert sorted(store.released) == sorted([store.run_id("gone", at(1)), store.run_id("a", at(2))])
    p.drain()  # slot 1, still queued, runs on its claim
    assert [e.run_id for e in h.finished] == [store.run_id("a", at(1))]


def test_a_node_that_lost_its_lease_starts_nothing_claimed_ahead(clock: FakeClock) -> None:
    store = Store()
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("a", start=1)], T0)
    ahead.claim_due(at(0.9))
    store.fenced = True
    p.run_due(at(1))
    p.drain()
    assert h.names() == []
    [execution] = h.finished
    assert execution.event is Event.NOT_STARTED
    assert execution.reason == "claim failed: RuntimeError: fenced"
    assert execution.run_id == store.run_id("a", at(1))


def test_a_stop_drops_the_slots_claimed_ahead_on_their_claims(clock: FakeClock) -> None:
    store = Store()
    h = Harness(clock, claim=store.one)
    p = h.processor
    ahead = p.claim_ahead(store.ahead, store.confirm, store.release)
    p.set_jobs([job("a", start=0.2), job("b", start=0.2)], T0)
    p.start()  # the thread claims what is due up to LEAD
    for _ in range(2000):
        if ahead.rounds:
            break
        threading.Event().wait(0.005)
    assert [sorted(n for n, _, _ in r) for r in store.rounds] == [["a", "b"]]
    p.stop()  # a FakeClock does not move by itself: the slots cannot come
    h.wait_finished(2)
    assert sorted((e.job_name, e.event, e.reason, e.run_id) for e in h.finished) == [
        (n, Event.NOT_STARTED, "scheduler stopped", store.run_id(n, at(0.2))) for n in "ab"
    ]
    assert store.released == [] and ahead.slots == {}
    p.shutdown()


def test_jobs_pinned_to_hosts_are_claimed_when_they_start(clock: FakeClock) -> None:
    store = Store()
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("a", start=1), job("pinned", start=1, host="n*")], T0)
    ahead.claim_due(at(0.9))
    assert [[n for n, _, _ in r] for r in store.rounds] == [["a"]]


@settings(max_examples=60, deadline=None)
@given(
    starts=st.lists(st.integers(0, 40), min_size=0, max_size=40),
    removed=st.sets(st.integers(0, 39)),
    after=st.integers(-5, 45),
    width=st.integers(0, 20),
)
def test_the_upcoming_entries_are_those_of_the_window(
    starts: list[int], removed: set[int], after: int, width: int
) -> None:
    """`Timeline.upcoming` walks only part of the heap: it finds what a look at every job finds."""
    queue = Timeline(RunIds(lambda: T0))
    jobs = [job(f"j{i}", start=s, every=50) for i, s in enumerate(starts)]
    queue.put(jobs, T0 - (at(1) - T0))
    for i in removed:
        if i < len(jobs):
            queue.remove(f"j{i}", T0)
    after_us, until_us = micros(at(after)), micros(at(after + width))
    found, soonest, following = queue.upcoming(after_us, until_us)
    live = {
        name: time_of(state.key)
        for name, state in queue.states.items()
        if state.registered and state.key in set(queue.timeline)
    }
    assert sorted((j.name, micros(s)) for j, s in found) == sorted(
        (n, t) for n, t in live.items() if after_us < t <= until_us
    )
    within = [t for t in live.values() if t <= until_us]
    later = [t for t in live.values() if t > until_us]
    assert soonest == (min(within) if within else None)
    assert following == (min(later) if later else None)


def test_a_node_claims_the_slots_it_owns_first_and_the_others_later(clock: FakeClock) -> None:
    """Two live nodes: each slot has an owner (a hash both compute alike); this node claims
    its own at once and the other's `SHARE_DELAY` later (if its owner has not)."""
    store = Store()
    h, ahead = _set_up(clock, store, ["n0"])
    p = h.processor
    nodes = ["n0", default_node_name()]
    names = [f"j{i:02}" for i in range(40)]
    p.set_jobs([job(n, start=1) for n in names], T0)
    delay = ahead.claim_due(at(0.75))
    assert delay == pytest.approx(SHARE_DELAY)
    [first] = store.rounds
    mine = {n for n, _, _ in first}
    assert 5 < len(mine) < 35  # about half
    ahead.claim_due(at(0.75 + SHARE_DELAY))
    assert [{n for n, _, _ in r} for r in store.rounds[1:]] == [set(names) - mine]
    # The other node, with the same list, owns exactly the rest.
    other = Store()
    o = Harness(FakeClock(T0), claim=other.one)
    o_ahead = o.processor.claim_ahead(other.ahead, other.confirm, other.release, lambda: nodes)
    o_ahead._name = "n0"
    o_ahead.start(thread=False)
    o.processor.set_jobs([job(n, start=1) for n in names], T0)
    o_ahead.claim_due(at(0.75))
    assert {n for n, _, _ in other.rounds[0]} == set(names) - mine


def test_a_node_not_among_the_live_ones_claims_every_slot_at_once(clock: FakeClock) -> None:
    store = Store()
    h = Harness(clock, claim=store.one)
    p = h.processor
    ahead = p.claim_ahead(store.ahead, store.confirm, store.release, lambda: ["n0", "n9"])
    ahead.start(thread=False)
    p.set_jobs([job(f"j{i}", start=1) for i in range(10)], T0)
    ahead.claim_due(at(0.75))
    assert [len(r) for r in store.rounds] == [10]


def test_a_run_whose_round_never_answers_is_claimed_when_due(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However a round is lost, its runs do not wait for it for ever (`ANSWER_WAIT`)."""
    monkeypatch.setattr(ahead_module, "ANSWER_WAIT", 0.05)
    store = Store()
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.set_jobs([job("a", start=1)], T0)
    with p._lock:  # a round registered and never sent
        ahead._register([(job("a", start=1), at(1), "lost-round")])
    p.run_due(at(1))
    p.drain()
    assert h.names() == ["a"] and store.single == [("a", "lost-round")]


def test_a_stop_answers_the_rounds_left_for_later(clock: FakeClock) -> None:
    store = Store()
    h, ahead = _set_up(clock, store, ["n0"])
    p = h.processor
    p.set_jobs([job(f"j{i:02}", start=1) for i in range(20)], T0)
    ahead.claim_due(at(0.75))  # the other node's share waits SHARE_DELAY
    later = [entry for entry in ahead.slots.values() if not entry[0].done.is_set()]
    assert later
    with p._lock:
        ahead.close()
    assert all(isinstance(batch.answer(i), RuntimeError) for batch, i in later)


def test_a_limited_job_busy_here_is_not_claimed_ahead(clock: FakeClock) -> None:
    """A job with a limit whose runs here reach it is busy for the store too: its next slot
    is not asked about ahead (no count of its runs), and is claimed when due."""
    store = Store()
    h, ahead = _set_up(clock, store)
    p = h.processor
    p.skip_in_claims()
    p.set_jobs([job("a", start=1, every=1, overlap="skip"), job("b", start=1, every=1)], T0)
    gate = h.gate("a")
    ahead.claim_due(at(0.9))
    p.run_due(at(1))
    worker = threading.Thread(target=p.drain)
    worker.start()
    h.wait_started(1)
    ahead.claim_due(at(1.9))  # a still runs here: only b's slot 2 is claimed ahead
    assert [sorted(n for n, _, _ in r) for r in store.rounds] == [["a", "b"], ["b"]]
    p.run_due(at(2))
    gate.set()
    worker.join(WAIT)
    p.drain()
    assert ("a", store.run_id("a", at(1))) in store.confirmed
    assert [name for name, _ in store.single] == ["a"]  # slot 2, claimed when due
