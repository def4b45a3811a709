"""``overlap: replace`` and ``overlap: queue`` across real ``jobscheduler run`` daemons on one
store: one SQLite file, and a real PostgreSQL server.

Each run's command writes its own start and end (run id, time, node) to a file the nodes
share: what ran when is measured from those lines, never from the scheduler's records.

- **replace across 2 nodes**: node a runs a long submitted run of the job; node b's slot of
  it stops that run through the store's kill request. The run on node a ends FAILED with the
  reason "replaced" (its record and its audit line), as a replace on one node, and b's run starts
  only once a's has ended.
- **queue across 3 nodes**: a 2.5-s job every second. Never two runs at once, never two slots
  waiting at once (a slot's wait: from its slot to its run's own start), every slot of the
  stretch recorded once, run or ``skipped``, none left ``running``.
"""

from __future__ import annotations

import itertools
import subprocess
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from daemons import Daemons, start_daemon
from pg_server import PgServer
from waiting import wait_until

from jobscheduler.policies.overlap import SKIPPED
from jobscheduler.state import RunState, StateStore, open_store

LEASE = 3.0

SCRIPT = """\
#!/bin/sh
# $1: seconds to run. Writes "RUN_ID start|end TIME NODE" to the shared file; on TERM (a
# replace, a kill) writes its end at once.
stamp() {{ echo "$JOBSCHEDULER_RUN_ID $1 $(date +%s.%N) $JOBSCHEDULER_NODE" >> {spans}; }}
trap 'stamp end; exit 143' TERM
stamp start
sleep "$1" &
wait
stamp end
"""


def job_script(folder: Path) -> tuple[Path, Path]:
    """The jobs' script and the file it writes to."""
    spans = folder / "spans.txt"
    spans.touch()
    script = folder / "job.sh"
    script.write_text(SCRIPT.format(spans=spans))
    return script, spans


def spans(path: Path) -> dict[str, tuple[float, float | None, str]]:
    """Per run id: its own start, end (None: still running) and node."""
    found: dict[str, tuple[float, float | None, str]] = {}
    for line in path.read_text().splitlines():
        run_id, what, when, node = line.split()
        if what == "start":
            found[run_id] = (float(when), None, node)
        elif run_id in found:
            start, _end, on = found[run_id]
            found[run_id] = (start, float(when), on)
    return found


# -- replace across two nodes ------------------------------------------------------------------

ON_DEMAND = """\
jobs:
  long:
    command: [sh, {script}, "60"]
    on_demand: true
    overlap: replace
"""

SCHEDULED = """\
jobs:
  long:
    command: [sh, {script}, "60"]
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 4 seconds
    overlap: replace
    kill_grace: 5s
"""


def replace_across_nodes(tmp_path: Path, url: str) -> None:
    script, path = job_script(tmp_path)
    configs = {}
    for name, text in (("a", ON_DEMAND), ("b", SCHEDULED)):
        folder = tmp_path / name
        folder.mkdir()
        configs[name] = folder / "jobs.yaml"
        configs[name].write_text(text.format(script=script))
    store: StateStore = open_store(url)[0]
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs = {name: tmp_path / f"{name}.log" for name in configs}

    def told() -> str:
        return "\n".join(f"--- {n}\n{p.read_text()[-3000:]}" for n, p in logs.items() if p.exists())

    try:
        # Node a alone first: it takes the submitted run (its row pinned to a), and runs it.
        procs["a"] = start_daemon(configs["a"], url, "a", logs["a"], options=("--lease", "3"))
        wait_until(lambda: any(n.name == "a" and n.state == "up" for n in store.nodes()), "a up")
        store.submit("long", host="a")
        wait_until(lambda: any(v[2] == "a" for v in spans(path).values()), "a's run started")
        [(mine, _)] = [(r, v) for r, v in spans(path).items() if v[2] == "a"]
        procs["b"] = start_daemon(configs["b"], url, "b", logs["b"], options=("--lease", "3"))

        def replaced() -> bool:
            record = store.run(mine)
            return record is not None and record.state is RunState.FAILED

        wait_until(replaced, f"a's run replaced\n{told()}")
        record = store.run(mine)
        assert record is not None and record.node == "a"
        reason = record.reason or ""
        assert reason.startswith("replaced"), reason
        # Its audit line says so too, on node a.
        wait_until(lambda: f"FAILED ({reason})" in logs["a"].read_text(), f"a's audit\n{told()}")

        # The replacing slot's run starts on b once a's run has ended (their own lines).
        def replacing() -> str | None:
            for r in store.history("long", limit=100):
                live = r.state in (RunState.RUNNING, RunState.FAILED)
                if r.node == "b" and live and r.run_id in spans(path):
                    return r.run_id
            return None

        wait_until(lambda: replacing() is not None, f"b's slot ran\n{told()}")
        runs = spans(path)
        new = replacing()
        assert new is not None
        _a_start, a_end, _ = runs[mine]
        b_start, _b_end, b_node = runs[new]
        assert b_node == "b"
        assert a_end is not None and a_end <= b_start, (runs[mine], runs[new])
        # An operator's kill keeps its wording, whichever node asks.
        store.request_kill(run_id=new)
        wait_until(lambda: (store.run(new) or record).state is RunState.FAILED, "the kill")
        killed = store.run(new)
        assert killed is not None and (killed.reason or "").startswith("killed"), killed
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        store.close()


def test_replace_across_two_nodes_on_one_sqlite_file(tmp_path: Path) -> None:
    replace_across_nodes(tmp_path, f"sqlite:///{tmp_path / 'state.db'}")


def test_replace_across_two_nodes_on_postgresql(tmp_path: Path, pg_server: PgServer) -> None:
    replace_across_nodes(tmp_path, pg_server.fresh_schema_url())


# -- queue across three nodes ------------------------------------------------------------------

QUEUED = """\
jobs:
  q:
    command: [sh, {script}, "2.5"]
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 1 second
    overlap: queue
"""

RUNS = 6  # runs ended before the nodes stop


def queue_across_nodes(tmp_path: Path, url: str, names: list[str]) -> None:
    script, path = job_script(tmp_path)
    nodes = Daemons(tmp_path, url, QUEUED.format(script=script), lease=LEASE)
    try:
        for name in names:
            nodes.start(name)
        nodes.wait_up(*names)
        since = datetime.now(UTC)

        def ended() -> int:
            return sum(
                1 for v in spans(path).values() if v[1] is not None and v[0] > since.timestamp()
            )

        nodes.wait_for(lambda: ended() >= RUNS, f"{RUNS} runs ended")
        stopped = datetime.now(UTC)
        for proc in nodes.procs.values():
            proc.terminate()
        for proc in nodes.procs.values():
            proc.wait(60)
        records = nodes.store.history("q", limit=10_000)
        runs = spans(path)
        logs = nodes.logs()

        # Never two runs at once, from the runs' own lines.
        own = sorted((start, end) for start, end, _ in runs.values())
        for (_s1, e1), (s2, _e2) in itertools.pairwise(own):
            assert e1 is not None and e1 <= s2, (own, logs)
        # Never two slots waiting at once: a slot's wait is from its slot to its claim (the
        # record's start; its process writes its own line a moment later): the next slot
        # waits only once the waiting one has claimed. A run claimed within 0.5 s of its
        # slot did not wait.
        waits = sorted(
            (r.slot.timestamp(), r.started.timestamp())
            for r in records
            if r.slot is not None
            and r.run_id in runs
            and r.started.timestamp() - r.slot.timestamp() > 0.5
        )
        assert waits, "no slot waited: the job never found itself busy"
        for (_w1, until1), (w2, _until2) in itertools.pairwise(waits):
            assert until1 <= w2 + 0.2, (waits, logs)
        # Every slot of the stretch recorded once: run, or skipped with the policy's reason.
        keys = Counter((r.slot, r.attempt) for r in records)
        assert [k for k, n in keys.items() if n > 1] == []
        assert [r for r in records if r.state in (RunState.RUNNING, RunState.ABANDONED)] == []
        skipped = [r for r in records if r.state is RunState.SKIPPED]
        assert skipped and {r.reason for r in skipped} == {SKIPPED}
        by_slot = {r.slot: r for r in records}
        slot = since.replace(microsecond=0) + timedelta(seconds=1)
        settled = stopped - timedelta(seconds=5)  # later slots may wait at the stop
        wrong = []
        while slot < settled:
            record = by_slot.get(slot)
            if record is None or record.state not in (RunState.SUCCEEDED, RunState.SKIPPED):
                wrong.append((slot, record))
            slot += timedelta(seconds=1)
        assert wrong == [], logs
        ran = [r for r in records if r.state is RunState.SUCCEEDED]
        assert len({r.node for r in ran} | {r.node for r in skipped}) >= 2  # shared out
    finally:
        nodes.close()


def test_queue_across_three_nodes_on_one_sqlite_file(tmp_path: Path) -> None:
    queue_across_nodes(tmp_path, f"sqlite:///{tmp_path / 'state.db'}", ["a", "b", "c"])


def test_queue_across_three_nodes_on_postgresql(tmp_path: Path, pg_server: PgServer) -> None:
    queue_across_nodes(tmp_path, pg_server.fresh_schema_url(), ["n1", "n2", "n3"])
