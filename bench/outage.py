"""What a PostgreSQL outage leaves in a daemon's log and in its history.

    .venv/bin/python bench/outage.py [--seconds 20] [--lease 15] [--jobs 1]

A real ``jobscheduler run`` daemon on a throwaway PostgreSQL server (tests/pg_server.py) runs
`--jobs` jobs every second; the server is stopped with ``pg_ctl stop -m immediate`` for `--seconds`,
then started again. Printed: the daemon's log lines (all, warnings and errors, traceback
lines) from the stop until 10 s after the server is back, and the slots of the stretch that
have no run record (neither run nor covered by a ``missed`` range).

Not part of ``bench/run_all.py`` (it takes about a minute of wall time, mostly waiting).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import pg_server
from daemons import start_daemon

from jobscheduler.state import RunState, open_store

JOB = """\
  tick{n}:
    command: [sleep, "0.2"]
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 1 second
"""


def uncovered(url: str, jobs: int, since: datetime, until: datetime) -> tuple[int, int, int]:
    """Slots in [since, until) with no record, over all jobs: (slots, recorded, uncovered)."""
    total = recorded = 0
    for n in range(jobs):
        slots, done, _ = _uncovered(url, f"tick{n}", since, until)
        total, recorded = total + slots, recorded + done
    return total, recorded, total - recorded


def _uncovered(url: str, job: str, since: datetime, until: datetime) -> tuple[int, int, int]:
    store = open_store(url)[0]
    try:
        runs = store.history(job, limit=100_000)
    finally:
        store.close()
    covered: set[datetime] = set()
    for run in runs:
        if run.slot is None:
            continue
        if run.state is RunState.MISSED and run.last_slot is not None:
            slot = run.slot
            while slot <= run.last_slot:
                covered.add(slot)
                slot += timedelta(seconds=1)
        else:
            covered.add(run.slot)
    slot = since.replace(microsecond=0) + timedelta(seconds=1)
    total = missing = 0
    while slot < until:
        total += 1
        missing += slot not in covered
        slot += timedelta(seconds=1)
    return total, total - missing, missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--lease", type=float, default=15.0)
    parser.add_argument("--jobs", type=int, default=1)
    opts = parser.parse_args()
    server = pg_server.start()
    directory = Path(tempfile.mkdtemp(prefix="jobscheduler-outage-"))
    config = directory / "jobs.yaml"
    config.write_text("jobs:\n" + "".join(JOB.format(n=n) for n in range(opts.jobs)))
    log = directory / "daemon.log"
    url = server.url()
    daemon = start_daemon(config, url, "n1", log, options=("--lease", str(opts.lease)))
    try:
        time.sleep(8)
        before = log.read_text().count("\n")
        since = datetime.now(UTC)
        server.halt()
        time.sleep(opts.seconds)
        server.resume()
        time.sleep(10)
        daemon.terminate()
        daemon.wait(60)
        until = datetime.now(UTC) - timedelta(seconds=12)
        lines = log.read_text().splitlines()[before:]
        warnings = [line for line in lines if " WARNING " in line or " ERROR " in line]
        tracebacks = sum(line.startswith("Traceback") for line in lines)
        slots, recorded, missing = uncovered(url, opts.jobs, since, until)
        print(f"outage {opts.seconds:g}s, lease {opts.lease:g}s, {opts.jobs} jobs every second")
        print(f"log lines: {len(lines)} ({log.stat().st_size} bytes in all)")
        print(f"warning/error lines: {len(warnings)}; tracebacks: {tracebacks}")
        for line in warnings[:12]:
            print("  ", line[:200])
        print(f"slots {slots}: recorded {recorded}, without a record {missing}")
    finally:
        if daemon.poll() is None:
            daemon.kill()
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
