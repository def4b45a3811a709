"""The runner's part of a run, in one thread: process CPU from `DetachedRuns.execute` (what a
worker calls once the run is claimed) to the returned `Execution`, for a plain synchronous
internal function, held by a job defined in code and named ``"module:name"``.

``python bench/runner_start.py [--root PATH] [--runs N] [--reps R]``: a real
``Scheduler(None)`` on a `FakeClock`, its processor's `DetachedRuns` (so the scheduler's
wrappers, live output and ``warn_after``, are on the way as in a burst), `R` batches of `N`
runs each, every run with a context of its own made before the clock starts. Prints the
least and the median CPU a run over the batches (the least is the machine's quiet figure:
on a shared machine a process's CPU a run varies by 1.5x with what runs beside it). Reaches
into the scheduler's private parts, as a worker does: `--root` runs it against another
checkout of the package (its `Run`, `RunContext` and `DetachedRuns` are the same there).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def plain(key: int) -> None:
    """The job: a plain function with one argument."""


def measure(runs: int, reps: int) -> dict[str, tuple[float, float]]:
    from jobscheduler import Interval, Job, JobType, Unit
    from jobscheduler.clock import FakeClock
    from jobscheduler.engine.ready import Run
    from jobscheduler.runners.context import RunContext
    from jobscheduler.scheduler import Scheduler

    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    scheduler = Scheduler(None, clock=FakeClock(t0), max_workers=1)
    detached = scheduler._processor._pool.detached
    day = Interval(1, Unit.DAY)
    commands: dict[str, Any] = {"code": plain, "module:name": f"{__name__}:plain"}
    results = {}
    for label, command in commands.items():
        job = Job(label, type=JobType.INTERNAL, command=command, args={"key": 1}, start=t0,
                  interval=day, timezone="UTC")  # fmt: skip
        costs = []
        for rep in range(reps):
            batch = []
            for i in range(runs):
                run = Run(job, None, t0, t0, "schedule")  # type: ignore[arg-type]
                run.run_id = f"{label}-{rep}-{i}"
                batch.append((run, RunContext(job, run.run_id, t0, created=t0, node="bench")))
            gc.disable()
            start = time.process_time()
            for run, ctx in batch:
                execution = detached.execute(run, ctx)
            costs.append((time.process_time() - start) / runs * 1e6)
            gc.enable()
            assert execution is not None and execution.event is not None
            assert execution.event.name == "SUCCESSFUL", execution
        results[label] = (min(costs), statistics.median(costs))
    scheduler.shutdown()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="a checkout (default this one)")
    parser.add_argument("--runs", type=int, default=1000, help="runs a batch")
    parser.add_argument("--reps", type=int, default=20, help="batches")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.root.resolve()))
    results = measure(args.runs, args.reps)
    print(f"jobscheduler from {Path(sys.modules['jobscheduler'].__file__ or '?').parent}")
    for label, (least, median) in results.items():
        print(f"{label}: {least:.2f} us a run (least), {median:.2f} (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
