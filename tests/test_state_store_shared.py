"""The `StateStore` contract beside the runs, over every store of `STORES`: the store's
clock, nodes and take-over, marks, the queue, the outbox, kill requests, retention.

Leases are compared with the store's own clock (the database's for SQL stores), so a lease
is shown expired with a negative length (every heartbeat is older than "a second from now")
instead of by waiting.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest
from state_stores import MakeStore
from test_state_store import NODE, T0, at, claim, final, ids, insert
from waiting import wait_until

from jobscheduler.state import (
    KEEP,
    Beat,
    JobMark,
    Look,
    NodeInfo,
    NodeNameTakenError,
    RunState,
    StateStore,
    StoreClosedError,
)
from jobscheduler.state.postgres import PostgresStateStore

LEASE = timedelta(seconds=30)
EXPIRED = timedelta(seconds=-1)  # every heartbeat is older than this lease


def node(name: str = NODE, *, pid: int = 4242, workers: int = 8) -> NodeInfo:
    return NodeInfo(
        name=name,
        host="box-1",
        pid=pid,
        process_started=1_700_000_000.25,
        started=T0,
        max_workers=workers,
    )


# -- the clock ---------------------------------------------------------------------------------


def test_now_is_aware_utc_and_moves_forward(store: StateStore) -> None:
    first = store.now()
    second = store.now()
    assert first.tzinfo is UTC and second >= first
    assert abs((first - datetime.now(UTC)).total_seconds()) < 60


# -- nodes -------------------------------------------------------------------------------------


def test_join_heartbeat_leave(store: StateStore) -> None:
    before = store.now()
    store.join(node(), lease=LEASE)
    [joined] = store.nodes()
    assert (joined.name, joined.host, joined.pid, joined.max_workers) == (NODE, "box-1", 4242, 8)
    assert joined.process_started == 1_700_000_000.25 and joined.started == T0
    assert joined.state == "up" and joined.heartbeat is not None and joined.heartbeat >= before
    assert store.heartbeat(NODE, lease=LEASE)
    [beat] = store.nodes()
    assert beat.heartbeat is not None and beat.heartbeat >= joined.heartbeat
    assert store.expired_nodes(lease=LEASE) == []
    store.leave(NODE)
    assert [n.state for n in store.nodes()] == ["left"]
    assert not store.heartbeat(NODE, lease=LEASE)  # a node that left does not come back so
    assert not store.heartbeat("nobody", lease=LEASE)
    store.join(node(), lease=LEASE)  # but may join again
    assert [n.state for n in store.nodes()] == ["up"]


def test_a_live_name_cannot_join_twice(store: StateStore) -> None:
    store.join(node(), lease=LEASE)
    with pytest.raises(NodeNameTakenError, match="node-a"):
        store.join(node(pid=99), lease=LEASE)
    assert [n.pid for n in store.nodes()] == [4242]
    store.join(node(pid=99), lease=EXPIRED)  # its lease, counted this way, is over
    assert [n.pid for n in store.nodes()] == [99]


def test_an_expired_node_is_listed_and_its_heartbeat_fails(store: StateStore) -> None:
    store.join(node("a"), lease=LEASE)
    store.join(node("b"), lease=LEASE)
    assert [n.name for n in store.expired_nodes(lease=EXPIRED)] == ["a", "b"]
    assert not store.heartbeat("a", lease=EXPIRED)
    assert store.heartbeat("b", lease=LEASE)


def test_beat_renews_and_says_what_follows_in_one_answer(store: StateStore) -> None:
    store.join(node("a"), lease=LEASE)
    first = store.nodes()[0].heartbeat
    assert store.beat("a", lease=LEASE) == Beat(alive=True)  # alone: nothing to look at
    [renewed] = store.nodes()
    assert renewed.heartbeat is not None and first is not None and renewed.heartbeat >= first
    store.join(node("b", pid=5), lease=LEASE)  # the same host ("box-1")
    store.join(replace(node("c", pid=6), host="box-2"), lease=LEASE)
    assert store.beat("a", lease=LEASE) == Beat(alive=True, neighbours=1)
    store.hold_alert("smtp-main", b"Subject: x\r\n\r\nbody\r\n", ["ops@example.org"])
    assert store.beat("a", lease=LEASE).alerts_due
    store.due_alerts(limit=10)  # held a minute: not due any more
    assert not store.beat("a", lease=LEASE).alerts_due
    store.leave("b")
    assert store.beat("a", lease=LEASE) == Beat(alive=True)  # c lives on another host
    assert store.beat("a", lease=EXPIRED) == Beat(alive=False)  # like `heartbeat`
    assert store.beat("nobody", lease=LEASE) == Beat(alive=False)


def test_beat_reads_the_database_clock_and_keeps_the_skew_it_is_given(
    store: StateStore,
) -> None:
    store.join(node("a"), lease=LEASE)
    assert store.nodes()[0].clock_skew is None  # not measured yet
    beat = store.beat("a", lease=LEASE, clock_skew=2.5)
    [kept] = store.nodes()
    if isinstance(store, PostgresStateStore):  # a server: a clock of its own
        assert beat.clock is not None
        assert abs((beat.clock - datetime.now(UTC)).total_seconds()) < 30
        assert kept.clock_skew == 2.5
        store.join(node("a"), lease=EXPIRED)  # joining again: not measured yet
        assert store.nodes()[0].clock_skew is None
    else:  # SQLite: this machine's clock; memory: the node's own
        assert (beat.clock, kept.clock_skew) == (None, None)


def test_beat_counts_the_other_nodes_whose_lease_expired(store: StateStore) -> None:
    store.join(replace(node("old"), host="box-2"), lease=LEASE)
    joined = store.now()  # "old"'s heartbeat is no later
    # The store's clock is the database's: waiting on it makes "old" a second older than "a".
    wait_until(lambda: store.now() - joined > timedelta(seconds=1.2), "the store's clock")
    store.join(node("a"), lease=LEASE)
    assert store.beat("a", lease=timedelta(seconds=1)) == Beat(alive=True, expired=1)
    assert store.beat("a", lease=LEASE) == Beat(alive=True)


def test_take_over_abandons_the_dead_nodes_running_runs_once(store: StateStore) -> None:
    store.join(node("a"), lease=LEASE)
    store.join(node("b"), lease=LEASE)
    assert store.claim("j", at(60), "schedule", "r1", node="a", started=at(60))
    assert store.claim("k", None, "run_now", "r2", node="a", started=at(61))
    assert store.claim("j", at(120), "schedule", "r3", node="b", started=at(120))
    assert insert(store, final("r0", slot=at(0)))  # finished: untouched
    # A slot claimed ahead, not due yet, no process: certainly never started.
    ahead = datetime(2999, 1, 1, tzinfo=UTC)
    assert store.claim("j", ahead, "schedule", "r4", node="a", started=ahead)
    taken = store.take_over("a", by="b")
    assert sorted(r.run_id for r in taken) == ["r1", "r2", "r4"]
    reasons = {r.run_id: r.reason for r in taken}
    assert reasons == {
        "r1": "node lost, may have run: a",  # its outcome is unknown
        "r2": "node lost, may have run: a",
        "r4": "node lost: a",
    }
    for record in taken:
        assert record.state is RunState.ABANDONED
        assert record.ended is not None and record.ended >= record.started
    assert store.take_over("a", by="b") == []  # returned once
    states = {r.run_id: r.state for r in store.history()}
    assert states == {
        "r0": RunState.SUCCEEDED,
        "r1": RunState.ABANDONED,
        "r2": RunState.ABANDONED,
        "r3": RunState.RUNNING,
        "r4": RunState.ABANDONED,
    }
    assert not store.finish("r1", state=RunState.SUCCEEDED, ended=at(90))  # fenced
    assert not store.heartbeat("a", lease=LEASE)  # declared dead
    assert {n.name: n.state for n in store.nodes()} == {"a": "dead", "b": "up"}
    assert not claim(store, "j", at(60), "again")  # the slot stays handled


def test_concurrent_take_overs_hand_each_run_out_once(store: StateStore) -> None:
    store.join(node("dead"), lease=LEASE)
    for n in range(30):
        assert store.claim("j", at(n), "schedule", f"r{n}", node="dead", started=at(n))
    barrier = threading.Barrier(4)
    got: list[list[str]] = [[] for _ in range(4)]

    def taker(n: int) -> None:
        barrier.wait()
        got[n] = [r.run_id for r in store.take_over("dead", by=f"live-{n}")]

    threads = [threading.Thread(target=taker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r for g in got for r in g) == sorted(f"r{n}" for n in range(30))
    assert sum(1 for g in got if g) == 1


# -- marks -------------------------------------------------------------------------------------


def test_marks(store: StateStore) -> None:
    assert store.mark("j") is None and store.marks() == {}
    assert store.set_mark("j", last_slot=at(60)) == JobMark(job="j", last_slot=at(60))
    assert store.set_mark("j", last_slot=at(30)).last_slot == at(60)  # never backwards
    assert store.set_mark("j", last_slot=None).last_slot == at(60)
    mark = store.set_mark("j", failures=3, paused_reason="paused after 3 consecutive failures")
    assert mark == JobMark(
        job="j", last_slot=at(60), failures=3, paused_reason="paused after 3 consecutive failures"
    )
    assert store.set_mark("j", last_slot=at(120), paused_reason=KEEP).paused_reason is not None
    assert store.set_mark("j", failures=0, paused_reason=None) == JobMark(
        job="j", last_slot=at(120)
    )
    berlin = timezone(timedelta(hours=1))
    store.set_mark("k", last_slot=at(5).astimezone(berlin))
    marks = store.marks()
    assert sorted(marks) == ["j", "k"] and marks["k"].last_slot == at(5)
    last = marks["k"].last_slot
    assert last is not None and last.tzinfo is UTC
    assert store.mark("j") == marks["j"]
    with pytest.raises(ValueError, match="failures"):
        store.set_mark("j", failures=-1)
    with pytest.raises(ValueError, match="aware"):
        store.set_mark("j", last_slot=datetime(2024, 1, 1))


def test_set_marks_moves_many_last_slots_forward_at_once(store: StateStore) -> None:
    store.set_mark("j", last_slot=at(60), failures=2, paused_reason="why")
    store.set_mark("k", last_slot=at(60))
    store.set_marks({})
    new_york = timezone(timedelta(hours=-5))
    store.set_marks({"j": at(120), "k": at(30), "new": at(5).astimezone(new_york)})
    marks = store.marks()
    assert marks["j"] == JobMark(job="j", last_slot=at(120), failures=2, paused_reason="why")
    assert marks["k"] == JobMark(job="k", last_slot=at(60))  # never backwards
    assert marks["new"] == JobMark(job="new", last_slot=at(5))
    many = {f"job-{n}": at(n) for n in range(1234)}  # more than one statement's worth
    store.set_marks(many)
    marks = store.marks()
    assert {job: marks[job].last_slot for job in many} == many
    with pytest.raises(ValueError, match="aware"):
        store.set_marks({"j": datetime(2024, 1, 1)})
    assert store.mark("j") == JobMark(job="j", last_slot=at(120), failures=2, paused_reason="why")


# -- queue -------------------------------------------------------------------------------------


def test_look_says_whether_a_node_has_anything_to_do(store: StateStore) -> None:
    nothing = Look(pending=False, kills=False)
    assert store.look("a", jobs=["j", "k"]) == nothing
    store.submit("other")
    assert store.look("a", jobs=["j", "k"]) == nothing  # a job the node does not run
    store.submit("j", host="box-9*")
    assert store.look("a", jobs=["j"]) == nothing  # pinned to another host
    assert store.look("a", jobs=["j"], hostname="box-9.example.org").pending
    assert store.look("box-90", jobs=["j"]).pending
    queue_id = store.submit("k")
    assert store.look("a", jobs=["j", "k"]) == Look(pending=True, kills=False)
    # The jobs of the rows it may take (those of other jobs and hosts not among them).
    assert store.look("a", jobs=["j", "k"]).jobs == {"k"}
    assert store.look("box-90", jobs=["j", "k"]).jobs == {"j", "k"}
    [row] = store.take("a", jobs=["k"], limit=5)
    assert row.id == queue_id and store.look("a", jobs=["k"]) == nothing  # taken
    assert store.claim("k", None, "submit", "r1", node="a", started=T0)
    assert store.request_kill(run_id="r1") == 1
    assert store.look("a", jobs=[]) == Look(pending=False, kills=True)
    assert store.look("b", jobs=[]) == nothing  # not its run
    [(request, _, _)] = store.kill_requests("a")
    store.kill_done(request)
    assert store.look("a", jobs=["k"]) == nothing


def test_submit_take_settle(store: StateStore) -> None:
    low = store.submit("report", {"day": "mon"})
    high = store.submit("report", None, priority=5)
    other = store.submit("backup")
    assert len({low, high, other}) == 3
    [newest, *_] = store.queue()
    assert newest.id == other and newest.state == "pending"
    assert [r.id for r in store.queue(state="pending")] == [other, high, low]
    taken = store.take("n1", jobs={"report"}, limit=10)
    assert [r.id for r in taken] == [high, low]  # priority first, then age
    assert all(r.state == "running" and r.node == "n1" for r in taken)
    assert taken[1].args == {"day": "mon"} and taken[0].args is None
    assert store.take("n2", jobs={"report"}, limit=10) == []  # each row taken once
    assert store.settle(high, "succeeded", "run-9")
    assert not store.settle(high, "failed", "run-9")  # settled already
    assert not store.settle(other, "failed", None)  # never taken
    by_id = {r.id: r for r in store.queue()}
    assert (by_id[high].state, by_id[high].run_id) == ("succeeded", "run-9")
    assert by_id[low].state == "running" and by_id[other].state == "pending"
    assert [r.id for r in store.queue(limit=1)] == [other]
    with pytest.raises(ValueError, match="settled"):
        store.settle(low, "running", None)
    with pytest.raises(TypeError, match="args"):
        store.submit("report", ["not", "a", "dict"])  # type: ignore[arg-type]


def test_finish_settles_the_runs_queue_row_with_it(store: StateStore) -> None:
    ok, failed, stolen = (store.submit("report") for _ in range(3))
    store.take("n1", jobs=["report"], limit=10)
    for run_id in ("r-ok", "r-failed"):
        assert claim(store, "report", None, run_id)
    assert store.finish("r-ok", state=RunState.SUCCEEDED, ended=at(1), settle=ok)
    assert store.finish("r-failed", state=RunState.ABANDONED, ended=at(1), settle=failed)
    # A finish that changes nothing (the run never claimed) leaves the row alone.
    assert not store.finish("r-never", state=RunState.SUCCEEDED, ended=at(1), settle=stolen)
    by_id = {r.id: r for r in store.queue()}
    assert (by_id[ok].state, by_id[ok].run_id) == ("succeeded", "r-ok")
    assert (by_id[failed].state, by_id[failed].run_id) == ("failed", "r-failed")
    assert by_id[stolen].state == "running"


def test_a_finish_not_waited_for_is_read_back_by_the_same_store(store: StateStore) -> None:
    row = store.submit("report")
    store.take("n1", jobs=["report"], limit=1)
    for k in range(50):
        assert claim(store, "report", at(k), f"r{k}")
    for k in range(50):
        state = RunState.SUCCEEDED if k % 2 else RunState.FAILED
        settle = row if k == 0 else None
        assert store.finish(f"r{k}", state=state, ended=at(k + 1), settle=settle, wait=False)
    states = {r.run_id: r.state for r in store.history(limit=100)}
    assert states == {f"r{k}": RunState.SUCCEEDED if k % 2 else RunState.FAILED for k in range(50)}
    assert [(r.state, r.run_id) for r in store.queue()] == [("failed", "r0")]


def test_take_respects_limit_jobs_and_host(store: StateStore) -> None:
    anywhere = store.submit("j")
    pinned = store.submit("j", host="box-2*")
    by_name = store.submit("j", host="n1")
    assert [r.id for r in store.take("n1", jobs=["j"], limit=1, hostname="box-1")] == [anywhere]
    assert [r.id for r in store.take("n1", jobs=["j"], limit=5, hostname="box-1")] == [by_name]
    assert store.take("n1", jobs=["other"], limit=5) == []
    assert [r.id for r in store.take("n9", jobs=["j"], limit=5, hostname="box-22")] == [pinned]


def test_concurrent_takes_take_each_row_once(store: StateStore) -> None:
    submitted = {store.submit("j", {"n": n}) for n in range(60)}
    barrier = threading.Barrier(4)
    got: list[list[int]] = [[] for _ in range(4)]

    def taker(n: int) -> None:
        barrier.wait()
        while rows := store.take(f"n{n}", jobs={"j"}, limit=3):
            got[n].extend(r.id for r in rows)

    threads = [threading.Thread(target=taker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(i for g in got for i in g) == sorted(submitted)


def test_take_over_fails_the_dead_nodes_taken_rows(store: StateStore) -> None:
    queued = store.submit("j")
    store.join(node("a"), lease=LEASE)
    assert [r.id for r in store.take("a", jobs={"j"}, limit=1)] == [queued]
    store.take_over("a", by="b")
    [row] = store.queue()
    assert row.state == "failed"


# -- outbox ------------------------------------------------------------------------------------


def test_outbox(store: StateStore) -> None:
    message = b"From: a@example.org\r\nSubject: x\r\n\r\nbody\r\n"
    first = store.hold_alert("smtp-main", message, ["ops@example.org", "b@example.org"])
    later = store.hold_alert(
        "smtp-main", "Subject: y\r\n\r\nh\u00e9\r\n", ["ops@example.org"], next_attempt=at(0)
    )
    future = store.hold_alert(
        "smtp-2", message, ["x@example.org"], next_attempt=store.now() + timedelta(hours=1)
    )
    due = store.due_alerts(limit=10)
    assert [a.id for a in due] == [later, first]  # the earliest due first
    alert = {a.id: a for a in due}[first]
    assert alert.message == message and alert.server == "smtp-main"
    assert alert.recipients == ("ops@example.org", "b@example.org") and alert.attempts == 0
    assert {a.id: a for a in due}[later].message == "Subject: y\r\n\r\nh\u00e9\r\n".encode()
    assert store.due_alerts(limit=10) == []  # held: another node does not get them too
    store.alert_failed(first, next_attempt=at(0), error="connection refused")
    [again] = store.due_alerts(limit=10)
    assert (again.id, again.attempts, again.last_error) == (first, 1, "connection refused")
    store.alert_sent(first)
    store.alert_sent(later)
    store.alert_failed(later, next_attempt=at(0), error="gone")  # sent already: nothing
    assert store.due_alerts(limit=10, hold=timedelta(0)) == []
    assert future not in {a.id for a in store.due_alerts(limit=10)}


# -- kill requests -----------------------------------------------------------------------------


def test_kill_requests(store: StateStore) -> None:
    assert store.claim("j", None, "run_now", "r1", node="a", started=T0)
    assert store.claim("j", None, "run_now", "r2", node="b", started=T0)
    assert store.claim("k", None, "run_now", "r3", node="a", started=T0)
    assert insert(store, final("r4", "j"))
    assert store.request_kill(job="j") == 2
    assert store.request_kill(run_id="r3") == 1
    assert store.request_kill(run_id="r4") == 0  # not running
    assert store.request_kill(job="nobody") == 0
    on_a = store.kill_requests("a")
    assert [run for _, run, _ in on_a] == ["r1", "r3"]
    assert [run for _, run, _ in store.kill_requests("b")] == ["r2"]
    store.kill_done(on_a[0][0])
    assert [run for _, run, _ in store.kill_requests("a")] == ["r3"]
    with pytest.raises(ValueError, match="run_id or a job"):
        store.request_kill()


# -- retention ---------------------------------------------------------------------------------


def test_prune_by_age_and_count(store: StateStore) -> None:
    for n in range(10):
        assert insert(store, final(f"j{n}", "j", started=at(n)))
    for n in range(3):
        assert insert(store, final(f"k{n}", "k", started=at(100 + n)))
    assert claim(store, "j", None, "running", started=at(-50))  # running: always stays
    assert store.prune(older_than=at(3), keep_per_job=5) == 5 + 0
    assert ids(store.history("j", limit=100)) == ["j9", "j8", "j7", "j6", "j5", "running"]
    assert ids(store.history("k")) == ["k2", "k1", "k0"]
    assert store.prune(older_than=at(0), keep_per_job=2) == 3 + 1
    assert ids(store.history()) == ["k2", "k1", "j9", "j8", "running"]
    assert store.prune(older_than=at(101), keep_per_job=100) == 2 + 0
    assert ids(store.history("k")) == ["k2", "k1"]
    assert store.prune(older_than=at(0), keep_per_job=0) == 2
    assert ids(store.history()) == ["running"]


def test_prune_drops_settled_queue_rows_and_closed_requests(store: StateStore) -> None:
    done = store.submit("j")
    pending = store.submit("j")
    [row] = store.take("n", jobs={"j"}, limit=1)
    assert row.id == done and store.settle(done, "failed", None)
    store.prune(older_than=store.now() + timedelta(seconds=5), keep_per_job=10)
    assert [r.id for r in store.queue()] == [pending]


# -- closing -----------------------------------------------------------------------------------


def test_a_closed_store_refuses_the_other_writes(make_store: MakeStore) -> None:
    store = make_store()
    store.join(node(), lease=LEASE)
    store.close()
    with pytest.raises(StoreClosedError):
        store.heartbeat(NODE, lease=LEASE)
    with pytest.raises(StoreClosedError):
        store.submit("j")
    with pytest.raises(StoreClosedError):
        store.set_mark("j", failures=1)
    with pytest.raises(StoreClosedError):
        store.hold_alert("s", b"x", ["a@b"])


def test_take_with_many_jobs(store: StateStore) -> None:
    names = [f"job-{n}" for n in range(2000)]
    wanted = store.submit("job-1999")
    store.submit("not-mine")
    assert [r.id for r in store.take("n", jobs=names, limit=5)] == [wanted]
