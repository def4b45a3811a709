"""Two faults with real daemons: a node frozen with SIGSTOP, and kill -9 during a burst.

    .venv/bin/python bench/faults.py frozen [--store sqlite|postgres] [--trials 1]
    .venv/bin/python bench/faults.py burst [--trials 6] [--jobs 20]
    .venv/bin/python bench/faults.py window [--jobs 20] [--on-node-loss rerun|abandon]

Both run ``jobscheduler run`` daemons on one store (a SQLite file in a temporary directory, or
a throw-away PostgreSQL server for ``frozen --store postgres``), with a 3-s lease (a heartbeat
every second), and read what the jobs wrote themselves (one line per start, per tenth of a
second alive, per end), not only what the store says.

- ``frozen``: node ``a`` runs in a UTS namespace of its own (``unshare -u``: another host
  name, so node ``b`` cannot reach its processes and must rely on the lease) and starts a
  30-s job with ``on_node_loss: rerun``; ``a`` is stopped with SIGSTOP for 4 leases, then
  SIGCONT. Printed: when ``b``'s rerun started, the last sign of life of ``a``'s attempt,
  the *overlap* of the two (positive: two live attempts of one slot), and the fence
  (``JOBSCHEDULER_FENCE``) each attempt saw.
- ``burst``: 20 jobs every second (``on_node_loss: rerun``), each writing one line when it
  runs; node ``aN`` is killed with SIGKILL at a random moment of the burst (the first 0.15 s
  of a second), ``b`` takes it over, ``aN+1`` joins, `--trials` times. Printed: the reruns,
  and those that *repeat* a slot whose run had already written its line; the slots recorded
  ``abandoned`` though they ran, and their reasons.
- ``window``: no kill, one scheduler in this process on a SQLite file, 20 jobs every second
  for 10 s: per run, the time from its job's line to the commit of its finish, the window in
  which a kill -9 makes ``rerun`` repeat a run that had ended (median, p90, max).

A "before" to compare: ``FAULTS_CODE=/path/to/an/older/checkout`` runs the daemons (and the
``window`` scheduler) on that code instead (``git archive COMMIT | tar -x -C DIR``).

Not part of ``bench/run_all.py`` (each takes 20-60 s of wall time, mostly waiting).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# FAULTS_CODE: this process and the daemons run another copy of the code (a "before").
CODE = Path(os.environ.get("FAULTS_CODE", str(REPO)))
sys.path.insert(0, str(CODE))
sys.path.insert(0, str(REPO / "tests"))  # the daemons' helper, and pg_server

from daemons import Daemons  # noqa: E402

from jobscheduler.state import RunState  # noqa: E402

LEASE = 3.0


@contextmanager
def store_url(kind: str, directory: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'jobs.state.db'}"
        return
    from pg_server import start

    server = start()
    try:
        yield server.fresh_schema_url()
    finally:
        server.stop()


# -- frozen ---------------------------------------------------------------------------------

LONG = """\
jobs:
  long:
    command: |
      echo "start $(date +%s.%N) $JOBSCHEDULER_NODE ${JOBSCHEDULER_FENCE:-none}" >> RECORDS
      i=0
      while [ $i -lt 300 ]; do
        echo "alive $(date +%s.%N) $JOBSCHEDULER_NODE" >> RECORDS; sleep 0.1; i=$((i+1))
      done
      echo "end $(date +%s.%N) $JOBSCHEDULER_NODE" >> RECORDS
    shell: true
    start: START
    timezone: UTC
    interval: 1 hour
    on_node_loss: rerun
"""


def frozen(kind: str) -> dict[str, object]:
    directory = Path(tempfile.mkdtemp(prefix="frozen-"))
    records = directory / "records.txt"
    try:
        with store_url(kind, directory) as url:
            start = (datetime.now(UTC) + timedelta(seconds=15)).strftime("%Y-%m-%d %H:%M:%S")
            config = LONG.replace("RECORDS", str(records)).replace("START", start)
            daemons = Daemons(directory, url, config, lease=LEASE, code=CODE)
            try:
                daemons.start("a", host="frozenhost")
                daemons.wait_up("a")
                daemons.wait_for(
                    lambda: records.exists() and "start" in records.read_text(), "a's run"
                )
                daemons.start("b")
                daemons.wait_up("b")
                time.sleep(0.5)
                daemons.procs["a"].send_signal(signal.SIGSTOP)
                stopped = time.time()
                daemons.wait_for(lambda: " b " in records.read_text(), "b's rerun")
                time.sleep(max(0.0, stopped + 4 * LEASE - time.time()))
                daemons.procs["a"].send_signal(signal.SIGCONT)
                time.sleep(3)
                history = daemons.store.history("long")
            finally:
                daemons.close()
        lines = [line.split() for line in records.read_text().splitlines()]
        starts = {w[2]: (float(w[1]), w[3]) for w in lines if w[0] == "start"}
        last_a = max(float(w[1]) for w in lines if w[2] == "a")
        b_start, b_fence = starts["b"]
        return {
            "store": kind,
            "frozen_for": round(4 * LEASE, 1),
            "b_rerun_after_freeze": round(b_start - stopped, 3),
            "a_last_alive_after_freeze": round(last_a - stopped, 3),
            "overlap": round(last_a - b_start, 3),
            "fence_a": starts["a"][1],
            "fence_b": b_fence,
            "records": [(r.node, r.attempt, r.state.value, r.reason) for r in history],
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# -- burst ----------------------------------------------------------------------------------


def burst_config(jobs: int, records: Path) -> str:
    lines = ["jobs:"]
    for index in range(jobs):
        lines += [
            f"  j{index:02d}:",
            "    command: |",
            '      echo "$JOBSCHEDULER_JOB $JOBSCHEDULER_SLOT $JOBSCHEDULER_NODE '
            f'$JOBSCHEDULER_TRIGGER $(date +%s.%N)" >> {records}',
            "    shell: true",
            "    start: 2024-01-01 00:00:00",
            "    timezone: UTC",
            "    interval: 1 second",
            "    on_node_loss: rerun",
        ]
    return "\n".join(lines) + "\n"


def burst(trials: int, jobs: int) -> dict[str, object]:
    directory = Path(tempfile.mkdtemp(prefix="burst-"))
    records = directory / "records.txt"
    rng = random.Random()
    killed: list[str] = []
    killed_at: dict[str, float] = {}
    try:
        daemons = Daemons(
            directory,
            f"sqlite:///{directory / 'jobs.state.db'}",
            burst_config(jobs, records),
            lease=LEASE,
            code=CODE,
        )
        try:
            daemons.start("b")
            daemons.wait_up("b")
            for trial in range(trials):
                name = f"a{trial}"
                daemons.start(name)
                daemons.wait_up(name)
                time.sleep(2.0)
                now = time.time()
                time.sleep(1 - (now % 1) + rng.uniform(0.0, 0.15))
                daemons.procs[name].send_signal(signal.SIGKILL)
                killed_at[name] = time.time()
                daemons.procs[name].wait(10)
                killed.append(name)

                def dead(node: str = name) -> bool:
                    return any(x.name == node and x.state == "dead" for x in daemons.store.nodes())

                daemons.wait_for(dead, f"{name} taken over")
                time.sleep(1.5)
            history = daemons.store.history(limit=1_000_000)
        finally:
            daemons.close()
        ran: dict[tuple[str, str], list[tuple[str, str, float]]] = collections.defaultdict(list)
        for line in records.read_text().splitlines():
            job, slot, node, trigger, when = line.split()
            ran[(job, slot)].append((node, trigger, float(when)))
        reruns = repeats = orphans = 0
        windows: list[float] = []
        for runs in ran.values():
            for _node, trigger, _ in runs:
                if trigger != "rerun":
                    continue
                reruns += 1
                # The killed node's run of the slot: ended before the kill (its finish was
                # lost), or after it (an orphan: its process outlived its node).
                before = [killed_at[n] - t for n, tr, t in runs if tr != "rerun" and n in killed_at]
                if any(gap > 0 for gap in before):
                    repeats += 1
                    windows.append(max(before))
                elif before:
                    orphans += 1
        abandoned = [r for r in history if r.state is RunState.ABANDONED and r.node in killed]
        ran_abandoned = collections.Counter(
            (r.reason or "").split(":")[0]
            for r in abandoned
            if r.slot is not None
            and any(n == r.node for n, _, _ in ran[(r.job, r.slot.strftime("%Y-%m-%dT%H:%M:%SZ"))])
        )
        reasons = collections.Counter((r.reason or "").split(":")[0] for r in abandoned)
        return {
            "trials": trials,
            "jobs": jobs,
            "reruns": reruns,
            "reruns_repeating_a_run_that_had_ended": repeats,
            "its_end_before_the_kill_s": sorted(round(w, 3) for w in windows),
            "reruns_of_a_run_that_ended_after_the_kill": orphans,
            "abandoned": len(abandoned),
            "abandoned_by_reason": dict(reasons),
            "abandoned_though_they_ran": dict(ran_abandoned),
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# -- window ---------------------------------------------------------------------------------


def window(jobs: int, on_node_loss: str, seconds: float) -> dict[str, object]:
    """In this process: a `Scheduler` on a SQLite file runs `jobs` jobs every second; for
    each run, the time from its job's own last line to the commit of its finish (the
    at-least-once window: a node killed within it loses the finish, and a rerun repeats a
    run that had ended). The commit times are taken by wrapping the store's batch writer."""
    from jobscheduler.scheduler import Scheduler
    from jobscheduler.state import sqlbatch, sqlstore

    directory = Path(tempfile.mkdtemp(prefix="window-"))
    records = directory / "records.txt"
    commits: dict[str, float] = {}
    write = sqlstore.SqlStateStore._run_batch

    def timed(self: sqlstore.SqlStateStore, ops: list[sqlbatch.Op]) -> list[object]:
        answers = write(self, ops)
        now = time.time()
        for op in ops:
            if isinstance(op, sqlbatch.Finish):
                commits[op.run_id] = now
        return answers

    sqlstore.SqlStateStore._run_batch = timed  # type: ignore[assignment,method-assign]
    try:
        config = (
            burst_config(jobs, records)
            .replace("$JOBSCHEDULER_JOB $JOBSCHEDULER_SLOT", "$JOBSCHEDULER_RUN_ID")
            .replace("on_node_loss: rerun", f"on_node_loss: {on_node_loss}")
        )
        (directory / "jobs.yaml").write_text(config)
        scheduler = Scheduler(str(directory / "jobs.yaml"), node="window")
        scheduler.start()
        time.sleep(seconds)
        scheduler.shutdown()
        gaps = []
        for line in records.read_text().splitlines():
            run_id, _node, _trigger, when = line.split()
            if run_id in commits:
                gaps.append((commits[run_id] - float(when)) * 1000)
        gaps.sort()
        return {
            "jobs": jobs,
            "on_node_loss": on_node_loss,
            "runs": len(gaps),
            "end_to_commit_ms_median": round(gaps[len(gaps) // 2], 1),
            "p90": round(gaps[int(len(gaps) * 0.9)], 1),
            "max": round(gaps[-1], 1),
        }
    finally:
        sqlstore.SqlStateStore._run_batch = write  # type: ignore[method-assign]
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fault", choices=["frozen", "burst", "window"])
    parser.add_argument("--on-node-loss", choices=["rerun", "abandon"], default="rerun")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--jobs", type=int, default=20)
    args = parser.parse_args()
    if args.fault == "frozen":
        for _ in range(args.trials or 1):
            print(json.dumps(frozen(args.store)), flush=True)
    elif args.fault == "window":
        print(json.dumps(window(args.jobs, args.on_node_loss, 10.0)), flush=True)
    else:
        print(json.dumps(burst(args.trials or 6, args.jobs)), flush=True)


if __name__ == "__main__":
    main()
