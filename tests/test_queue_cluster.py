"""The queue across real ``jobscheduler run`` processes on one state store.

- Scarce workers: two daemons on a real PostgreSQL server, one worker each, rows of mixed
  priority inserted by plain SQL while both are busy: the runs start in priority order across
  both nodes, measured from the start times the runs write themselves.
- kill -9 of the node running a submitted run of a job with ``on_node_loss: rerun``: the
  node that takes over runs it again with the same ``JOBSCHEDULER_ARGS``, and the queue row
  ends with that run's state and run id (SQLite and PostgreSQL).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemons import Daemons

from jobscheduler.state import RunState

LEASE = 3.0

# A run: appends [its start time, node, run id, JOBSCHEDULER_ARGS, trigger] to starts.log in
# one write, then waits until the file args["gate"] exists (at most 60 s) if it has one, and
# sleeps args["sleep"] seconds (on node args["long_on"]: 120 s).
WORK = """\
import json, os, sys, time
started = time.time()
env = os.environ
args = json.loads(env.get("JOBSCHEDULER_ARGS") or "{}")
line = json.dumps([started, env["JOBSCHEDULER_NODE"], env["JOBSCHEDULER_RUN_ID"],
                   env.get("JOBSCHEDULER_ARGS"), env["JOBSCHEDULER_TRIGGER"]])
with open(sys.argv[1], "a") as out:
    out.write(line + "\\n")
while args.get("gate") and not os.path.exists(args["gate"]) and time.time() < started + 60:
    time.sleep(0.01)
time.sleep(120 if env["JOBSCHEDULER_NODE"] == args.get("long_on") else args.get("sleep", 0))
"""


def config(directory: Path) -> str:
    """The config's text; its runs' script written to `directory`."""
    script = directory / "work.py"
    script.write_text(WORK)
    command = json.dumps([sys.executable, str(script), str(directory / "starts.log")])
    return (
        "jobs:\n"
        "  work:\n"
        "    on_demand: true\n"
        f"    command: {command}\n"
        "  slow:\n"
        "    on_demand: true\n"
        "    on_node_loss: rerun\n"
        f"    command: {command}\n"
    )


def runs(nodes: Daemons) -> list[tuple[float, str, str, str | None, str]]:
    """What the runs wrote when they started, in the order of their start times."""
    starts = nodes.directory / "starts.log"
    if not starts.exists():
        return []
    lines = starts.read_text().splitlines()
    return sorted(tuple(json.loads(line)) for line in lines)  # type: ignore[misc]


def workers(count: int) -> tuple[str, ...]:
    return ("--max-workers", str(count))


@pytest.fixture
def made() -> Iterator[list[Daemons]]:
    nodes: list[Daemons] = []
    yield nodes
    for each in nodes:
        each.close()


def test_with_scarce_workers_rows_start_in_priority_order_across_nodes(
    tmp_path: Path, pg_server: Any, made: list[Daemons]
) -> None:
    import psycopg

    nodes = Daemons(tmp_path, pg_server.fresh_schema_url(), config(tmp_path), lease=LEASE)
    made.append(nodes)
    for name in ("n1", "n2"):
        nodes.start(name, options=workers(1))
    nodes.wait_up("n1", "n2")
    # Both nodes busy, each with a row pinned to it (a node "up" in the store may still be
    # starting its queue thread on a loaded machine: these rows wait for it).
    gate = tmp_path / "release"
    for name in ("n1", "n2"):
        nodes.store.submit("work", {"block": name, "gate": str(gate)}, host=name)
    nodes.wait_for(lambda: len(runs(nodes)) == 2, "both blocking runs")
    assert {node for _, node, *_ in runs(nodes)} == {"n1", "n2"}
    # Rows of mixed priority, by plain SQL (no notification): low ones first; then, once the
    # busy nodes have looked at the queue a few times (a busy node looks every second, and
    # would have taken rows ahead by then), higher ones.
    priorities = [0, 1, 3, 9, 7, 5]
    with psycopg.connect(nodes.url, autocommit=True) as db:
        for n, p in enumerate(priorities):
            if n == 3:
                time.sleep(3.0)
            db.execute(
                "INSERT INTO jobscheduler_queue (job, args, priority) VALUES ('work', %s, %s)",
                (json.dumps({"p": p, "sleep": 3}), p),
            )
    time.sleep(3.0)
    states = [r.state for r in nodes.store.queue()]
    assert states.count("pending") == 6 and states.count("running") == 2  # none held ahead
    gate.touch()  # both workers free up at about the same time
    nodes.wait_for(
        lambda: [r.state for r in nodes.store.queue()] == ["succeeded"] * 8,
        "every row succeeded",
        within=90,
    )
    given = [(at, json.loads(args)) for at, _, _, args, _ in runs(nodes)]
    started = {args["p"]: at for at, args in given if "p" in args}
    assert sorted(started) == sorted(priorities)
    # A lower priority never starts half a run (3 s) before a higher one: two nodes
    # freeing up at about the same time take the two highest, in either order.
    late = [
        (high, low)
        for high in priorities
        for low in priorities
        if high > low and started[low] < started[high] - 1.5
    ]
    assert late == [], (started, nodes.logs())
    first_wave = sorted(started, key=started.__getitem__)[:2]
    assert sorted(first_wave) == [7, 9]


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_rerun_after_kill_9_keeps_the_args_and_settles_the_row(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest, made: list[Daemons]
) -> None:
    if engine == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.db'}"
    else:
        url = request.getfixturevalue("pg_server").fresh_schema_url()
    nodes = Daemons(tmp_path, url, config(tmp_path), lease=LEASE)
    made.append(nodes)
    nodes.start("n1", options=workers(2))
    nodes.wait_up("n1")
    args = {"day": "mon", "n": 7, "long_on": "n1", "sleep": 0.5}
    queue_id = nodes.store.submit("slow", args, priority=5)
    nodes.wait_for(lambda: len(runs(nodes)) == 1, "the first run")
    nodes.start("n2", options=workers(2))
    nodes.wait_up("n2")
    nodes.procs["n1"].send_signal(signal.SIGKILL)
    nodes.procs["n1"].wait(10)

    def row_final() -> bool:
        [row] = [r for r in nodes.store.queue() if r.id == queue_id]
        return row.state not in ("pending", "running")

    nodes.wait_for(row_final, "the row settled")
    first, rerun = runs(nodes)
    assert (first[1], rerun[1]) == ("n1", "n2")
    assert rerun[3] == first[3] and json.loads(rerun[3]) == args  # the same JOBSCHEDULER_ARGS
    assert rerun[4] == "submit"
    [row] = [r for r in nodes.store.queue() if r.id == queue_id]
    assert (row.state, row.run_id, row.node) == ("succeeded", rerun[2], "n2")
    assert (row.priority, row.attempt, row.args) == (5, 2, args)
    records = {r.run_id: r for r in nodes.store.history("slow")}
    assert records[first[2]].state is RunState.ABANDONED
    again = records[rerun[2]]
    assert (again.state, again.trigger, again.attempt) == (RunState.SUCCEEDED, "submit", 2)
