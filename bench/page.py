"""The status page's response time with 10,000 jobs (and the API's status and jobs reads).

A `Scheduler` holding `jobs` daily jobs (started, so each has a next run), 200 runs in its
SQLite state store (some failed, with output tails), served by `serve_http` on loopback; a
real HTTP client (httpx, one kept-alive connection) asks for each path `requests` times in a
row. The time is the client's, from the request sent to the whole body read.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tempfile
import time
from datetime import UTC, datetime, timedelta

from bench import _common as common

NAME = "page"
PATHS = ("/", "/api/status", "/api/jobs")


def cases(smoke: bool) -> list[common.Case]:
    jobs = 500 if smoke else 10_000
    return [{"key": f"page/{jobs}", "jobs": jobs, "requests": 5 if smoke else 50}]


def run_case(case: common.Case) -> common.Measure:
    import httpx

    from jobscheduler import Job, Scheduler
    from jobscheduler.app.http.server import serve_http
    from jobscheduler.state import RunState

    common.quiet_logs()
    with tempfile.TemporaryDirectory() as directory:
        sched = Scheduler(state=f"sqlite:///{directory}/state.db", node="bench")
        start = datetime(2024, 1, 1, tzinfo=UTC)
        sched.add_jobs(
            Job(
                f"job-{i:05d}",
                command=["true"],
                start=start + timedelta(seconds=i),
                interval="1 day",
            )
            for i in range(case["jobs"])
        )
        store = sched.state_store
        now = datetime.now(UTC)
        for i in range(200):
            failed = i % 10 == 0
            store.record(
                f"job-{i:05d}", None, "run_now", f"run-{i}", node="bench",
                state=RunState.FAILED if failed else RunState.SUCCEEDED,
                started=now - timedelta(minutes=i), ended=now - timedelta(minutes=i, seconds=-1),
                exit_code=1 if failed else 0, reason="exit code 1" if failed else None,
                output_tail="line of output <with markup>\n" * 20,
            )  # fmt: skip
        sched.start()
        server = serve_http(sched, "127.0.0.1", 0)
        out: common.Measure = {}
        try:
            with httpx.Client(base_url=server.url, timeout=30) as client:
                for path in PATHS:
                    client.get(path).raise_for_status()  # warm: templates compiled
                    times = []
                    for _ in range(case["requests"]):
                        begin = time.perf_counter()
                        answer = client.get(path)
                        times.append(time.perf_counter() - begin)
                        assert answer.status_code == 200
                    dist = common.distribution(times, 1000.0)
                    name = "page" if path == "/" else path.rsplit("/", 1)[1]
                    out[f"{name}_p50_ms"] = dist["p50"]
                    out[f"{name}_p99_ms"] = dist["p99"]
                    out[f"{name}_kb"] = len(answer.content) / 1024
        finally:
            server.close()
            sched.shutdown(wait=False)
        return out


def main(argv: list[str] | None = None) -> int:
    opts = common.options(__doc__ or NAME, argv)
    if opts.child is not None:
        common.child_main(run_case, opts.child)
        return 0
    started = time.perf_counter()
    all_cases = cases(opts.smoke)
    measures = common.repeat(__file__, all_cases, opts.reps, quiet=opts.quiet, timeout=600)
    summary = common.summary(measures)
    rows = []
    targets = []
    for case in all_cases:
        s = summary[common.key_of(case)]
        for name in ("page", "status", "jobs"):
            rows.append(
                [
                    f"{name} ({case['jobs']:,} jobs)",
                    common.span(s[f"{name}_p50_ms"], 1),
                    common.span(s[f"{name}_p99_ms"], 1),
                    common.span(s[f"{name}_kb"], 0),
                ]
            )
        targets.append(
            common.Target(
                f"page response, p99, {case['jobs']:,} jobs",
                s["page_p99_ms"].median,
                "<=",
                200,
                "ms",
            )
        )
    common.report(
        NAME,
        opts,
        "The status page's response time",
        ["path", "p50 ms", "p99 ms", "KiB"],
        rows,
        common.cases_payload(summary),
        targets,
        ["the page shows 200 jobs a page (PER_PAGE) and the 30 newest runs"],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
