"""How long a pause (and a resume) takes to reach every node of a cluster.

    PYTHONPATH=. .venv/bin/python bench/pause_reach.py [--tries 50] [--engines sqlite,postgres]

Two ``jobscheduler run`` daemons on one store (a SQLite file in a temporary directory; a
throwaway PostgreSQL server, tests/pg_server.py, fsync on), one config with one job. This
process writes a pause of that job into the store (as ``jobscheduler pause`` does: one
transaction), then a resume, `--tries` times each. A node *has* a change when it has handed
the job to its engine anew: the INFO line "node N follows the pauses: …" in its log file,
whose timestamp (milliseconds, the same machine's clock) is compared with the instant just
before the write. A try's reach is the later of the two nodes; each write comes at a random
moment (0–1 s after the last change arrived). Printed per engine: p50, p99 and the maximum
of the pauses' reach, and of the resumes'.

SQLite nodes poll one integer (``pause_version``) every second; PostgreSQL nodes are told by
``NOTIFY`` on the connection that already listens for the queue (docs/state.md). Targets:
p99 at most 2 s on SQLite, 1 s on PostgreSQL. Not part of ``bench/run_all.py``.
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from jobscheduler.state import StateStore, open_store

CONFIG = """\
jobs:
  tick:
    command: ["true"]
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 1 hour
"""
NODES = ("a", "b")
LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO .*follows the pauses: (\d+) job\(s\) paused"
)


def followed(log: Path) -> list[tuple[float, bool]]:
    """(when, a pause) of every "follows the pauses" line of `log`; when as a timestamp."""
    out = []
    for line in log.read_text().splitlines():
        match = LINE.match(line)
        if match:
            when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            out.append((when, match.group(2) != "0"))
    return out


@contextmanager
def daemons(directory: Path, url: str) -> Iterator[list[Path]]:
    config = directory / "jobs.yaml"
    config.write_text(CONFIG)
    logs = [directory / f"{name}.log" for name in NODES]
    procs = [
        subprocess.Popen(
            [
                *(sys.executable, "-m", "jobscheduler", "run", str(config)),
                *("--state", url, "--node", name, "--log-file", str(log)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name, log in zip(NODES, logs, strict=True)
    ]
    try:
        yield logs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)


def wait_up(store: StateStore) -> None:
    deadline = time.monotonic() + 60
    while {n.name for n in store.nodes() if n.state == "up"} != set(NODES):
        if time.monotonic() > deadline:
            raise SystemExit("the daemons did not come up")
        time.sleep(0.1)
    time.sleep(1.0)  # their followers started (they start with the node)


def reach(store: StateStore, logs: list[Path], pause: bool, seen: list[int]) -> float:
    """Write one change, at a random moment of the nodes' poll (a write right after the last
    change arrived would always come just after a SQLite node's poll: its worst case); the
    seconds until both nodes' logs show it. `seen`: lines per log so far."""
    time.sleep(random.uniform(0, 1.0))
    started = time.time()
    if pause:
        store.pause(["tick"], node="bench", paused_at=datetime.now(UTC), note="bench")
    else:
        store.resume(["tick"])
    deadline = time.monotonic() + 30
    whens: list[float] = []
    for n, log in enumerate(logs):
        while True:
            lines = followed(log)
            if len(lines) > seen[n]:
                when, was_pause = lines[seen[n]]
                assert was_pause == pause, (log, lines[seen[n]])
                seen[n] += 1
                whens.append(when)
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"{log.name}: the change did not arrive in 30 s")
            time.sleep(0.01)
    return max(whens) - started


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def run(engine: str, url: str, directory: Path, tries: int) -> None:
    store = open_store(url)[0]
    try:
        with daemons(directory, url) as logs:
            wait_up(store)
            seen = [len(followed(log)) for log in logs]
            pauses, resumes = [], []
            for _ in range(tries):
                pauses.append(reach(store, logs, True, seen))
                resumes.append(reach(store, logs, False, seen))
    finally:
        store.close()
    for what, values in (("pause", pauses), ("resume", resumes)):
        print(
            f"{engine:9} {what:6} reach over {len(values)} tries: "
            f"p50 {percentile(values, 50) * 1000:6.0f} ms  "
            f"p99 {percentile(values, 99) * 1000:6.0f} ms  max {max(values) * 1000:6.0f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=50)
    parser.add_argument("--engines", default="sqlite,postgres")
    args = parser.parse_args()
    for engine in args.engines.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            if engine == "sqlite":
                run(engine, f"sqlite:///{directory / 'state.db'}", directory, args.tries)
                continue
            import pg_server

            server = pg_server.start(fsync=True)
            try:
                run(engine, server.fresh_schema_url(), directory, args.tries)
            finally:
                server.stop()


if __name__ == "__main__":
    main()
