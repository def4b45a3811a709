"""How long a submitted run of a busy ``max_instances: 1`` job waits once the job is free.

2 ``jobscheduler run`` daemons (real processes) on one store (SQLite file; PostgreSQL: a
throwaway server, tests/pg_server.py) run a job every 3 s (1 s long, ``max_instances: 1``);
while a scheduled run runs, `submits` runs are submitted from the command line. Their rows
wait ``pending`` while the job runs on either node. Measured from the runs' own start and end
lines (`tests/test_cluster_queue_limits_processes.py`'s job): the gap from each run's end to
the next submitted run's start (min, median, max), and the runs that overlapped (target 0).

``python bench/queue_limits.py [--submits 12] [--no-postgres]``
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import argparse
import itertools
import statistics
import tempfile

import pg_server
from daemons import Daemons
from test_cluster_queue_limits_processes import JOBS, spans, submit

from jobscheduler.state import RunState

WITHIN = 180.0


def measure(directory: Path, url: str, submits: int) -> str:
    """One store's line: the gaps in ms and the overlaps."""
    path = directory / "spans.txt"
    path.touch()
    nodes = Daemons(directory, url, JOBS.format(spans=path), lease=15)
    try:
        nodes.start("a")
        nodes.start("b")
        nodes.wait_up("a", "b")
        nodes.wait_for(
            lambda: any(
                r.trigger == "schedule" and r.state is RunState.RUNNING
                for r in nodes.store.history("solo", limit=5)
            ),
            "a scheduled run",
            WITHIN,
        )
        for _ in range(submits):
            submit(nodes.config, url)
        nodes.wait_for(
            lambda: len([s for s in spans(path).values() if s[0] == "submit"]) == submits,
            "every submitted run",
            WITHIN,
        )
        runs = sorted((start, end, trigger) for trigger, start, end in spans(path).values())
        gaps = sorted(b[0] - a[1] for a, b in itertools.pairwise(runs) if b[2] == "submit")
        overlapping = sum(1 for a, b in itertools.pairwise(runs) if b[0] < a[1])
        ms = [g * 1000 for g in gaps]
        return (
            f"{submits} submitted runs: end -> next submitted start min {ms[0]:.0f} ms, "
            f"median {statistics.median(ms):.0f} ms, max {ms[-1]:.0f} ms; "
            f"overlapping runs {overlapping}"
        )
    finally:
        nodes.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submits", type=int, default=12)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        print("SQLite:", measure(Path(d), f"sqlite:///{d}/state.db", args.submits))
    if not args.no_postgres:
        server = pg_server.start()
        try:
            with tempfile.TemporaryDirectory() as d:
                print("PostgreSQL:", measure(Path(d), server.fresh_schema_url(), args.submits))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
