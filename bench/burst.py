"""Burst throughput: 10,000 trivial jobs due at one instant.

For each scheduler: the time from the instant until every job function has started, and
until the scheduler has finished with every run (jobscheduler: ``wait_idle`` returns;
APScheduler: its EVENT_JOB_EXECUTED listener has seen every run); runs per second = jobs /
time to all ended. The ceiling from the same run: a bare ``ThreadPoolExecutor(10).submit``
loop of the same 10,000 calls, started at the same kind of instant.

The slot is ``0.5 + n * 0.0002`` seconds after the scheduler is made (2.5 s for 10,000): the
jobs must be added by then. On a heavily loaded machine that is too short (every run is
missed), so ``BENCH_BURST_LEAD`` (seconds, in the environment) sets it instead. For
jobscheduler the process's CPU time from 50 ms before the slot until ``wait_idle`` returns,
per run, is reported too (``cpu_us_per_run``: what a run costs the process, whatever else
the machine runs).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import os
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench import _common as common
from bench import _jobs
from bench import _systems as systems

NAME = "burst"


def cases(smoke: bool) -> list[common.Case]:
    n = 200 if smoke else 10_000
    return [
        {"key": f"{system}/{n}", "system": system, "n": n}
        for system in (systems.JOBSCHEDULER, systems.APSCHEDULER, systems.MACHINE)
    ]


def run_case(case: common.Case) -> common.Measure:
    common.quiet_logs()
    n = case["n"]
    lead = float(os.environ.get("BENCH_BURST_LEAD") or 0.5 + n * 0.0002)
    _jobs.expect(n)
    missed = 0
    cpu_us = float("nan")
    if case["system"] == systems.JOBSCHEDULER:
        # Made and started before the slot is chosen: the first use imports the library.
        scheduler = systems.js_scheduler()
        scheduler.start()
        slot_us = int((time.time() + lead) * 1e6)
        slot = slot_us / 1e6
        scheduler.add_jobs(
            [systems.js_one_off(f"j{i}", slot_us, args={"key": i}) for i in range(n)]
        )
        setup_ok = time.time() < slot - 0.05
        time.sleep(max(0.0, slot - 0.05 - time.time()))
        before = _cpu_seconds()
        _jobs.DONE.wait(lead + 60)
        scheduler.wait_idle(60)
        ended = time.time()
        cpu_us = (_cpu_seconds() - before) / n * 1e6
        scheduler.shutdown(wait=True)
    elif case["system"] == systems.APSCHEDULER:
        scheduler = systems.aps_scheduler()
        counter = systems.ApsCounter(scheduler, n)
        scheduler.start()
        slot_us = int((time.time() + lead) * 1e6)
        slot = slot_us / 1e6
        for i in range(n):
            systems.aps_add_one_off(scheduler, _jobs.record, slot_us, i)
        setup_ok = time.time() < slot - 0.05
        counter.settled.wait(lead + 60)
        ended = time.time()
        missed = counter.missed
        scheduler.shutdown(wait=False)
    else:
        slot_us = int((time.time() + lead) * 1e6)
        slot = slot_us / 1e6
        pool = ThreadPoolExecutor(10)
        for _ in range(10):  # warm: every thread started, as a running scheduler's would be
            pool.submit(time.sleep, 0.001)
        setup_ok = True
        cond = threading.Condition()
        with cond:
            cond.wait(max(0.0, slot - time.time()))
        futures: list[Any] = [pool.submit(_jobs.record, i) for i in range(n)]
        for future in futures:
            future.result()
        ended = time.time()
        pool.shutdown(wait=True)
    starts = [t for _, t in list(_jobs.STARTS)]
    ran = len(starts)
    all_started = (max(starts) - slot) if starts else float("nan")
    all_ended = ended - slot
    return {
        "ran": ran,
        "missed": missed,
        "first_start_ms": (min(starts) - slot) * 1000 if starts else float("nan"),
        "all_started_s": all_started,
        "all_ended_s": all_ended,
        "runs_per_s": ran / all_ended if all_ended > 0 else float("nan"),
        "setup_ok": setup_ok,
        "cpu_us_per_run": cpu_us,
    }


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parent = common.parent(__file__, __doc__ or NAME, run_case, cases, argv, timeout=180)
    if parent is None:
        return 0
    opts, all_cases, _measures, summary, started = parent
    n = all_cases[0]["n"]
    ours = summary[f"{systems.JOBSCHEDULER}/{n}"]
    aps = summary[f"{systems.APSCHEDULER}/{n}"]
    pool = summary[f"{systems.MACHINE}/{n}"]
    vs_aps = common.ratio(ours["runs_per_s"].median, aps["runs_per_s"].median)
    vs_pool = common.ratio(ours["runs_per_s"].median, pool["runs_per_s"].median)
    aps_vs_pool = common.ratio(aps["runs_per_s"].median, pool["runs_per_s"].median)
    rows = []
    labels = {
        systems.JOBSCHEDULER: (
            "jobscheduler",
            f"{common.times(vs_aps)} APS, {common.times(vs_pool)} pool",
        ),
        systems.APSCHEDULER: ("apscheduler", f"{common.times(aps_vs_pool)} pool"),
        systems.MACHINE: ("bare ThreadPoolExecutor(10)", "ceiling"),
    }
    for case in all_cases:
        s = summary[common.key_of(case)]
        label, ratio = labels[case["system"]]
        rows.append(
            [
                f"{label}: {n:,} at once",
                common.span(s["first_start_ms"], 2),
                common.span(s["all_started_s"], 3),
                common.span(s["all_ended_s"], 3),
                common.span(s["runs_per_s"], 0),
                common.span(s["cpu_us_per_run"], 0),
                common.num(s["missed"].high, 0),
                ratio,
            ]
        )
    targets = [
        common.Target(
            f"burst of {n:,}: runs per second", ours["runs_per_s"].median, ">=", 40_000, "runs/s"
        ),
        common.Target("burst: runs per second vs APScheduler", vs_aps, ">=", 1.8, "x"),
        common.Target("burst: runs per second vs a bare pool", vs_pool, ">=", 0.7, "x"),
    ]
    common.report(
        NAME,
        opts,
        "Burst throughput (median (min–max) over fresh processes)",
        [
            "case",
            "first start ms",
            "all started s",
            "all ended s",
            "runs/s",
            "CPU µs/run",
            "missed",
            "ratio",
        ],
        rows,
        {
            "cases": {k: {"metrics": v} for k, v in summary.items()},
            "comparisons": {"vs_aps": vs_aps, "vs_pool": vs_pool, "aps_vs_pool": aps_vs_pool},
        },
        targets,
        [],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
