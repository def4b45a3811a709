"""The console's pages with 10,000 jobs and 1,000,000 runs on PostgreSQL: the jobs list (first
page, a search, a later page), a job's page (first and a later history page), a run's page.

A throwaway PostgreSQL server (tests/pg_server.py, fsync on) holds the state store; the runs
are written straight into its table with one ``INSERT … SELECT generate_series`` (100 runs of
each job, one in 17 failed, with a line of output each), then a `Scheduler` with the 10,000
jobs (started, so each has a next run) serves the pages on loopback through `serve_http`. A
real HTTP client (httpx, one kept-alive connection) asks for each page `requests` times in a
row; the time is the client's, from the request sent to the whole body read.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import time
from datetime import UTC, datetime, timedelta

from bench import _common as common

NAME = "console_pages"
TARGET_MS = 200.0

FILL = """
INSERT INTO jobscheduler_runs (run_id, job, slot, attempt, trigger, node, state, started, ended,
    exit_code, reason, output_tail)
SELECT 'r' || g, 'job-' || lpad((g % {jobs})::text, 5, '0'),
    now() - g * interval '1 second', 1, 'schedule', 'bench',
    CASE WHEN g % 17 = 0 THEN 'failed' ELSE 'succeeded' END,
    now() - g * interval '1 second',
    now() - g * interval '1 second' + (1 + g % 300) * interval '100 milliseconds',
    CASE WHEN g % 17 = 0 THEN 1 ELSE 0 END,
    CASE WHEN g % 17 = 0 THEN 'exit code 1' END,
    'processed batch ' || g || E' <ok>\\n'
FROM generate_series(1, {runs}) AS g
"""


def paths(jobs: int) -> dict[str, str]:
    some = f"job-{jobs // 2:05d}"
    return {
        "jobs list": "/",
        "jobs list, search": f"/?q=job-{jobs // 20:04d}",
        "jobs list, page 20": "/?page=20",
        "job page": f"/jobs/{some}",
        "job page, history page 2": f"/jobs/{some}?page=2&tz=Europe/Berlin",
        "run page": "/runs/r500",
        "API run": "/api/runs/r500",
    }


def main(argv: list[str] | None = None) -> int:
    import httpx
    import pg_server

    from jobscheduler import Job, Scheduler
    from jobscheduler.app.http.server import serve_http
    from jobscheduler.state.postgres import PostgresStateStore

    opts = common.options(__doc__ or NAME, argv)
    jobs, runs, requests = (500, 20_000, 5) if opts.smoke else (10_000, 1_000_000, 100)
    started = time.perf_counter()
    common.quiet_logs()
    server = pg_server.start(fsync=True)
    times: dict[str, list[float]] = {}
    sizes: dict[str, float] = {}
    try:
        url = server.fresh_schema_url()
        PostgresStateStore(url).close()  # the schema
        schema = url.rsplit("%3D", 1)[1]
        fill_began = time.perf_counter()
        server.execute(f"SET search_path TO {schema}; " + FILL.format(jobs=jobs, runs=runs))
        server.execute(f"ANALYZE {schema}.jobscheduler_runs")
        fill_s = time.perf_counter() - fill_began
        sched = Scheduler(state=url, node="bench")
        first = datetime(2024, 1, 1, tzinfo=UTC)
        sched.add_jobs(
            Job(f"job-{i:05d}", command=["true"], start=first + timedelta(seconds=i),
                interval="1 day")
            for i in range(jobs)
        )  # fmt: skip
        sched.start()
        http = serve_http(sched, "127.0.0.1", 0)
        try:
            with httpx.Client(base_url=http.url, timeout=60) as client:
                for name, path in paths(jobs).items():
                    client.get(path).raise_for_status()  # warm: templates compiled
                    times[name] = []
                    for _ in range(requests):
                        begin = time.perf_counter()
                        answer = client.get(path)
                        times[name].append((time.perf_counter() - begin) * 1000.0)
                        assert answer.status_code == 200, (path, answer.status_code)
                    sizes[name] = len(answer.content) / 1024
        finally:
            http.close()
            sched.shutdown(wait=False)
    finally:
        server.stop()
    rows, targets = [], []
    for name, values in times.items():
        dist = common.distribution(values)
        rows.append([name, paths(jobs)[name], common.num(dist["p50"], 1),
                     common.num(dist["p99"], 1), common.num(sizes[name], 0)])  # fmt: skip
        targets.append(common.Target(f"{name}, p99", dist["p99"], "<=", TARGET_MS, "ms"))
    common.report(
        NAME,
        opts,
        f"The console's pages: {jobs:,} jobs, {runs:,} runs on PostgreSQL",
        ["page", "path", "p50 ms", "p99 ms", "KiB"],
        rows,
        {"jobs": jobs, "runs": runs, "requests": requests, "fill_s": fill_s, "times_ms": times},
        targets,
        [f"{requests} requests a page, one connection; filling the runs took {fill_s:.0f} s"],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
