"""How fast a dead node's runs are taken over, and what an idle node asks of its store.

    .venv/bin/python bench/takeover.py

Three figures, each from real components on a SQLite store in a temporary directory, with the
default lease (15 s, a heartbeat every 5 s):

1. *Another host*: a node registered from another host stops heartbeating with a run in
   flight; a live `Scheduler` takes it over when its lease has run out. Printed: the time from
   its last heartbeat to the run recorded ``abandoned`` (bound: lease + lease / 3 = 20 s).
2. *Same host*: two ``jobscheduler run`` daemons on one config; the one running a long job is
   killed with SIGKILL. Printed: the time from the kill to the run recorded ``abandoned``
   (bound: one heartbeat, 5 s).
3. *Idle*: the statements an idle node (1,000 daily jobs due tomorrow, as in
   ``bench/cluster.py``'s idle case) sends to its store, per second, over 30 s after 6 s of
   settling (its start's reads and the first heartbeat's pruning of history, then hourly,
   left out); one statement a heartbeat (5 s) and one look at the queue every 2 s: 0.7/s,
   and on SQLite one read of the pauses' version a second: 1.7/s (docs/state.md).

Not part of ``bench/run_all.py`` (it takes about a minute of wall time, mostly waiting).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from jobscheduler.model.job import Job
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import NodeInfo, RunState
from jobscheduler.state.sqlite import SqliteStateStore


def another_host(directory: Path) -> float:
    store = SqliteStateStore(directory / "remote.db")
    lease = timedelta(seconds=15)
    now = datetime.now(UTC)
    remote = NodeInfo(name="remote", host="elsewhere", pid=1, process_started=1.0, started=now)
    store.join(remote, lease=lease)
    last_beat = store.nodes()[0].heartbeat
    assert last_beat is not None
    store.claim("job", None, "run_now", "r1", node="remote", started=now)
    scheduler = Scheduler(state=store, node="taker")
    scheduler.start()
    while store.history()[0].state is RunState.RUNNING:
        time.sleep(0.05)
    run = store.history()[0]
    scheduler.shutdown()
    store.close()
    assert run.ended is not None
    return (run.ended - last_beat).total_seconds()


def same_host(directory: Path) -> float:
    start = (datetime.now(UTC) + timedelta(seconds=3)).strftime("%Y-%m-%d %H:%M:%S")
    config = directory / "jobs.yaml"
    config.write_text(
        f"jobs:\n  long:\n    command: [sleep, '60']\n    start: {start}\n"
        "    timezone: UTC\n    interval: 1 hour\n"
    )
    procs = {
        name: subprocess.Popen(
            [
                *(sys.executable, "-m", "jobscheduler", "run", str(config), "--node", name),
                *("--log-file", str(directory / f"{name}.log")),
            ]
        )
        for name in ("a", "b")
    }
    store = SqliteStateStore(directory / "jobs.state.db")
    try:
        while not any(r.state is RunState.RUNNING for r in store.history("long")):
            time.sleep(0.05)
        [run] = store.history("long")
        killed = datetime.now(UTC)
        procs[run.node].send_signal(signal.SIGKILL)
        procs[run.node].wait()
        while store.history("long")[0].state is RunState.RUNNING:
            time.sleep(0.05)
        ended = store.history("long")[0].ended
        assert ended is not None
        return (ended - killed).total_seconds()
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
        store.close()


def idle(directory: Path, seconds: float = 30.0, jobs: int = 1000) -> float:
    store = SqliteStateStore(directory / "idle.db")
    scheduler = Scheduler(state=store, node="idle")
    scheduler.start()
    tomorrow = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    scheduler.add_jobs(
        [Job(f"j{i}", command=["true"], start=tomorrow, interval="1 day") for i in range(jobs)]
    )
    time.sleep(6.0)
    before, began = store.statements, time.monotonic()
    time.sleep(seconds)
    rate = (store.statements - before) / (time.monotonic() - began)
    scheduler.shutdown()
    store.close()
    return rate


def main() -> None:
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        print(f"another host: taken over {another_host(directory):.1f} s after its last heartbeat")
        print(f"same host: taken over {same_host(directory):.1f} s after kill -9")
        print(f"idle node: {idle(directory):.2f} store statements/s")


if __name__ == "__main__":
    main()
