"""Submitted runs and reruns against ``max_instances`` across nodes: two real schedulers ("a"
and "b") on one SQLite file, one FakeClock (as `test_cluster_limits`). A submitted run of a
job at its limit on any node waits in the queue, pending, while other jobs' rows are taken; a
rerun waits until the job has room. Starts are counted by the jobs themselves.
"""

from __future__ import annotations

from collections.abc import Callable

import policy_jobs as pj
import pytest
from policy_support import WAIT
from test_cluster_limits import clock, holding, idle, nodes, tick, until

from jobscheduler import FakeClock, Job
from jobscheduler.model.job import JobType
from jobscheduler.scheduler import Scheduler

__all__ = ["clock", "nodes"]  # the fixtures, used by name


def on_demand(name: str, function: str, key: str, **fields: object) -> Job:
    """An on-demand internal job calling `policy_jobs.<function>(key)`."""
    return Job(
        name,
        type=JobType.INTERNAL,
        command=f"{pj.__name__}:{function}",
        args={"key": key},
        on_demand=True,
        **fields,  # type: ignore[arg-type]
    )


def row_states(s: Scheduler, job: str) -> list[str]:
    """The states of `job`'s queue rows, oldest first."""
    return [r.state for r in reversed(s.state_store.queue(limit=100)) if r.job == job]


def test_a_submit_waits_in_the_queue_while_the_job_runs_on_another_node(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    other_key = key + "-other"
    a, b = nodes("a"), nodes("b")
    for s in (a, b):
        s.add_job(holding("solo", key, max_instances=1))
        s.add_job(on_demand("other", "ok", other_key))
        s.start()
    tick(clock, a, b)
    pj.wait_calls(key, 1, WAIT)  # slot 60 runs, on one of them
    for s in (a, b):
        s.submit("solo")
    b.submit("other", priority=-5)  # lower priority, submitted after: taken past them
    until(lambda: row_states(a, "other") == ["succeeded"], clock)
    assert len(pj.calls(key)) == 1  # the job at its limit: its rows wait, pending
    assert row_states(a, "solo") == ["pending", "pending"]
    pj.gate(key).set()  # the scheduled run ends: the submitted ones run, one at a time
    until(lambda: row_states(a, "solo") == ["succeeded", "succeeded"], clock)
    idle(a, b)
    triggers = [c["trigger"] for c in pj.calls(key)]
    assert triggers == ["schedule", "submit", "submit"]


def test_a_submitted_run_never_runs_beside_another(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    """Six submits to two nodes of a `max_instances: 1` job that holds until its gate opens:
    one starts; the others stay pending (never `running` without a worker) until it ends,
    while a row of another job, submitted to each node after them, is taken past them."""
    key = request.node.nodeid
    other_key = key + "-other"
    a, b = nodes("a"), nodes("b")
    for s in (a, b):
        s.add_job(on_demand("solo", "Holds", key, max_instances=1))
        s.add_job(on_demand("other", "ok", other_key))
        s.start()
    for n in range(6):
        (a, b)[n % 2].submit("solo", {"n": n})
    until(lambda: len(pj.calls(key)) == 1, clock)
    for s in (a, b):
        s.submit("other")  # each node's take passes the waiting rows by
    until(lambda: row_states(a, "other") == ["succeeded"] * 2, clock)
    assert len(pj.calls(key)) == 1
    assert row_states(a, "solo").count("pending") == 5
    pj.gate(key).set()
    until(lambda: row_states(a, "solo") == ["succeeded"] * 6, clock)
    idle(a, b)
    assert len(pj.calls(key)) == 6


def test_a_rerun_waits_until_the_job_has_room(
    nodes: Callable[[str], Scheduler], clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    key = request.node.nodeid
    a, b = nodes("a"), nodes("b")
    solo = holding("solo", key, max_instances=1)
    for s in (a, b):
        s.add_job(solo)
        s.start()
    tick(clock, a, b)
    pj.wait_calls(key, 1, WAIT)
    # A rerun after a node loss, as the node that took the lost node over starts it: on
    # both nodes (the one running the job, and the other).
    for s in (a, b):
        s._processor.run_at(solo, clock.now(), trigger="rerun")
    tick(clock, seconds=2)
    until(lambda: not a.wait_idle(0.01) and not b.wait_idle(0.01))  # both wait
    assert len(pj.calls(key)) == 1
    pj.gate(key).set()
    until(lambda: len(pj.calls(key)) == 3, clock)
    idle(a, b)
    assert [c["trigger"] for c in pj.calls(key)] == ["schedule", "rerun", "rerun"]
