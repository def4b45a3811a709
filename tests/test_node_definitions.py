"""The cluster's view of what each node defines, on a FakeClock: the definitions' digest,
published at join and again once they change; nodes whose definitions differ and jobs only
some define (`opsdata.nodes_view`, as `status`, the page and ``/api/nodes`` show them); queue
rows of jobs no live node defines ending ``not_started``; lost nodes and their runs awaiting
takeover. Real schedulers over a real memory store sharing the test's clock; the same with
real daemons: test_reload_cluster.py."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from test_scheduler import T0, internal

from jobscheduler import FakeClock, Job
from jobscheduler.app import opsdata
from jobscheduler.cluster.digest import DefinitionsDigest, definitions_digest
from jobscheduler.model.catalog import Catalog
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import MemoryStateStore, NodeInfo, RunState

LEASE = timedelta(seconds=15)
DEADLINE = 30.0


def wait_for(condition: Callable[[], object], what: str) -> None:
    """Poll `condition` (another thread acts) until true, failing after `DEADLINE`."""
    end = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def store(clock: FakeClock) -> MemoryStateStore:
    return MemoryStateStore(clock=clock)


@pytest.fixture
def made() -> Iterator[list[Scheduler]]:
    schedulers: list[Scheduler] = []
    yield schedulers
    for s in schedulers:
        s.shutdown(wait=False)


def started(
    store: MemoryStateStore, made: list[Scheduler], clock: FakeClock, name: str, *jobs: Job
) -> Scheduler:
    s = Scheduler(clock=clock, state=store, node=name, lease=LEASE)
    made.append(s)
    s.add_jobs(jobs)
    s.start()
    # The names come with the join, the digest from the node's thread right after.
    assert published(store, name).defined_jobs == tuple(sorted(j.name for j in jobs))
    digest = definitions_digest(s.catalog.jobs)
    wait_for(lambda: published(store, name).definitions_digest == digest, "the digest")
    return s


def published(store: MemoryStateStore, name: str) -> NodeInfo:
    return next(n for n in store.nodes() if n.name == name)


def foreign(store: MemoryStateStore, name: str, jobs: tuple[str, ...] | None) -> None:
    """A node of another process (no scheduler here), defining `jobs` (None: an older
    version that publishes nothing)."""
    info = NodeInfo(
        name=name, host="elsewhere", pid=1, process_started=1.0, started=T0, defined_jobs=jobs
    )
    store.join(info, lease=LEASE)


# -- the digest ------------------------------------------------------------------------------


def test_the_digest_is_the_definitions_not_their_order_and_changes_with_any_key() -> None:
    a, b = internal("a", "ka"), internal("b", "kb")
    digest = definitions_digest(Catalog({"a": a, "b": b}).jobs)
    assert digest == definitions_digest(Catalog({"b": b, "a": a}).jobs)
    assert len(digest) == 64 and int(digest, 16) >= 0  # hex SHA-256
    changed = replace(a, timeout=timedelta(seconds=5))
    assert definitions_digest(Catalog({"a": changed, "b": b}).jobs) != digest
    assert definitions_digest(Catalog({"a": a}).jobs) != digest
    assert definitions_digest(Catalog().jobs) == definitions_digest({})


def test_a_function_counts_by_its_qualified_name_not_its_address() -> None:
    def work() -> None:
        pass

    job = Job("fn", type="internal", command=work, start=T0, interval="1 minute")
    again = Job("fn", type="internal", command=work, start=T0, interval="1 minute")
    digest = definitions_digest({"fn": job})
    assert digest == definitions_digest({"fn": again})


def test_the_digest_is_computed_again_only_for_another_map_and_changed_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobscheduler.cluster import digest as module

    computed: list[str] = []
    whole = module.job_digest

    def counted(name: str, job: Job) -> str:
        computed.append(name)
        return whole(name, job)

    monkeypatch.setattr(module, "job_digest", counted)
    cache = DefinitionsDigest()
    jobs = Catalog({"a": internal("a", "ka"), "b": internal("b", "kb")}).jobs
    digest, names = cache.of(jobs)
    assert names == ("a", "b") and cache.of(jobs) == (digest, names)
    assert computed == ["a", "b"]
    # A reload: every job read anew (equal ones reused), one changed, one added.
    again = {"a": internal("a", "ka"), "b": internal("b", "kb", timeout=timedelta(seconds=9))}
    more = Catalog({**again, "0": internal("0", "k0")}).jobs
    computed.clear()
    assert cache.of(more)[1] == ("0", "a", "b")
    assert sorted(computed) == ["0", "b"]
    monkeypatch.undo()
    assert cache.of(jobs)[0] == definitions_digest(jobs)  # the same as computed whole
    assert cache.of(more)[0] == definitions_digest(more)


# -- published, compared ----------------------------------------------------------------------


def test_a_node_publishes_its_definitions_at_join_and_at_once_when_they_change(
    store: MemoryStateStore, made: list[Scheduler], clock: FakeClock
) -> None:
    s = started(store, made, clock, "n1", internal("a", "ka"))  # names, then the digest
    first = published(store, "n1")
    assert first.defined_jobs == ("a",)
    assert first.lease == LEASE
    s.add_job(internal("b", "kb"))  # no clock moved: no heartbeat is due
    wait_for(lambda: published(store, "n1").defined_jobs == ("a", "b"), "the new job names")
    assert published(store, "n1").definitions_digest == definitions_digest(s.catalog.jobs)
    s.remove_job("a")
    wait_for(lambda: published(store, "n1").defined_jobs == ("b",), "the removal")


def test_nodes_whose_definitions_differ_and_jobs_only_some_define(
    store: MemoryStateStore, made: list[Scheduler], clock: FakeClock
) -> None:
    both = internal("both", "k")
    started(store, made, clock, "n1", both, internal("only1", "k1"))
    started(store, made, clock, "n2", both)
    view = opsdata.nodes_view(store, clock.now())
    assert view["definitions"]["same"] is False and view["definitions"]["digests"] == 2
    assert [n["definitions_match"] for n in view["nodes"]] == [False, False]  # 1 against 1
    assert view["definitions"]["some_nodes_only"] == [
        {"job": "only1", "on": ["n1"], "not_on": ["n2"]}
    ]
    started(store, made, clock, "n3", both)  # two of three agree: n1 is the odd one
    view = opsdata.nodes_view(store, clock.now())
    assert [(n["name"], n["definitions_match"]) for n in view["nodes"]] == [
        ("n1", False),
        ("n2", True),
        ("n3", True),
    ]
    assert view["definitions"]["some_nodes_only"] == [
        {"job": "only1", "on": ["n1"], "not_on": ["n2", "n3"]}
    ]
    made[0].remove_job("only1")
    wait_for(lambda: opsdata.nodes_view(store, clock.now())["definitions"]["same"], "agreement")
    view = opsdata.nodes_view(store, clock.now())
    assert all(n["definitions_match"] for n in view["nodes"])
    assert view["definitions"]["some_nodes_only"] == []


# -- unknown jobs in the queue ---------------------------------------------------------------


def test_a_row_no_live_node_defines_ends_not_started_within_a_lease(
    store: MemoryStateStore, made: list[Scheduler], clock: FakeClock
) -> None:
    s = started(store, made, clock, "n1", internal("a", "ka"))
    foreign(store, "other", ("theirs",))
    ghost = store.submit("ghost")
    theirs = store.submit("theirs")  # defined by a live node: stays for it
    clock.advance(LEASE / 2)
    store.heartbeat("other", lease=LEASE)
    s._keeper.beat()
    assert {row.id for row in store.queue(state="pending")} == {ghost, theirs}
    clock.advance(LEASE / 2 + timedelta(seconds=1))
    store.heartbeat("other", lease=LEASE)
    s._keeper.beat()
    rows = {row.id: row for row in store.queue()}
    assert rows[ghost].state == "not_started" and rows[theirs].state == "pending"
    # Settled, then recorded: the node's own thread may be the one doing it.
    wait_for(lambda: store.history("ghost"), "the run record")
    [record] = store.history("ghost")
    assert record.run_id == rows[ghost].run_id
    assert (record.state, record.reason, record.trigger, record.node) == (
        RunState.NOT_STARTED,
        "unknown job ghost",
        "submit",
        "n1",
    )
    # The node that defined "theirs" is lost: its rows go the same way.
    for _ in range(4):
        clock.advance(LEASE / 3 + timedelta(milliseconds=1))
        s._keeper.beat()
    wait_for(lambda: store.queue()[0].state == "not_started", "the row of the lost node's job")
    wait_for(lambda: s._keeper.unknown_settled == 2, "the count")


def test_a_live_node_that_published_no_names_holds_the_rows_back(
    store: MemoryStateStore, made: list[Scheduler], clock: FakeClock
) -> None:
    s = started(store, made, clock, "n1", internal("a", "ka"))
    foreign(store, "older", None)
    ghost = store.submit("ghost")
    for _ in range(4):  # past the lease; both nodes beat all along
        clock.advance(LEASE / 3 + timedelta(milliseconds=1))
        assert store.heartbeat("older", lease=LEASE)
        s._keeper.beat()
    assert [row.id for row in store.queue(state="pending")] == [ghost]
    store.leave("older")
    s._keeper.beat()
    assert store.queue(state="pending") == []


# -- lost nodes --------------------------------------------------------------------------------


def test_a_node_whose_lease_expired_shows_lost_with_its_runs_awaiting_takeover(
    store: MemoryStateStore, clock: FakeClock
) -> None:
    foreign(store, "gone", ("tick",))
    store.claim("tick", T0, "schedule", "run-1", node="gone", started=T0)
    data = opsdata.status(store, Catalog(), clock.now())
    assert data["nodes"][0]["state"] == "up" and data["nodes"][0]["lost_since"] is None
    assert data["running"][0]["awaiting_takeover"] is False
    clock.advance(LEASE + timedelta(seconds=2))
    data = opsdata.status(store, Catalog(), clock.now())
    [gone] = data["nodes"]
    assert (gone["state"], gone["lost_since"]) == ("lost", opsdata.iso(T0 + LEASE))
    assert gone["definitions_match"] is None  # not compared
    assert data["running"][0]["awaiting_takeover"] is True
    store.take_over("gone", by="test")
    data = opsdata.status(store, Catalog(), clock.now())
    assert data["nodes"][0]["state"] == "dead" and data["running"] == []


def test_the_page_the_api_and_metrics_show_a_lost_node(
    store: MemoryStateStore, made: list[Scheduler], clock: FakeClock
) -> None:
    import httpx

    from jobscheduler.app.http.server import serve_http

    # "web" has a lease of an hour: no heartbeat of it (and so no take-over of "gone", of
    # another host) comes while "gone"'s 15 s lease runs out.
    s = Scheduler(clock=clock, state=store, node="web", lease=timedelta(hours=1))
    made.append(s)
    s.add_job(internal("a", "ka"))
    s.start()
    foreign(store, "gone", ("a",))
    store.claim("a", T0, "schedule", "run-1", node="gone", started=T0)
    clock.advance(LEASE + timedelta(seconds=1))
    server = serve_http(s, "127.0.0.1", 0, token=None)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            nodes = client.get("/api/nodes").json()
            assert nodes["node"] == "web"
            gone = nodes["nodes"][0]
            assert (gone["name"], gone["state"]) == ("gone", "lost")
            assert gone["lost_since"] == opsdata.iso(T0 + LEASE)
            metrics = client.get("/metrics").text
            assert 'jobscheduler_node_heartbeat_age_seconds{node="gone",state="lost"}' in metrics
            page = client.get("/").text
            assert "lost since" in page and "(lost: awaiting takeover)" in page
    finally:
        server.close()
