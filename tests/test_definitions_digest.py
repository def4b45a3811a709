"""What the digest of a node's definitions costs, on a FakeClock: the same digest whatever
the order the jobs came in, another one when one job changes, each job digested once however
many jobs come at once, nothing digested while runs are due (whole at the next heartbeat at
the latest), and nothing at all where no other node can see the store (a memory store the
scheduler made). Counted by the calls of `digest.job_digest`, never timed."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace
from datetime import timedelta

import pytest
from test_node_definitions import LEASE, clock, made, published, started, store, wait_for
from test_scheduler import T0, internal

from jobscheduler import FakeClock, Job
from jobscheduler.cluster import digest as module
from jobscheduler.cluster.digest import DefinitionsDigest, definitions_digest
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import MemoryStateStore

__all__ = ["clock", "made", "store"]  # the fixtures, used by name


@pytest.fixture
def digested(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the jobs a node's `DefinitionsDigest` digested, in order (the test's own
    `definitions_digest` calls, which compute the expected digests, not counted)."""
    names: list[str] = []
    whole = module.job_digest

    def counted(name: str, job: Job) -> str:
        if sys._getframe(1).f_code.co_name == "_digest_pending":
            names.append(name)
        return whole(name, job)

    monkeypatch.setattr(module, "job_digest", counted)
    return names


def jobs_of(count: int, prefix: str = "j") -> list[Job]:
    return [internal(f"{prefix}{i}", f"k{i}") for i in range(count)]


def test_the_same_digest_whatever_the_order_the_jobs_came_in(
    store: MemoryStateStore, made: list[Scheduler], clock: FakeClock
) -> None:
    jobs = jobs_of(50)
    one = started(store, made, clock, "n1", *jobs)
    two = started(store, made, clock, "n2", *reversed(jobs))
    three = started(store, made, clock, "n3")
    for job in jobs[::2] + jobs[1::2]:  # one at a time, in yet another order
        three.add_job(job)
    digest = definitions_digest({job.name: job for job in jobs})
    wait_for(lambda: published(store, "n3").definitions_digest == digest, "n3's digest")
    assert one.catalog.jobs.keys() == two.catalog.jobs.keys() == three.catalog.jobs.keys()
    assert [published(store, n).definitions_digest for n in ("n1", "n2", "n3")] == [digest] * 3
    # In pieces or whole, in any order of the map: the same digest.
    cache = DefinitionsDigest()
    backwards = {job.name: job for job in reversed(jobs)}
    while not cache.prepare(backwards, 7):
        pass
    assert cache.of(backwards)[0] == digest


def test_one_job_changed_changes_the_digest_and_is_the_only_one_digested_again(
    store: MemoryStateStore, made: list[Scheduler], clock: FakeClock, digested: list[str]
) -> None:
    jobs = jobs_of(20)
    s = started(store, made, clock, "n1", *jobs)
    before = published(store, "n1").definitions_digest
    assert Counter(digested) == Counter(job.name for job in jobs)
    digested.clear()
    s.modify_job(replace(jobs[3], timeout=timedelta(seconds=9)))
    wait_for(lambda: published(store, "n1").definitions_digest != before, "the new digest")
    assert digested == ["j3"]
    assert published(store, "n1").definitions_digest == definitions_digest(s.catalog.jobs)


def test_ten_thousand_jobs_added_to_a_running_node_are_digested_once_each(
    store: MemoryStateStore, made: list[Scheduler], clock: FakeClock, digested: list[str]
) -> None:
    s = started(store, made, clock, "n1", internal("first", "k"))
    digested.clear()
    jobs = jobs_of(10_000)
    s.add_jobs(jobs)
    names = tuple(sorted([job.name for job in jobs] + ["first"]))
    wait_for(lambda: published(store, "n1").defined_jobs == names, "the names")
    wait_for(lambda: len(digested) >= 10_000, "the digest")  # published with the names
    assert published(store, "n1").definitions_digest == definitions_digest(s.catalog.jobs)
    counts = Counter(digested)
    assert len(counts) == 10_000 and set(counts.values()) == {1}
    assert "first" not in counts  # digested before, reused


def test_jobs_are_not_digested_while_a_run_is_due_and_whole_at_the_next_heartbeat(
    store: MemoryStateStore, made: list[Scheduler], clock: FakeClock, digested: list[str]
) -> None:
    s = started(store, made, clock, "n1", internal("a", "ka"))
    digested.clear()
    soon = internal("soon", "ks", start=T0 + timedelta(seconds=0.2))  # due within 0.5 s
    s.add_jobs([soon, *jobs_of(30)])
    keeper = s._keeper  # the node: asked directly, as its thread asks it
    assert not keeper._digest_ready()
    assert digested == []  # neither here nor on the node's thread: a run is due
    clock.advance(LEASE / 3)  # the heartbeat: the digest whole, runs due or not
    wait_for(
        lambda: published(store, "n1").definitions_digest == definitions_digest(s.catalog.jobs),
        "the digest at the heartbeat",
    )
    assert sorted(digested) == sorted(["soon", *(f"j{i}" for i in range(30))])


def test_a_memory_store_the_scheduler_made_gets_the_names_and_no_digest(
    clock: FakeClock, made: list[Scheduler], digested: list[str]
) -> None:
    s = Scheduler(clock=clock, node="alone", lease=LEASE)  # its own memory store
    made.append(s)
    s.add_jobs(jobs_of(3))
    s.start()
    s.add_job(internal("more", "km"))
    store = s.state_store
    wait_for(lambda: len(published(store, "alone").defined_jobs or ()) == 4, "the names")  # type: ignore[arg-type]
    clock.advance(LEASE / 3)  # a heartbeat: no digest either
    s.remove_job("j0")
    wait_for(lambda: len(published(store, "alone").defined_jobs or ()) == 3, "the removal")  # type: ignore[arg-type]
    assert published(store, "alone").definitions_digest is None  # type: ignore[arg-type]
    assert digested == []
