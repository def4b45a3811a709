"""Submitted runs against ``max_instances: 1`` across real ``jobscheduler run`` daemons: 2 nodes
on one SQLite file, 2 on a real PostgreSQL server.

A scheduled job (a 1-s run every 3 s) gets submits from the command line while it runs. Its
command writes its own start and end (the run id, its trigger, the time) to a file: concurrency
is measured from those lines, never from the scheduler's records. Afterwards: never two runs at
once, every submitted run ran (its row ``succeeded``, with its run id), one row at a time.
"""

from __future__ import annotations

import json
import os
import signal
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


# A run: writes "RUN_ID NODE TRIGGER start TIME" to the spans file, sleeps (120 s on node n1:
# it is still running when n1 is killed), writes "RUN_ID NODE TRIGGER end TIME".
RERUN_WORK = """\
import os, sys, time
env = os.environ
me = f"{env['JOBSCHEDULER_RUN_ID']} {env['JOBSCHEDULER_NODE']} {env['JOBSCHEDULER_TRIGGER']}"
with open(sys.argv[1], "a") as out:
    out.write(f"{me} start {time.time()}\\n")
time.sleep(120 if env["JOBSCHEDULER_NODE"] == "n1" else 2.2)
with open(sys.argv[1], "a") as out:
    out.write(f"{me} end {time.time()}\\n")
"""


def rerun_spans(path: Path) -> dict[str, tuple[str, str, float, float | None]]:
    """run id -> (node, trigger, start, end or None) from the runs' own lines."""
    found: dict[str, tuple[str, str, float, float | None]] = {}
    for line in path.read_text().splitlines():
        run_id, node, trigger, what, when = line.split()
        if what == "start":
            found[run_id] = (node, trigger, float(when), None)
        else:
            found[run_id] = (*found[run_id][:3], float(when))
    return found


def test_a_rerun_after_kill_9_waits_until_the_job_is_idle(tmp_path: Path) -> None:
    """n1 runs a scheduled run of a ``max_instances: 1`` job (every second, 2.2 s long) and
    is killed (kill -9); n2 takes it over and reruns it a fifth of the lease later (1 s): by
    then n2 runs one of the job's own slots (they come every second), so the rerun finds the
    job busy. It waits for the job to be idle, never runs beside a run, is never refused."""
    script = tmp_path / "work.py"
    script.write_text(RERUN_WORK)
    path = tmp_path / "spans.txt"
    path.touch()
    command = json.dumps([sys.executable, str(script), str(path)])
    jobs = (
        "jobs:\n  solo:\n"
        f"    command: {command}\n"
        "    start: 2024-01-01 00:00:00\n    timezone: UTC\n    interval: 1 second\n"
        "    max_instances: 1\n    on_node_loss: rerun\n"
    )
    nodes = Daemons(tmp_path, f"sqlite:///{tmp_path / 'state.db'}", jobs, lease=5)
    try:
        nodes.start("n1")
        nodes.wait_up("n1")
        nodes.wait_for(
            lambda: any(s[0] == "n1" for s in rerun_spans(path).values()), "n1's run", WITHIN
        )
        nodes.start("n2")
        nodes.wait_up("n2")
        nodes.procs["n1"].send_signal(signal.SIGKILL)
        nodes.procs["n1"].wait(10)

        def rerun_ended() -> bool:
            return any(s[1] == "rerun" and s[3] is not None for s in rerun_spans(path).values())

        nodes.wait_for(rerun_ended, "the rerun to end", WITHIN)

        def rerun_recorded() -> bool:
            return any(
                r.trigger == "rerun" and r.state is not RunState.RUNNING
                for r in nodes.store.history("solo", limit=1000)
            )

        nodes.wait_for(rerun_recorded, "the rerun's record", WITHIN)
        ended = [(s[2], s[3]) for s in rerun_spans(path).values() if s[3] is not None]
        assert overlaps(sorted(ended)) == [], nodes.logs()  # never beside another run
        records = nodes.store.history("solo", limit=1000)
        [rerun] = [r for r in records if r.trigger == "rerun"]
        assert (rerun.state, rerun.attempt, rerun.node) == (RunState.SUCCEEDED, 2, "n2")
        [lost] = [r for r in records if r.slot == rerun.slot and r.attempt == 1]
        assert lost.state is RunState.ABANDONED and lost.node == "n1"
        # A run of n2 had started between the take-over and the rerun: the rerun waited.
        n2_runs = [s for s in rerun_spans(path).values() if s[0] == "n2" and s[1] == "schedule"]
        rerun_start = next(s[2] for s in rerun_spans(path).values() if s[1] == "rerun")
        assert any(start < rerun_start for _n, _t, start, _e in n2_runs)
    finally:
        nodes.close()
