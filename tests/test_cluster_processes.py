"""Clusters of real ``jobscheduler run`` processes on one state store, killed with SIGKILL.

- 2 nodes on one SQLite file, 4 nodes on a real PostgreSQL server: a 1-second job every
  second; random nodes killed with kill -9 while runs go on (and one restarted under its old
  name). Afterwards, from the store: no slot run twice, every slot of the stretch when some
  node was up has a final record, the killed nodes' runs are ``abandoned`` and were taken
  over within the documented bound (lease + lease / 3).
- A node killed while its job runs and restarted under the same name: the leftover process
  group is stopped (pid and start time) and the run recorded ``abandoned``.

Leases are short here (3 s: heartbeats every second) so the tests take seconds, not minutes.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pg_server import PgServer

from jobscheduler.runners.procs import process_alive
from jobscheduler.state import RunRecord, RunState, StateStore, open_store

LEASE = 3.0
BOUND = LEASE + LEASE / 3  # the take-over bound of docs/state.md for this lease
SLACK = 1.5  # process start-up, a loaded machine, the store's clock against ours

JOBS = """\
jobs:
  tick:
    command: [sleep, "1"]
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 1 second
"""


class Cluster:
    """Node processes of ``jobscheduler run`` on one config and one store."""

    def __init__(self, directory: Path, url: str, config: str = JOBS) -> None:
        self.directory = directory
        self.url = url
        self.config = directory / "jobs.yaml"
        self.config.write_text(config)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.killed: list[tuple[str, datetime]] = []
        self.store: StateStore = open_store(url)[0]

    def start(self, name: str) -> None:
        log = self.directory / f"{name}.log"
        self.procs[name] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jobscheduler",
                "run",
                str(self.config),
                "--state",
                self.url,
                "--node",
                name,
                "--lease",
                str(LEASE),
                "--log-file",
                str(log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait_up(self, *names: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            up = {n.name for n in self.store.nodes() if n.state == "up"}
            pids = {n.name: n.pid for n in self.store.nodes()}
            if all(n in up and pids[n] == self.procs[n].pid for n in names):
                return
            time.sleep(0.1)
        raise AssertionError(f"nodes {names} did not come up: {self.logs()}")

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(10)
        self.killed.append((name, datetime.now(UTC)))

    def stop(self, name: str) -> None:
        """Stop node `name` as its service manager would (SIGTERM: it ends its runs and
        leaves), and wait for it."""
        self.procs[name].send_signal(signal.SIGTERM)
        self.procs[name].wait(60)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            proc.wait(30)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text()[-3000:]}" for p in self.directory.glob("*.log")
        )

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        self.store.close()


@pytest.fixture
def cluster_on(tmp_path: Path) -> Iterator[list[Cluster]]:
    made: list[Cluster] = []
    yield made
    for cluster in made:
        cluster.close()


def check(cluster: Cluster, since: datetime, until: datetime) -> list[RunRecord]:
    """The run records of the cluster hold: every slot in [since, until] recorded once and
    final, the runs of killed nodes abandoned within the bound."""
    runs = cluster.store.history("tick", limit=100_000)
    keys = Counter((r.slot, r.attempt) for r in runs if r.slot is not None)
    assert [k for k, n in keys.items() if n > 1] == []  # 0 duplicate slots
    assert [r for r in runs if r.state is RunState.RUNNING] == []  # nothing left unfinished
    slots = {r.slot for r in runs}
    slot = since.replace(microsecond=0) + timedelta(seconds=1)
    missing = []
    while slot < until:
        if slot not in slots:
            missing.append(slot)
        slot += timedelta(seconds=1)
    assert missing == [], cluster.logs()  # 0 slots without a recorded state
    killed = dict(cluster.killed)
    for run in runs:
        if run.node in killed and run.state is not RunState.ABANDONED:
            assert run.ended is not None
            # a run of a killed node either ended before the kill, or was abandoned
            assert (
                run.ended <= killed[run.node] + timedelta(seconds=0.5)
                or run.started > (killed[run.node])
            ), run
    abandoned = [r for r in runs if r.state is RunState.ABANDONED]
    for run in abandoned:
        # Slots claimed ahead and not due at the take-over certainly never started.
        assert run.reason in (f"node lost, may have run: {run.node}", f"node lost: {run.node}")
        assert run.ended is not None
        killed_at = max(t for name, t in cluster.killed if name == run.node)
        took = (run.ended - killed_at).total_seconds()
        assert took <= BOUND + SLACK, (run, took)
    return runs


def busy_node(cluster: Cluster, alive: list[str], within: float = 5.0) -> str | None:
    """One of the `alive` nodes that has a run in state ``running`` now, if one comes."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        busy = sorted(
            {r.node for r in cluster.store.history(limit=50) if r.state is RunState.RUNNING}
            & set(alive)
        )
        if busy:
            return busy[0]
        time.sleep(0.05)
    return None


def run_cluster(cluster: Cluster, names: list[str], *, kills: int, restart: bool) -> None:
    for name in names:
        cluster.start(name)
    cluster.wait_up(*names)
    since = datetime.now(UTC)
    rng = random.Random(os.getpid())
    alive = list(names)
    for round_ in range(kills):
        time.sleep(rng.uniform(1.5, 2.5))
        # A node in the middle of a run, so that the kill cuts one short (on a loaded machine
        # the node picked at random may have no run at that moment).
        victim = busy_node(cluster, alive) or rng.choice(alive)
        cluster.kill(victim)
        alive.remove(victim)
        if restart and round_ == 0:
            time.sleep(0.5)
            cluster.start(victim)  # the same name: takes over its own runs at once
            cluster.wait_up(victim)
            alive.append(victim)
    time.sleep(BOUND + SLACK)  # every killed node taken over
    until = datetime.now(UTC) - timedelta(seconds=1)
    cluster.stop_all()
    runs = check(cluster, since, until)
    abandoned = [r for r in runs if r.state is RunState.ABANDONED]
    assert abandoned, cluster.logs()  # kills during 1-second runs always cut one short
    states = {n.name: n.state for n in cluster.store.nodes()}
    assert set(states.values()) <= {"left", "dead"}


def test_two_nodes_on_one_sqlite_file_survive_kill_9(
    tmp_path: Path, cluster_on: list[Cluster]
) -> None:
    cluster = Cluster(tmp_path, f"sqlite:///{tmp_path / 'state.db'}")
    cluster_on.append(cluster)
    run_cluster(cluster, ["a", "b"], kills=2, restart=True)


def test_four_nodes_on_postgresql_survive_kill_9(
    tmp_path: Path, cluster_on: list[Cluster], pg_server: PgServer
) -> None:
    cluster = Cluster(tmp_path, pg_server.fresh_schema_url())
    cluster_on.append(cluster)
    run_cluster(cluster, ["n1", "n2", "n3", "n4"], kills=3, restart=False)


# A run every 2 s, one at a time: the first comes as soon as the node is up, however long its
# start takes on a loaded machine (a slot a few seconds ahead could pass before it is up).
# Only the first run sleeps (the marker file tells the later ones to end at once).
LONG = """\
jobs:
  long:
    command: [sh, -c, 'if [ -e "{marker}" ]; then exit 0; fi; touch "{marker}"; exec sleep 300']
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 2 seconds
    max_instances: 1
"""


def test_a_restarted_node_stops_the_process_group_its_lost_run_left(
    tmp_path: Path, cluster_on: list[Cluster]
) -> None:
    config = LONG.format(marker=tmp_path / "first-run")
    cluster = Cluster(tmp_path, f"sqlite:///{tmp_path / 'state.db'}", config)
    cluster_on.append(cluster)
    cluster.start("solo")
    cluster.wait_up("solo")
    deadline = time.monotonic() + 60
    while not cluster.store.processes("solo") and time.monotonic() < deadline:
        time.sleep(0.1)
    processes = cluster.store.processes("solo")
    assert len(processes) == 1, cluster.logs()
    [(run_id, pid, started)] = processes
    assert process_alive(pid, started)
    cluster.kill("solo")
    time.sleep(0.5)
    assert process_alive(pid, started)  # the orphan runs on: nobody stopped it yet
    cluster.start("solo")
    cluster.wait_up("solo")
    deadline = time.monotonic() + 60
    while process_alive(pid, started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(pid, started), cluster.logs()
    # (the restarted node goes on with runs of its own, which end at once)
    [run] = [r for r in cluster.store.history("long") if r.run_id == run_id]
    assert (run.state, run.reason) == (RunState.ABANDONED, "node lost, may have run: solo")
    cluster.stop_all()


SHORT = """\
jobs:
  tick:
    command: [sleep, "0.2"]
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 1 second
"""


def test_slots_no_node_was_up_for_are_one_missed_record(
    tmp_path: Path, cluster_on: list[Cluster]
) -> None:
    cluster = Cluster(tmp_path, f"sqlite:///{tmp_path / 'state.db'}", SHORT)
    cluster_on.append(cluster)
    cluster.start("first")
    cluster.wait_up("first")
    since = datetime.now(UTC)
    time.sleep(3)
    cluster.kill("first")
    killed = time.monotonic()
    time.sleep(4)  # nobody up
    cluster.start("second")
    cluster.wait_up("second")
    # Nobody was up for at most this long (the second node's start is slow on a loaded machine).
    gap = time.monotonic() - killed
    time.sleep(2)
    until = datetime.now(UTC) - timedelta(seconds=1)
    cluster.stop_all()
    runs = cluster.store.history("tick", limit=10_000)
    [missed] = [r for r in runs if r.state is RunState.MISSED]
    assert missed.slot is not None and missed.last_slot is not None
    count = int((missed.last_slot - missed.slot).total_seconds()) + 1
    assert 2 <= count <= gap + 3, (missed, gap)  # + 3: slots are whole seconds, at both ends
    assert missed.reason is not None and missed.reason.startswith(f"{count} slots missed")
    recorded = Counter(r.slot for r in runs if r.slot is not None and r is not missed)
    slot = missed.slot
    while slot <= missed.last_slot:
        recorded[slot] += 1
        slot += timedelta(seconds=1)
    assert [s for s, n in recorded.items() if n > 1] == [], [
        (r.slot, r.last_slot, r.state, r.node, r.started) for r in runs
    ]  # no slot both run and missed
    slot = since.replace(microsecond=0) + timedelta(seconds=1)
    missing = []
    while slot < until:
        if slot not in recorded:
            missing.append(slot)
        slot += timedelta(seconds=1)
    assert missing == [], cluster.logs()
