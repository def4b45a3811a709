"""Async jobs: 1,000 runs that each wait 1 s, started at one instant.

For each case, the time from the instant until every run has ended, runs per second (runs /
that time) and the peak number of threads of the process (sampled every 5 ms; the sampler
itself not counted):

- jobscheduler, ``async def`` jobs (``await asyncio.sleep(1)``) on the scheduler's event
  loop, with the default pool (``max_workers=10``);
- jobscheduler, plain functions (``time.sleep(1)``) on the same default pool: 10 at a time,
  so this case runs 100 jobs (its runs per second do not depend on the count), enough to
  keep every worker of the pool busy;
- jobscheduler, the same plain functions with ``max_workers=1000``: the threads that take;
- APScheduler 4.0.0a6's ``AsyncScheduler`` (memory data store, local event broker), the
  same coroutine added with ``add_job`` at once, with its default ``max_concurrent_jobs``
  (100) and with ``max_concurrent_jobs=1000``; it runs in ``bench/.venv-aps4`` (made by
  bench/cluster.py's helper, ``aps4_python``), as a subprocess (bench/_aps4_async.py).

``python bench/async_jobs.py`` (about 2 minutes; ``--reps N``, default 3); ``--smoke``: 50
jobs, one repetition, APScheduler 4 only if its environment is there already.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncio
import json
import subprocess
import threading
import time
from datetime import UTC, datetime

from bench import _common as common
from bench.cluster import aps4_python

NAME = "async_jobs"
BENCH = Path(__file__).resolve().parent
JS_ASYNC, JS_SYNC, JS_THREADS = "jobscheduler/async", "jobscheduler/sync", "jobscheduler/threads"
APS, APS_WIDE = "apscheduler4", "apscheduler4/1000"
WAIT_S = 1.0
ENDS: list[float] = []


class ThreadPeak:
    """The most threads this process had at once (sampled), the sampler excepted."""

    def __init__(self) -> None:
        self.peak = threading.active_count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, threading.active_count() - 1)

    def close(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


async def wait_async() -> None:
    await asyncio.sleep(WAIT_S)
    ENDS.append(time.time())


def wait_sync() -> None:
    time.sleep(WAIT_S)
    ENDS.append(time.time())


def cases(smoke: bool) -> list[common.Case]:
    n = 50 if smoke else 1000
    out: list[common.Case] = [
        {"key": JS_ASYNC, "system": JS_ASYNC, "n": n, "workers": 10},
        {"key": JS_SYNC, "system": JS_SYNC, "n": max(n // 10, 20), "workers": 10},
        {"key": JS_THREADS, "system": JS_SYNC, "n": n, "workers": n},
    ]
    aps, _note = aps4_python("auto" if smoke else "require")
    if aps is not None:
        out.append({"key": APS, "system": APS, "n": n, "python": aps, "concurrency": None})
        out.append({"key": APS_WIDE, "system": APS, "n": n, "python": aps, "concurrency": n})
    return out


def run_case(case: common.Case) -> common.Measure:
    common.quiet_logs()
    if case["system"] == APS:
        return _aps4(case)
    from jobscheduler import Job, JobType
    from jobscheduler.scheduler import Scheduler

    n = case["n"]
    function = wait_async if case["system"] == JS_ASYNC else wait_sync
    scheduler = Scheduler(max_workers=case["workers"])
    scheduler.start()
    slot = time.time() + 0.5 + n * 0.0005
    when = datetime.fromtimestamp(slot, UTC)
    jobs = [Job(f"j{i}", type=JobType.INTERNAL, command=function, start=when) for i in range(n)]
    scheduler.add_jobs(jobs)
    setup_ok = time.time() < slot - 0.05
    peak = ThreadPeak()
    deadline = time.monotonic() + slot - time.time() + 300
    while len(ENDS) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    scheduler.wait_idle(60)
    threads = peak.close()
    ended = max(ENDS) if ENDS else float("nan")
    failed = len([r for r in scheduler.history(limit=n) if r.state.value != "succeeded"])
    scheduler.shutdown(wait=True)
    wall = ended - slot
    return {
        "ran": len(ENDS),
        "failed": failed,
        "wall_s": wall,
        "runs_per_s": len(ENDS) / wall if wall > 0 else float("nan"),
        "peak_threads": threads,
        "setup_ok": setup_ok,
    }


def _aps4(case: common.Case) -> common.Measure:
    argv = [case["python"], str(BENCH / "_aps4_async.py"), str(case["n"]), str(WAIT_S)]
    if case["concurrency"] is not None:
        argv.append(str(case["concurrency"]))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True)
    measure: common.Measure = json.loads(done.stdout.strip().splitlines()[-1])
    return measure


def main(argv: list[str] | None = None) -> int:
    if argv is None and "--reps" not in sys.argv and "--smoke" not in sys.argv:
        argv = [*sys.argv[1:], "--reps", "3"]
    parent = common.parent(__file__, __doc__ or NAME, run_case, cases, argv, timeout=900)
    if parent is None:
        return 0
    opts, all_cases, _measures, summary, started = parent
    ours = summary[JS_ASYNC]
    labels = {
        JS_ASYNC: "jobscheduler, async def, max_workers=10",
        JS_SYNC: "jobscheduler, time.sleep, max_workers=10",
        JS_THREADS: "jobscheduler, time.sleep, max_workers=n",
        APS: "APScheduler 4 AsyncScheduler (defaults)",
        APS_WIDE: "APScheduler 4, max_concurrent_jobs=n",
    }
    rows = []
    for case in all_cases:
        s = summary[common.key_of(case)]
        ratio = common.ratio(ours["runs_per_s"].median, s["runs_per_s"].median)
        rows.append(
            [
                f"{labels[common.key_of(case)]}: {case['n']:,} jobs",
                common.span(s["wall_s"], 3),
                common.span(s["runs_per_s"], 0),
                common.span(s["peak_threads"], 0),
                common.num(s["failed"].high, 0),
                "—" if common.key_of(case) == JS_ASYNC else common.times(ratio),
            ]
        )
    n = all_cases[0]["n"]
    sync_threads = summary[JS_SYNC]["peak_threads"].median
    targets = [
        common.Target(
            f"{n:,} async jobs of {WAIT_S:g} s: all ended within", ours["wall_s"].median, "<=",
            1.5, "s",
        ),
        common.Target(  # the default pool's threads, and the event loop's one more
            "async jobs: peak threads beyond the default pool's sync case",
            ours["peak_threads"].median - sync_threads, "<=", 1, "threads",
        ),
    ]  # fmt: skip
    comparisons: dict[str, float] = {}
    if APS in summary:
        vs_aps = common.ratio(ours["runs_per_s"].median, summary[APS]["runs_per_s"].median)
        vs_wide = common.ratio(ours["runs_per_s"].median, summary[APS_WIDE]["runs_per_s"].median)
        comparisons = {"vs_aps4": vs_aps, "vs_aps4_wide": vs_wide}
        targets.append(
            common.Target("async jobs: runs per second vs APScheduler 4", vs_aps, ">=", 5, "x")
        )
    common.report(
        NAME,
        opts,
        "Async jobs (median (min–max) over fresh processes)",
        ["case", "all ended s", "runs/s", "peak threads", "failed", "async vs this"],
        rows,
        {"cases": {k: {"metrics": v} for k, v in summary.items()}, "comparisons": comparisons},
        targets,
        [],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
