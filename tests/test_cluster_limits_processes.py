"""`overlap: skip` with `max_instances: 1` across real ``jobscheduler run`` processes on one
store: 3 nodes on one SQLite file, 3 on a real PostgreSQL server.

The job runs 2.5 s every second, so each run covers two or three slots. Its command writes
its own start and end (the run id, then the time) to a file the nodes share: concurrency is
measured from those, never from the scheduler's records. Afterwards: 0 overlapping runs, each
slot of the stretch recorded once (succeeded, or ``skipped`` with the policy as its reason),
no record left ``running`` and none ``abandoned`` (a skipped slot is no run: nothing of it is
left to a restart), also after one node is started again under its old name.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pg_server import PgServer
from test_cluster_processes import Cluster

from jobscheduler.policies.overlap import SKIPPED
from jobscheduler.state import RunState

JOBS = """\
jobs:
  slow:
    command: [sh, -c, 'echo "$JOBSCHEDULER_RUN_ID start $(date +%s.%N)" >> {spans};
                      sleep 2.5;
                      echo "$JOBSCHEDULER_RUN_ID end $(date +%s.%N)" >> {spans}']
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 1 second
    overlap: skip
    max_instances: 1
"""

MEASURE = 9.0  # seconds of slots looked at


def spans(path: Path) -> list[tuple[float, float]]:
    """(start, end) of each run that ended, from the runs' own lines, by start."""
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for line in path.read_text().splitlines():
        run_id, what, when = line.split()
        (starts if what == "start" else ends)[run_id] = float(when)
    assert set(ends) <= set(starts)
    return sorted((starts[r], ends[r]) for r in ends)


def overlaps(runs: list[tuple[float, float]]) -> list[tuple[tuple[float, float], ...]]:
    """Pairs of runs where one started before another (started earlier) ended; `runs` by
    start."""
    found = []
    latest: tuple[float, float] | None = None  # the run ending last among those started
    for run in runs:
        if latest is not None and run[0] < latest[1]:
            found.append((latest, run))
        if latest is None or run[1] > latest[1]:
            latest = run
    return found


def run_limited(tmp_path: Path, url: str, names: list[str]) -> None:
    path = tmp_path / "spans.txt"
    path.touch()
    cluster = Cluster(tmp_path, url, JOBS.format(spans=path))
    try:
        for name in names:
            cluster.start(name)
        cluster.wait_up(*names)
        since = datetime.now(UTC)
        time.sleep(MEASURE)
        until = datetime.now(UTC) - timedelta(seconds=1)
        cluster.stop_all()  # running runs end first (a shutdown waits for them)
        # One node started again under its old name: what its predecessor left running
        # would be abandoned now (a skipped slot claimed ahead and left so, for one).
        cluster.start(names[0])
        cluster.wait_up(names[0])
        cluster.stop_all()

        runs = spans(path)
        assert len(runs) >= 2, cluster.logs()
        assert overlaps(runs) == []  # never two runs at once, on any node
        records = cluster.store.history("slow", limit=10_000)
        keys = Counter((r.slot, r.attempt) for r in records)
        assert [k for k, n in keys.items() if n > 1] == []
        assert [r for r in records if r.state is RunState.RUNNING] == []
        assert [r for r in records if r.state is RunState.ABANDONED] == []
        ran = [r for r in records if r.state is RunState.SUCCEEDED]
        skipped = [r for r in records if r.state is RunState.SKIPPED]
        assert len(ran) == len(runs)  # the store's runs are the runs that wrote their lines
        assert skipped and {r.reason for r in skipped} == {SKIPPED}
        # (``missed``: the slots between the stop and the restart, when no node was up.)
        final = {RunState.SUCCEEDED, RunState.SKIPPED, RunState.MISSED}
        # A slot due as its node stops (after `until`) may end NOT_STARTED "scheduler
        # stopped": the stop's truthful record of a claimed slot it did not start.
        stopped = [r for r in records if r.state is RunState.NOT_STARTED]
        assert all(
            r.reason == "scheduler stopped" and r.slot is not None and r.slot >= until
            for r in stopped
        ), stopped
        assert {r.state for r in records if r not in stopped} <= final, records
        # Every slot of the stretch is recorded: run, or skipped.
        seen = {r.slot for r in records}
        slot = since.replace(microsecond=0) + timedelta(seconds=1)
        missing = []
        while slot < until:
            if slot not in seen:
                missing.append(slot)
            slot += timedelta(seconds=1)
        assert missing == [], cluster.logs()
        assert len({r.node for r in ran} | {r.node for r in skipped}) >= 2  # shared out
    finally:
        cluster.close()


def test_three_nodes_on_one_sqlite_file_never_overlap(tmp_path: Path) -> None:
    run_limited(tmp_path, f"sqlite:///{tmp_path / 'state.db'}", ["a", "b", "c"])


def test_three_nodes_on_postgresql_never_overlap(tmp_path: Path, pg_server: PgServer) -> None:
    run_limited(tmp_path, pg_server.fresh_schema_url(), ["n1", "n2", "n3"])
