"""The cost of live output: 100 running jobs, each printing a line every 10 ms, with their
output written into the state store as they run (once a second each, when it changed) and
without (the same runs, the writes turned off).

A `Scheduler` on a SQLite state store starts `jobs` external jobs at once (each a Python
process printing a line every 10 ms for `seconds`), and is measured from their start to
their end: the scheduler process's CPU seconds (``getrusage``, the jobs' own processes not
counted), the store's statements and `set_output` writes per second. "without": the live
output's flush is replaced by one that writes nothing (its thread still wakes once a
second). Each case runs in a fresh process, alternating.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import resource
import tempfile
import time
from typing import Any

from bench import _common as common

NAME = "live_output"
PRINTER = (
    "import sys, time\n"
    "end = time.monotonic() + {seconds}\n"
    "n = 0\n"
    "while time.monotonic() < end:\n"
    "    n += 1\n"
    "    print(f'line {{n}}: processed a record', flush=True)\n"
    "    time.sleep(0.01)\n"
)


def cases(smoke: bool) -> list[common.Case]:
    jobs, seconds = (10, 2.0) if smoke else (100, 10.0)
    return [
        {"key": f"{mode}/{jobs}", "live": mode == "live", "jobs": jobs, "seconds": seconds}
        for mode in ("live", "without")
    ]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_case(case: common.Case) -> common.Measure:
    from jobscheduler import Job, Scheduler
    from jobscheduler.cluster.liveoutput import LiveOutput

    common.quiet_logs()
    if not case["live"]:
        LiveOutput.flush = lambda self: 0  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as directory:
        sched = Scheduler(state=f"sqlite:///{directory}/state.db", node="bench",
                          max_workers=case["jobs"] + 5)  # fmt: skip
        script = PRINTER.format(seconds=case["seconds"])
        sched.add_jobs(
            Job(f"printer-{i:03d}", command=[sys.executable, "-c", script], on_demand=True)
            for i in range(case["jobs"])
        )
        sched.start()
        store: Any = sched.state_store
        live: Any = sched._live  # the benchmark reads the count of writes it made
        statements, cpu, began = store.statements, _cpu(), time.perf_counter()
        for i in range(case["jobs"]):
            sched.run_now(f"printer-{i:03d}")
        sched.wait_idle(case["seconds"] * 10 + 60)
        took = time.perf_counter() - began
        cpu, statements = _cpu() - cpu, store.statements - statements
        writes = live.writes
        ended = [r for r in sched.history(limit=case["jobs"] * 2) if r.state == "succeeded"]
        sched.shutdown(wait=False)
    return {
        "cpu_s": cpu,
        "cpu_share": cpu / took,
        "statements_per_s": statements / took,
        "writes_per_s": writes / took,
        "succeeded": len(ended),
        "failed": case["jobs"] - len(ended),
        "wall_s": took,
    }


def main(argv: list[str] | None = None) -> int:
    run = common.parent(__file__, __doc__ or NAME, run_case, cases, argv, timeout=600)
    if run is None:
        return 0
    opts, all_cases, _, summary, started = run
    rows = []
    by_mode = {}
    for case in all_cases:
        s = summary[common.key_of(case)]
        by_mode[case["live"]] = s
        rows.append([
            "live output" if case["live"] else "without",
            str(case["jobs"]),
            common.span(s["cpu_s"], 2),
            common.span(s["cpu_share"], 3),
            common.span(s["writes_per_s"], 1),
            common.span(s["statements_per_s"], 1),
            common.span(s["wall_s"], 1),
        ])  # fmt: skip
    extra = common.ratio(by_mode[True]["cpu_s"].median, by_mode[False]["cpu_s"].median)
    jobs = all_cases[0]["jobs"]
    targets = [
        common.Target(
            "live output writes per run per second", by_mode[True]["writes_per_s"].median / jobs,
            "<=", 1.0, "",
        ),
        common.Target("CPU with live output / without", extra, "<=", 1.5, "x"),
    ]  # fmt: skip
    common.report(
        NAME,
        opts,
        "The cost of live output",
        ["case", "jobs", "CPU s", "CPU share", "set_output/s", "statements/s", "wall s"],
        rows,
        common.cases_payload(summary),
        targets,
        ["each job prints a line every 10 ms; CPU is the scheduler process's alone"],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
