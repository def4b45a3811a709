"""``add_job`` into a file of alerting jobs: what the alerts of the other jobs cost a write.

A YAML file of N daily jobs (first slot far ahead: nothing runs) with an ``email:`` section,
written beforehand, in two versions: every job with an alert
(``messages: {failed: {recipients: [...], template_file: alert.txt}}``), or none. A running
``Scheduler(path)`` then adds ADDS plain jobs one at a time with ``add_job``; the figure is the
median time of one ``add_job`` (each is a locked, checked, atomic write of the file). The two
should cost about the same: a write rebuilds the alerts of the jobs it changed, not of every
job (target: the alerting file within 2x of the plain one). ``Scheduler(path)`` itself (read,
templates compiled, alerts built) is timed too.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import _common as common
from bench import _systems as systems

NAME = "alerting"
START = datetime(2031, 1, 1, tzinfo=UTC)
TEMPLATE = "The job {{ JobName }} is {{ JobStatus }} (exit code {{ execution.exit_code }}).\n"


def cases(smoke: bool) -> list[common.Case]:
    n = 50 if smoke else 1_000
    adds = 5 if smoke else 30
    return [
        {
            "key": f"jobscheduler/add_job/{kind}/{n}",
            "alerts": kind == "alerting",
            "n": n,
            "adds": adds,
        }
        for kind in ("alerting", "plain")
    ]


def job_yaml(i: int, alerts: bool) -> str:
    text = (
        f"  j{i}:\n"
        f"    type: internal\n"
        f"    command: bench._jobs:noop\n"
        f"    start: {(START + timedelta(seconds=i)).strftime('%Y-%m-%d %H:%M:%S')}\n"
        f"    interval: 1 day\n"
        f"    timezone: UTC\n"
    )
    if alerts:
        text += (
            "    messages:\n"
            "      failed: {recipients: [ops@example.com], template_file: alert.txt}\n"
        )
    return text


def write_file(path: Path, n: int, alerts: bool) -> None:
    (path.parent / "alert.txt").write_text(TEMPLATE)
    email = "email:\n  from_address: scheduler@example.com\n  smtp: {host: localhost, port: 25}\n"
    path.write_text(email + "jobs:\n" + "\n".join(job_yaml(i, alerts) for i in range(n)))


def run_case(case: common.Case) -> common.Measure:
    common.quiet_logs()
    n, adds = case["n"], case["adds"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.yaml"
        write_file(path, n, case["alerts"])
        began = time.perf_counter()
        scheduler = systems.js_scheduler(config_path=path)
        loaded = time.perf_counter()
        scheduler.start()
        times: list[float] = []
        try:
            for i in range(adds):
                job = systems.js_future(f"added{i}", START + timedelta(hours=1, seconds=i))
                t = time.perf_counter()
                scheduler.add_job(job)
                times.append(time.perf_counter() - t)
            assert len(scheduler.jobs) == n + adds
        finally:
            scheduler.shutdown(wait=False)
    return {
        "add_job_ms": statistics.median(times) * 1e3,
        "add_job_max_ms": max(times) * 1e3,
        "load_s": loaded - began,
    }


def main(argv: list[str] | None = None) -> int:
    parent = common.parent(__file__, __doc__ or NAME, run_case, cases, argv, timeout=600)
    if parent is None:
        return 0
    opts, all_cases, _measures, summary, started = parent
    n = all_cases[0]["n"]
    alerting = summary[f"jobscheduler/add_job/alerting/{n}"]
    plain = summary[f"jobscheduler/add_job/plain/{n}"]
    ratio = common.ratio(alerting["add_job_ms"].median, plain["add_job_ms"].median)
    load_ratio = common.ratio(alerting["load_s"].median, plain["load_s"].median)
    rows = [
        [
            f"{n:,}",
            label,
            common.span(s["add_job_ms"], 1),
            common.span(s["add_job_max_ms"], 1),
            common.span(s["load_s"], 3),
        ]
        for label, s in (("every job alerting", alerting), ("no alerts", plain))
    ]
    rows.append([f"{n:,}", "ratio", f"{ratio:.2f}x", "", f"{load_ratio:.2f}x"])
    targets = [
        common.Target(
            f"add_job into a file of {n:,} alerting jobs vs {n:,} plain jobs", ratio, "<=", 2.0, "x"
        )
    ]
    payload: dict[str, Any] = {
        "cases": {k: {"metrics": v} for k, v in summary.items()},
        "comparisons": {"add_job_alerting_vs_plain": ratio, "load_alerting_vs_plain": load_ratio},
    }
    common.report(
        NAME,
        opts,
        "add_job into a file of alerting jobs (median (min–max) over fresh processes)",
        ["N in file", "file", "add_job ms (median of adds)", "slowest add ms", "Scheduler(path) s"],
        rows,
        payload,
        targets,
        [f"{all_cases[0]['adds']} plain jobs added one at a time to a running scheduler"],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
