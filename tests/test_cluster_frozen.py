"""A node frozen with SIGSTOP, and a node killed during a burst, with real daemons.

- Frozen: node ``a`` runs in a UTS namespace of its own (``unshare -u``: another host name,
  so node ``b`` cannot reach its processes and relies on the lease alone) and runs a long
  external job with ``on_node_loss: rerun``; ``a`` gets SIGSTOP. Its leash stops the job by
  the lease's end; ``b`` reruns the slot after it. From the job's own records (a line at its
  start, one every 0.1 s alive): the two attempts never overlap, the first attempt's process
  is dead while ``a`` is still frozen, and the fences (``JOBSCHEDULER_FENCE``) are 1 then 2.
  Where ``unshare -u`` is refused, ``a`` runs on this host under another name: ``b`` then
  also kills a's process groups itself at the take-over (same host), and the test checks the
  same promises.
- Burst: 20 jobs every second with ``on_node_loss: rerun`` on two nodes; ``a`` is killed with
  SIGKILL 60 ms into a burst. Every run ``a`` reported (its audit line) has its finish in the
  store (written before the report: with the finish posted to a 50-ms batch instead, this
  failed 3 times out of 3), and every run of ``a`` that wrote its line yet is recorded
  ``abandoned`` says "node lost, may have run"; the reruns have fence 2.

Leases are short here (3 s: heartbeats every second) so the tests take seconds.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from daemons import Daemons
from pg_server import PgServer

from jobscheduler.runners.procs import process_alive, process_start_time
from jobscheduler.state import RunState

LEASE = 3.0


def running(pid: int, started: float) -> bool:
    """Whether process `pid` (that started at `started`) lives and is not a zombie."""
    if not process_alive(pid, started):
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return False
    return text[text.rfind(")") + 2] != "Z"


def can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(["unshare", "-u", "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'jobs.state.db'}"
        return
    server: PgServer = request.getfixturevalue("pg_server")
    yield server.fresh_schema_url()


LONG = """\
jobs:
  long:
    command: |
      echo "start $(date +%s.%N) $JOBSCHEDULER_NODE $JOBSCHEDULER_FENCE $$" >> RECORDS
      i=0
      while [ $i -lt 600 ]; do
        echo "alive $(date +%s.%N) $JOBSCHEDULER_NODE" >> RECORDS; sleep 0.1; i=$((i+1))
      done
    shell: true
    start: START
    timezone: UTC
    interval: 1 hour
    on_node_loss: rerun
"""


def test_a_frozen_nodes_job_is_stopped_before_its_rerun_starts(url: str, tmp_path: Path) -> None:
    records = tmp_path / "records.txt"
    start = (datetime.now(UTC) + timedelta(seconds=15)).strftime("%Y-%m-%d %H:%M:%S")
    config = LONG.replace("RECORDS", str(records)).replace("START", start)
    daemons = Daemons(tmp_path, url, config, lease=LEASE)

    def lines() -> list[list[str]]:
        text = records.read_text() if records.exists() else ""
        return [line.split() for line in text.splitlines()]

    try:
        daemons.start("a", host="frozen-host" if can_unshare() else None)
        daemons.wait_up("a")
        daemons.wait_for(lambda: any(w[0] == "start" for w in lines()), "a's run")
        daemons.start("b")
        daemons.wait_up("b")
        [first] = [w for w in lines() if w[0] == "start"]
        assert (first[2], first[3]) == ("a", "1")  # node a, fence 1
        job_pid = int(first[4])
        job_started = process_start_time(job_pid)
        daemons.procs["a"].send_signal(signal.SIGSTOP)
        frozen = time.time()
        daemons.wait_for(
            lambda: any(w[0] == "start" and w[2] == "b" for w in lines()),
            "b's rerun",
        )
        # a is still frozen (nothing of it could act), yet its job's process is gone (a
        # zombie: its parent, a, cannot reap it while frozen).
        assert not running(job_pid, job_started)
        assert daemons.procs["a"].poll() is None
        [second] = [w for w in lines() if w[0] == "start" and w[2] == "b"]
        assert int(second[3]) > int(first[3]) and second[3] == "2"  # the fence rose
        rerun_at = float(second[1])
        last_a = max(float(w[1]) for w in lines() if w[2] == "a")
        overlap = last_a - rerun_at
        assert overlap < 0, (overlap, daemons.logs())  # never two live attempts
        # The job's process died by the lease's end (plus the leash's grace and the 0.1-s
        # step of its records), counted from the freeze (a renewal can be up to a
        # heartbeat older than it): one lease and a second of a loaded machine at most.
        assert last_a - frozen < LEASE + 1.0 + 1.5, (last_a - frozen, daemons.logs())
        daemons.procs["a"].send_signal(signal.SIGCONT)
        daemons.wait_for(lambda: "joined the store again" in daemons.log("a"), "a rejoining")
        runs = {r.attempt: r for r in daemons.store.history("long")}
        assert (runs[1].node, runs[1].state) == ("a", RunState.ABANDONED)
        assert runs[1].reason == "node lost, may have run: a"
        assert (runs[2].node, runs[2].trigger) == ("b", "rerun")
    finally:
        daemons.close()


def burst(jobs: int, records: Path) -> str:
    text = ["jobs:"]
    for index in range(jobs):
        text += [
            f"  j{index:02d}:",
            "    command: |",
            f'      echo "$JOBSCHEDULER_JOB $JOBSCHEDULER_SLOT $JOBSCHEDULER_NODE '
            f'$JOBSCHEDULER_FENCE $(date +%s.%N)" >> {records}',
            "    shell: true",
            "    start: 2024-01-01 00:00:00",
            "    timezone: UTC",
            "    interval: 1 second",
            "    on_node_loss: rerun",
        ]
    return "\n".join(text) + "\n"


def test_a_node_killed_during_a_burst_lost_no_finish_it_reported(tmp_path: Path) -> None:
    records = tmp_path / "records.txt"
    daemons = Daemons(
        tmp_path, f"sqlite:///{tmp_path / 'jobs.state.db'}", burst(20, records), lease=LEASE
    )
    try:
        daemons.start("b")
        daemons.wait_up("b")
        daemons.start("a")
        daemons.wait_up("a")
        # (b alone may not have run a job yet: no file before the first line)
        daemons.wait_for(lambda: records.exists() and " a " in records.read_text(), "a's runs")
        time.sleep(1.0 - time.time() % 1.0 + 0.06)  # into a burst
        daemons.procs["a"].send_signal(signal.SIGKILL)
        killed = time.time()
        daemons.procs["a"].wait(10)
        daemons.wait_for(
            lambda: any(n.name == "a" and n.state == "dead" for n in daemons.store.nodes()),
            "a taken over",
        )
        time.sleep(2.0)  # the reruns (a fifth of the lease later) run
        history = daemons.store.history(limit=100_000)
    finally:
        daemons.close()
    # Every run a reported (its audit line, logged after its finish was committed) is
    # recorded with its outcome, never abandoned.
    reported = Counter(
        line.split("jobscheduler.audit: ")[1].split(" : ")[0]
        for line in daemons.log("a").splitlines()
        if "jobscheduler.audit: " in line
    )
    final = (RunState.SUCCEEDED, RunState.FAILED, RunState.NOT_STARTED)
    finished = Counter(r.job for r in history if r.node == "a" and r.state in final)
    assert reported, daemons.logs()
    assert {job: n for job, n in reported.items() if finished[job] < n} == {}
    # What a's jobs wrote before the kill: the runs that ran; those recorded abandoned say
    # the outcome is unknown. The reruns have the next fence.
    ran: set[tuple[str, str]] = set()
    fences: dict[tuple[str, str], list[str]] = {}
    for line in records.read_text().splitlines():
        job, slot, node, fence, when = line.split()
        fences.setdefault((job, slot), []).append(fence)
        if node == "a" and float(when) < killed:
            ran.add((job, slot))
    for run in history:
        if run.node != "a" or run.state is not RunState.ABANDONED or run.slot is None:
            continue
        key = (run.job, run.slot.strftime("%Y-%m-%dT%H:%M:%SZ"))
        if key in ran:
            assert run.reason == "node lost, may have run: a", run
        else:
            assert run.reason in ("node lost, may have run: a", "node lost: a"), run
    # (A kill between two runs of a's leaves nothing to rerun: reruns are not required.)
    reruns = [r for r in history if r.trigger == "rerun"]
    assert all(r.node == "b" and r.attempt == 2 for r in reruns)
    for run in reruns:
        assert run.slot is not None
        key = (run.job, run.slot.strftime("%Y-%m-%dT%H:%M:%SZ"))
        if run.state is RunState.SUCCEEDED:
            assert "2" in fences[key]
