"""Slow burst: 1,000 jobs of 20 ms each due at one instant, 10 workers.

How many ran, how many were dropped, and the time from the instant until the last run ended
("drain"), against the ideal 1,000 x 20 ms / 10 = 2 s and a bare ThreadPoolExecutor(10)
doing the same 1,000 sleeps. APScheduler drops the runs still queued after its 1 s
``misfire_grace_time`` (counted from its EVENT_JOB_MISSED events).

jobscheduler's jobs get priorities 0-3 (job i: i % 4): the runs must start in priority, then
due (definition) order. "Out of order" counts the runs that started more than 5 ms before
a run that should have gone first (5 ms leaves room for a thread that claimed its run and
was preempted before it noted the time).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bisect
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from bench import _common as common
from bench import _jobs
from bench import _systems as systems

NAME = "slow_burst"
WORKERS = 10
TOLERANCE = 0.005


def cases(smoke: bool) -> list[common.Case]:
    n, duration = (40, 0.02) if smoke else (1_000, 0.02)
    return [
        {"key": f"{system}/{n}", "system": system, "n": n, "duration": duration}
        for system in (systems.JOBSCHEDULER, systems.APSCHEDULER, systems.MACHINE)
    ]


def priority(i: int) -> int:
    return i % 4


def run_case(case: common.Case) -> common.Measure:
    common.quiet_logs()
    n, duration = case["n"], case["duration"]
    lead = 0.5 + n * 0.0003
    _jobs.expect(n)
    missed = 0
    ordered = case["system"] == systems.JOBSCHEDULER
    if case["system"] == systems.JOBSCHEDULER:
        # Made and started before the slot is chosen: its first use imports the library.
        scheduler = systems.js_scheduler(max_workers=WORKERS)
        scheduler.start()
        slot_us = int((time.time() + lead) * 1e6)
        slot = slot_us / 1e6
        scheduler.add_jobs(
            [
                systems.js_one_off(
                    f"j{i}",
                    slot_us,
                    function="record_sleep",
                    args={"key": i, "seconds": duration},
                    priority=priority(i),
                )
                for i in range(n)
            ]
        )
        _jobs.DONE.wait(lead + n * duration + 60)
        scheduler.wait_idle(60)
        scheduler.shutdown(wait=True)
    elif case["system"] == systems.APSCHEDULER:
        scheduler = systems.aps_scheduler()
        counter = systems.ApsCounter(scheduler, n)
        scheduler.start()
        slot_us = int((time.time() + lead) * 1e6)
        slot = slot_us / 1e6
        for i in range(n):
            systems.aps_add_one_off(scheduler, _jobs.record_sleep, slot_us, i, duration)
        counter.settled.wait(lead + n * duration + 60)
        missed = counter.missed
        scheduler.shutdown(wait=False)
    else:
        slot = time.time() + lead
        pool = ThreadPoolExecutor(WORKERS)
        for _ in range(WORKERS):
            pool.submit(time.sleep, 0.001)
        cond = threading.Condition()
        with cond:
            cond.wait(max(0.0, slot - time.time()))
        for i in range(n):
            pool.submit(_jobs.record_sleep, i, duration)
        pool.shutdown(wait=True)
    starts = list(_jobs.STARTS)
    ends = [t for _, t in list(_jobs.ENDS)]
    drain = (max(ends) - slot) if ends else float("nan")
    ideal = n * duration / WORKERS
    return {
        "ran": len(starts),
        "dropped": missed if case["system"] == systems.APSCHEDULER else n - len(ends),
        "drain_s": drain,
        "drain_vs_ideal": drain / ideal,
        "out_of_order": out_of_order(starts) if ordered else float("nan"),
        "first_start_ms": (min(t for _, t in starts) - slot) * 1000 if starts else float("nan"),
    }


def out_of_order(starts: list[tuple[int, float]]) -> int:
    """Runs that started more than TOLERANCE before a run that should have gone first."""
    by_time = sorted(starts, key=lambda s: s[1])
    times = [t for _, t in by_time]
    ranks = [(-priority(k), k) for k, _ in by_time]
    # best[i]: the first-in-order rank among the runs started at index i or later
    best: list[tuple[int, int] | None] = [None] * (len(by_time) + 1)
    for i in range(len(by_time) - 1, -1, -1):
        nxt = best[i + 1]
        best[i] = ranks[i] if nxt is None or ranks[i] < nxt else nxt
    count = 0
    for i, t in enumerate(times):
        j = bisect.bisect_right(times, t + TOLERANCE)
        later = best[j]
        if later is not None and later < ranks[i]:
            count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parent = common.parent(__file__, __doc__ or NAME, run_case, cases, argv, timeout=180)
    if parent is None:
        return 0
    opts, all_cases, _measures, summary, started = parent
    n = all_cases[0]["n"]
    ideal = n * all_cases[0]["duration"] / WORKERS
    ours = summary[f"{systems.JOBSCHEDULER}/{n}"]
    pool = summary[f"{systems.MACHINE}/{n}"]
    labels = {
        systems.JOBSCHEDULER: "jobscheduler",
        systems.APSCHEDULER: "apscheduler",
        systems.MACHINE: "bare ThreadPoolExecutor(10)",
    }
    rows = []
    for case in all_cases:
        s = summary[common.key_of(case)]
        rows.append(
            [
                labels[case["system"]],
                common.span(s["ran"], 0),
                common.span(s["dropped"], 0),
                common.span(s["drain_s"], 3),
                common.times(s["drain_vs_ideal"].median),
                common.times(common.ratio(s["drain_s"].median, pool["drain_s"].median)),
                common.span(s["out_of_order"], 0),
            ]
        )
    targets = [
        common.Target("slow burst: runs dropped", ours["dropped"].median, "<=", 0, "runs"),
        common.Target(
            "slow burst: runs out of priority/due order",
            ours["out_of_order"].median,
            "<=",
            0,
            "runs",
        ),
        common.Target(
            "slow burst: drain vs a bare pool",
            common.ratio(ours["drain_s"].median, pool["drain_s"].median),
            "<=",
            1.05,
            "x",
            "every run starts as soon as a worker frees up",
        ),
    ]
    common.report(
        NAME,
        opts,
        f"Slow burst: {n:,} x 20 ms at once, 10 workers (ideal drain {ideal:.2f} s)",
        ["case", "ran", "dropped", "drain s", "vs ideal", "vs pool", "out of order"],
        rows,
        {"cases": {k: {"metrics": v} for k, v in summary.items()}, "ideal_drain_s": ideal},
        targets,
        [],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
