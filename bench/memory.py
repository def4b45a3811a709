"""Where a job's bytes go: tracemalloc, per job, by the line that allocated them.

Not one of the timed benchmarks (`run_all.py` does not run it): the breakdown behind the RSS
figures of `adding.py`, and what they do not show. Three cases, each in this process:

- ``add_job``: N daily UTC jobs built and added one by one to a running in-memory
  `Scheduler`, as `adding.py` does (names and starts included, as there): the bytes per job
  by allocating line, largest first;
- ``waiting``: N daily jobs added to a `JobProcessor` on a `FakeClock` (names made
  beforehand), in UTC and in Europe/Berlin: the bytes per job while they wait;
- ``after one run``: the same jobs once each has run: what a job keeps for its next run.

    python bench/memory.py [--jobs N]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import gc
import logging
import tracemalloc
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import _systems as systems

START = datetime(2031, 1, 1, tzinfo=UTC)


def by_line(n: int, rows: int = 8) -> list[tuple[float, str]]:
    """add_job of n jobs: bytes per job by allocating line, largest first."""
    scheduler = systems.js_scheduler()
    scheduler.start()
    for i in range(100):  # first-use allocations (caches, the heap's first growth) left out
        scheduler.add_job(systems.js_future(f"warm{i}", START))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(n):
        scheduler.add_job(systems.js_future(f"j{i}", START + timedelta(seconds=i)))
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    scheduler.shutdown(wait=False)
    stats = after.compare_to(before, "lineno")
    total = sum(stat.size_diff for stat in stats) / n
    out = [(total, "total")]
    for stat in stats[:rows]:
        frame = stat.traceback[0]
        out.append((stat.size_diff / n, f"{Path(frame.filename).name}:{frame.lineno}"))
    return out


def waiting_and_run(n: int, zone: str) -> tuple[float, float]:
    """Bytes per job of n daily jobs in `zone` waiting in a JobProcessor, then after each
    has run once."""
    from jobscheduler import Interval, Job, JobType, Unit
    from jobscheduler.clock import FakeClock
    from jobscheduler.engine.processor import JobProcessor
    from jobscheduler.model.execution import Execution

    clock = FakeClock(START - timedelta(seconds=1))

    def execute(job: Job, ctx: Any) -> Execution:
        return Execution(job.name, ctx.run_id, ctx.slot, clock.now(), clock.now())

    processor = JobProcessor(execute, lambda job, execution: None, clock=clock, max_workers=1)
    names = [f"j{i}" for i in range(n)]
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    start = START if zone == "UTC" else datetime(2031, 1, 1, 1, 0)
    jobs = [
        Job(
            name,
            type=JobType.INTERNAL,
            command="bench._jobs:noop",
            start=start + timedelta(microseconds=i),  # each job its own start, as in adding.py
            interval=Interval(1, Unit.DAY),
            timezone=zone,
        )
        for i, name in enumerate(names)
    ]
    processor.add_jobs(jobs, START - timedelta(seconds=1))
    del jobs
    gc.collect()
    waiting = tracemalloc.get_traced_memory()[0]
    processor.run_due(START + timedelta(seconds=1))
    processor.drain()
    gc.collect()
    ran = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (waiting - base) / n, (ran - base) / n


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per case")
    n = parser.parse_args(argv).jobs
    logging.disable(logging.CRITICAL)
    print(f"add_job of {n:,} UTC jobs to a running Scheduler (bytes per job, by line):")
    for size, where in by_line(n):
        print(f"  {size:8.1f}  {where}")
    print(f"{n:,} daily jobs in a JobProcessor (bytes per job, names not counted):")
    for zone in ("UTC", "Europe/Berlin"):
        waiting, ran = waiting_and_run(n, zone)
        print(f"  {zone:14} waiting {waiting:6.0f}   after one run {ran:6.0f}")


if __name__ == "__main__":
    main()
