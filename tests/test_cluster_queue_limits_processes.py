"""Submitted runs against ``max_instances: 1`` across real ``jobscheduler run`` daemons: 2 nodes
on one SQLite file, 2 on a real PostgreSQL server.

A scheduled job (a 1-s run every 3 s) gets submits from the command line while it runs. Its
command writes its own start and end (the run id, its trigger, the time) to a file: concurrency
is measured from those lines, never from the scheduler's records. Afterwards: never two runs at
once, every submitted run ran (its row ``succeeded``, with its run id), one row at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from daemons import REPO, Daemons
from pg_server import PgServer
from test_cluster_limits_processes import overlaps

from jobscheduler.state import RunState

JOBS = """\
jobs:
  solo:
    command: [sh, -c, 'me="$JOBSCHEDULER_RUN_ID $JOBSCHEDULER_TRIGGER";
                      echo "$me start $(date +%s.%N)" >> {spans};
                      sleep 1;
                      echo "$me end $(date +%s.%N)" >> {spans}']
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 3 seconds
    max_instances: 1
"""

SUBMITS = 6
WITHIN = 90.0  # seconds: reached only when something failed, even on a loaded machine


def spans(path: Path) -> dict[str, tuple[str, float, float]]:
    """run id -> (trigger, start, end) of each run that ended, from the runs' own lines."""
    starts: dict[str, tuple[str, float]] = {}
    ends: dict[str, float] = {}
    for line in path.read_text().splitlines():
        run_id, trigger, what, when = line.split()
        if what == "start":
            starts[run_id] = (trigger, float(when))
        else:
            ends[run_id] = float(when)
    return {r: (starts[r][0], starts[r][1], ends[r]) for r in ends}


def submit(config: Path, url: str) -> None:
    """``jobscheduler submit CONFIG solo --state URL``, as an operator types it."""
    done = subprocess.run(
        [sys.executable, "-m", "jobscheduler", "submit", str(config), "solo", "--state", url],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=config.parent,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()


def run_submits(tmp_path: Path, url: str) -> None:
    path = tmp_path / "spans.txt"
    path.touch()
    nodes = Daemons(tmp_path, url, JOBS.format(spans=path), lease=15)
    try:
        nodes.start("a")
        nodes.start("b")
        nodes.wait_up("a", "b")

        def scheduled_running() -> bool:
            return any(
                r.trigger == "schedule"
                for r in nodes.store.history("solo", limit=5)
                if r.state is RunState.RUNNING
            )

        nodes.wait_for(scheduled_running, "a scheduled run running", WITHIN)
        for _ in range(SUBMITS):
            submit(nodes.config, url)

        def all_settled() -> bool:
            rows = nodes.store.queue(limit=100)
            return len(rows) == SUBMITS and all(r.state == "succeeded" for r in rows)

        nodes.wait_for(all_settled, "every submitted run to succeed", WITHIN)
        nodes.wait_for(
            lambda: len([s for s in spans(path).values() if s[0] == "submit"]) == SUBMITS,
            "the submitted runs' end lines",
            WITHIN,
        )
        ran = spans(path)
        runs = sorted((start, end) for _trigger, start, end in ran.values())
        assert overlaps(runs) == [], nodes.logs()  # never two at once, on any node
        rows = nodes.store.queue(limit=100)
        submitted = {r for r, (trigger, _s, _e) in ran.items() if trigger == "submit"}
        assert {r.run_id for r in rows} == submitted  # each row ran once, its own run
        for row in rows:
            record = nodes.store.run(row.run_id or "")
            assert record is not None and record.state is RunState.SUCCEEDED
        # Submitted runs are never refused for the limit: they waited in the queue.
        refused = [
            r
            for r in nodes.store.history("solo", limit=1000)
            if r.state is RunState.NOT_STARTED and r.trigger == "submit"
        ]
        assert refused == []
    finally:
        nodes.close()


def test_two_nodes_on_one_sqlite_file_run_submits_one_at_a_time(tmp_path: Path) -> None:
    run_submits(tmp_path, f"sqlite:///{tmp_path / 'state.db'}")


def test_two_nodes_on_postgresql_run_submits_one_at_a_time(
    tmp_path: Path, pg_server: PgServer
) -> None:
    run_submits(tmp_path, pg_server.fresh_schema_url())
