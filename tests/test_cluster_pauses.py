"""Pauses across real ``jobscheduler run`` daemons: 2 nodes on one SQLite file, 2 on a real
PostgreSQL server.

- A pause made with the command line (another process) reaches both nodes: measured from the
  runs' own records, no run starts later than 2 s after the pause was written; the YAML file
  is byte-identical; ``resume`` brings the job back on its own; a pause ``--for`` ends by
  itself on every node.
- `pause_after_failures: 3` on two nodes: a failing job is paused after exactly 3 failed
  runs, counted in the store across the nodes (node a runs the first ones and leaves, node b
  the rest: neither runs 3 alone), and the pause says why.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pg_server import PgServer
from test_cluster_processes import Cluster

from jobscheduler.state import RunState

REACH = 2.0  # seconds: every node follows a pause within this (docs/state.md)
SLACK = 0.5  # a run's record is written a moment after its start

JOBS = """\
# two daemons share this file; a pause must never edit it
jobs:
  tick:   # odd spacing and comments are kept byte for byte
    command: [sleep, "0.1"]
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 1 second
  fail:   # 2 s apart: each failure is counted (its run ended) before the next run starts
    command: ["false"]
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 2 seconds
    pause_after_failures: 3
"""


def wait_until(
    condition: Callable[[], object], what: str, cluster: Cluster, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {cluster.logs()}")
        time.sleep(0.1)


def cli(cluster: Cluster, *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "jobscheduler", *argv[:1], str(cluster.config), *argv[1:],
         "--state", cluster.url],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(params=["sqlite", "postgres"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    if request.param == "postgres":
        pg: PgServer = request.getfixturevalue("pg_server")
        url = pg.fresh_schema_url()
    else:
        url = f"sqlite:///{tmp_path / 'state.db'}"
    made = Cluster(tmp_path, url, JOBS)
    try:
        yield made
    finally:
        made.close()


def starts(cluster: Cluster, job: str) -> list[datetime]:
    return [r.started for r in cluster.store.history(job, limit=100_000)]


def test_a_pause_from_the_command_line_reaches_both_nodes(cluster: Cluster) -> None:
    before = cluster.config.read_bytes()
    cluster.start("a")
    cluster.start("b")
    cluster.wait_up("a", "b")
    nodes = lambda: {r.node for r in cluster.store.history("tick", limit=1000)}  # noqa: E731
    wait_until(lambda: nodes() == {"a", "b"}, "runs of tick on both nodes", cluster)

    out = cli(cluster, "pause", "tick", "--note", "deploy")
    assert out == "paused tick\n"
    pause = cluster.store.pause_of("tick")
    assert pause is not None and pause.node.startswith("cli@") and pause.until is None
    paused = pause.paused_at  # when the command wrote it (this machine's clock)
    time.sleep(REACH + 2)  # what must not happen: a run after the pause reached the nodes
    late = [t for t in starts(cluster, "tick") if t > paused + timedelta(seconds=REACH + SLACK)]
    assert late == [], cluster.logs()
    assert cluster.config.read_bytes() == before
    status = cli(cluster, "status", "--json")
    assert '"note": "deploy"' in status and '"node": "cli@' in status

    cli(cluster, "resume", "tick")
    resumed = datetime.now(UTC)
    wait_until(
        lambda: any(t > resumed for t in starts(cluster, "tick")), "tick to run again", cluster
    )

    # A pause for a while ends by itself, on every node, nobody writing anything.
    cli(cluster, "pause", "tick", "--for", "4s")
    pause = cluster.store.pause_of("tick")
    assert pause is not None and pause.until == pause.paused_at + timedelta(seconds=4)
    paused, until = pause.paused_at, pause.until
    wait_until(
        lambda: any(t > until for t in starts(cluster, "tick")),
        "tick to run after its pause ended",
        cluster,
    )
    between = [
        t
        for t in starts(cluster, "tick")
        if paused + timedelta(seconds=REACH + SLACK) < t < until - timedelta(milliseconds=50)
    ]
    assert between == [], cluster.logs()
    assert cluster.config.read_bytes() == before


def test_the_failure_throttle_is_counted_across_both_nodes(cluster: Cluster) -> None:
    """Node a runs the first failures alone and leaves; node b runs the rest: the job is
    paused at the 3rd failure of the cluster, by b, though no node alone ran 3 (counted per
    node, b would have gone on failing)."""
    before = cluster.config.read_bytes()
    runs = lambda: cluster.store.history("fail", limit=1000)  # noqa: E731
    failed = lambda: [r for r in runs() if r.state is RunState.FAILED]  # noqa: E731
    cluster.start("a")
    cluster.wait_up("a")
    wait_until(lambda: len(failed()) >= 1, "a first failure of fail on node a", cluster)
    cluster.stop("a")  # a run of its under way ends first: its failure is counted
    on_a = failed()
    assert 1 <= len(on_a) <= 2 and {r.node for r in on_a} == {"a"}, cluster.logs()
    assert cluster.store.pause_of("fail") is None

    cluster.start("b")
    cluster.wait_up("b")
    wait_until(lambda: cluster.store.pause_of("fail") is not None, "fail to be paused", cluster)
    pause = cluster.store.pause_of("fail")
    assert pause is not None and pause.note == "paused after 3 consecutive failures"
    assert pause.node == "b" and pause.until is None
    time.sleep(REACH + 2)  # nothing more may come
    # Exactly 3 runs, all failed (the slots while no node was up: one `missed` record).
    assert {r.state for r in runs()} <= {RunState.FAILED, RunState.MISSED}, cluster.logs()
    ran = failed()
    assert len(ran) == 3, cluster.logs()
    on_b = [r for r in ran if r.node == "b"]
    assert len(on_a) + len(on_b) == 3 and on_b, cluster.logs()
    assert [r.node for r in ran if r.reason == pause.note] == ["b"], cluster.logs()
    assert cluster.config.read_bytes() == before
