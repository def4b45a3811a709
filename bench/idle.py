"""Idle cost: wake-ups and CPU seconds over 20 s with 100,000 jobs in the future.

Each scheduler holds 100,000 daily jobs whose first slot is tomorrow, and is left alone for
20 s (after a 1 s settling pause). Counted over that window:
- wake-ups: jobscheduler's `Clock.wait` calls that returned (the clock is wrapped to count
  them: only the scheduler thread waits through the clock); APScheduler's ``_process_jobs``
  calls (its loop runs it after every wake-up);
- CPU seconds of the whole process (``getrusage``), and its context switches;
- the machine: a process whose one thread waits on a Condition for the same time.

The counts are the child's own, so the repetitions run a few at a time.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import resource
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import _common as common
from bench import _jobs
from bench import _systems as systems

NAME = "idle"


def cases(smoke: bool) -> list[common.Case]:
    n, window = (1_000, 1.0) if smoke else (100_000, 20.0)
    return [
        {"key": f"{system}/{n}", "system": system, "n": n, "window": window}
        for system in (systems.JOBSCHEDULER, systems.APSCHEDULER, systems.MACHINE)
    ]


def _clock() -> Any:
    """A SystemClock that counts the waits that returned (imported late: children only)."""
    from jobscheduler.clock import SystemClock

    class Counting(SystemClock):
        def __init__(self) -> None:
            self.calls = 0
            self.returned = 0

        def wait(self, condition: threading.Condition, timeout: float | None) -> bool:
            self.calls += 1
            try:
                return super().wait(condition, timeout)
            finally:
                self.returned += 1

    return Counting()


def _switches() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def run_case(case: common.Case) -> common.Measure:
    common.quiet_logs()
    n, window = case["n"], case["window"]
    tomorrow = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    scheduler: Any = None
    counted: list[int] = [0]
    clock: Any = None
    if case["system"] == systems.JOBSCHEDULER:
        clock = _clock()
        scheduler = systems.js_scheduler(clock=clock)
        scheduler.start()
        scheduler.add_jobs(
            [systems.js_future(f"j{i}", tomorrow + timedelta(seconds=i % 3600)) for i in range(n)]
        )

        def wakeups() -> int:
            return int(clock.returned)
    elif case["system"] == systems.APSCHEDULER:
        scheduler = systems.aps_scheduler()
        process = scheduler._process_jobs

        def counting_process() -> Any:
            counted[0] += 1
            return process()

        scheduler._process_jobs = counting_process
        for i in range(n):
            scheduler.add_job(
                _jobs.noop,
                "interval",
                days=1,
                id=f"j{i}",
                start_date=tomorrow + timedelta(seconds=i % 3600),
            )
        scheduler.start()

        def wakeups() -> int:
            return counted[0]
    else:
        cond = threading.Condition()

        def waiter() -> None:
            with cond:
                cond.wait()

        threading.Thread(target=waiter, daemon=True).start()

        def wakeups() -> int:
            return 0

    time.sleep(1.0)  # settle: the adds' own wake-ups are not idle ones
    w0, c0, s0 = wakeups(), common.cpu_seconds(), _switches()
    time.sleep(window)
    w1, c1, s1 = wakeups(), common.cpu_seconds(), _switches()
    rss = common.rss_bytes()
    if case["system"] == systems.JOBSCHEDULER:
        scheduler.shutdown(wait=True)
    elif case["system"] == systems.APSCHEDULER:
        scheduler.shutdown(wait=False)
    return {
        "wakeups": w1 - w0,
        "cpu_s": c1 - c0,
        "cpu_ms_per_s": (c1 - c0) / window * 1000,
        "context_switches": s1 - s0 - 1,  # the main thread's own sleep is one
        "rss_mb": rss / 2**20,
    }


def main(argv: list[str] | None = None) -> int:
    opts = common.options(__doc__ or NAME, argv)
    if opts.child is not None:
        common.child_main(run_case, opts.child)
        return 0
    started = time.perf_counter()
    all_cases = cases(opts.smoke)
    measures = common.repeat_parallel(
        __file__,
        all_cases,
        opts.reps,
        quiet=opts.quiet,
        timeout=300,
        width=3 if opts.smoke else 4,
    )
    summary = common.summary(measures)
    n, window = all_cases[0]["n"], all_cases[0]["window"]
    labels = {
        systems.JOBSCHEDULER: "jobscheduler",
        systems.APSCHEDULER: "apscheduler",
        systems.MACHINE: "machine: one waiting thread",
    }
    rows = []
    for case in all_cases:
        s = summary[common.key_of(case)]
        rows.append(
            [
                f"{labels[case['system']]}"
                + ("" if case["system"] == systems.MACHINE else f", {n:,} jobs"),
                common.span(s["wakeups"], 0),
                common.span(s["cpu_s"], 4),
                common.span(s["context_switches"], 0),
                common.span(s["rss_mb"], 0),
            ]
        )
    ours = summary[f"{systems.JOBSCHEDULER}/{n}"]
    targets = [
        common.Target(
            f"idle with {n:,} future jobs: wake-ups in {window:g} s",
            ours["wakeups"].median,
            "<=",
            0,
            "wake-ups",
        ),
    ]
    common.report(
        NAME,
        opts,
        f"Idle cost over {window:g} s with {n:,} future jobs",
        ["case", "wake-ups", "CPU s", "context switches", "RSS MiB"],
        rows,
        common.cases_payload(summary),
        targets,
        ["repetitions ran up to 4 at a time: every figure is the child's own count"],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
