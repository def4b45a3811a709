"""On-demand runs through the queue: submitted runs per second, and how soon a submitted run
starts on an idle node (SQLite and PostgreSQL stores).

Throughput: one `Scheduler` (8 or 32 workers) with one internal job (``time:time``, a call that
returns at once, so the queue and the store are what is measured). `SUBMITTERS` threads
submit `total` runs with `Scheduler.submit` as fast as they can; runs/s is `total` over the
time from the first submit to the last row settled (each run: the queue row inserted,
taken with its run claimed, and the run finished with its row settled: three writes, each
shared with others in the store's group commit). Every row is then
checked: each ran once, its row ``succeeded``.

The take and the claim (``take/<store>``): the store alone, one row at a time as on an idle
node: a row submitted, then taken and its run claimed either in two transactions (`take`,
then `claim`: how a submitted run was started before) or in one (`take` with `TakeClaims`),
the two ways alternating, `samples` each; p50/p99 of the time from the take's call to the
claim made.

Start latency: the same node, idle; `samples` runs submitted one at a time, each after the
previous one ended; the latency is from just before `submit` to the run's start (its
`Execution.started`, the runner's clock reading), in two parts: the `submit` call itself
(the row's insert, and, for a node's own submit with a free worker, its take with the run
claimed: one commit), and from its return to the start (the wake-up and the take when the
submit only inserted; the hand-off to a worker). ``latency/<store>``: `Scheduler.submit` in
the node's process; ``latency_other/postgres``: `StateStore.submit` on a store of its own
(what the CLI or another node's API does: an insert that notifies), the node woken by its
``LISTEN`` (PostgreSQL only: SQLite has no notification, such a row waits for the poll).

- SQLite: a new file in a temporary directory, WAL, synchronous=FULL (the default).
- PostgreSQL: a server started by the parent for this run (tests/pg_server.py), fsync on,
  TCP on 127.0.0.1; each case in a schema of its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import tempfile
import threading
import time
from datetime import UTC, datetime
from typing import Any

from bench import _common as common
from bench import _pg as pg

NAME = "queue_runs"  # not "queue": a script's directory comes first on sys.path
STORES = ("sqlite", "postgres")
WORKERS = (8, 32)  # the node's max_workers: more concurrent runs share more commits
SUBMITTERS = 8  # threads submitting at once (programs asking for runs, an API under load)


def cases(smoke: bool, pg_url: str) -> list[common.Case]:
    out: list[common.Case] = []
    for store in STORES:
        pg = pg_url if store == "postgres" else None
        for workers in WORKERS:
            out.append(
                {
                    "key": f"throughput/{store}/{workers}",
                    "kind": "throughput",
                    "store": store,
                    "workers": workers,
                    "total": 200 if smoke else 5000,
                    "pg": pg,
                }
            )
        out.append(
            {
                "key": f"take/{store}",
                "kind": "take",
                "store": store,
                "samples": 20 if smoke else 300,
                "pg": pg,
            }
        )
        out.append(
            {
                "key": f"latency/{store}",
                "kind": "latency",
                "store": store,
                "samples": 20 if smoke else 300,
                "pg": pg,
            }
        )
    out.append(
        {
            "key": "latency_other/postgres",
            "kind": "latency",
            "other": True,
            "store": "postgres",
            "samples": 20 if smoke else 300,
            "pg": pg_url,
        }
    )
    return out


def _state(case: common.Case, directory: str) -> str:
    if case["store"] == "sqlite":
        return f"sqlite:///{directory}/state.db"
    import os

    import psycopg

    schema = f"bench_queue_{os.getpid()}"
    with psycopg.connect(case["pg"], autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    return f"{case['pg']}?options=-csearch_path%3D{schema}"


def _take(case: common.Case) -> common.Measure:
    """The take and the claim of one row, in two transactions or in one (module notes)."""
    from jobscheduler.state import open_store
    from jobscheduler.state.values import TakeClaims

    with tempfile.TemporaryDirectory() as directory:
        store, _ = open_store(_state(case, directory))
        try:
            waits: dict[str, list[float]] = {"two": [], "one": []}
            for n in range(2 * case["samples"]):
                way = "one" if n % 2 else "two"
                store.submit("noop")
                run_id = f"run-{n}"
                before = time.perf_counter()
                now = datetime.now(UTC)
                if way == "two":
                    [row] = store.take("bench", jobs=["noop"], limit=1)
                    store.claim("noop", None, "submit", run_id, node="bench", started=now)
                else:
                    claims = TakeClaims(jobs={"noop"}, run_ids=[run_id], started=now)
                    [row] = store.take("bench", jobs=["noop"], limit=1, claims=claims)
                waits[way].append(time.perf_counter() - before)
                store.settle(row.id, "succeeded", run_id)
        finally:
            store.close()
    two, one = (common.distribution(waits[w], 1000.0) for w in ("two", "one"))
    return {
        "two_p50_ms": two["p50"],
        "two_p99_ms": two["p99"],
        "one_p50_ms": one["p50"],
        "one_p99_ms": one["p99"],
    }


def run_case(case: common.Case) -> common.Measure:
    if case["kind"] == "take":
        return _take(case)
    from jobscheduler import Job, Scheduler
    from jobscheduler.cluster.queue import Submitted
    from jobscheduler.model.execution import Execution

    common.quiet_logs()
    with tempfile.TemporaryDirectory() as directory:
        workers = case.get("workers", 8)
        url = _state(case, directory)
        sched = Scheduler(state=url, node="bench", max_workers=workers)
        job = Job(
            "noop",
            type="internal",
            command="time:time",
            start=datetime(2099, 1, 1, tzinfo=UTC),
            interval="1 day",
        )
        sched.add_job(job)
        done = threading.Condition()
        ended: list[Execution] = []

        def observe(execution: Execution) -> None:
            if type(execution.trigger) is Submitted:
                with done:
                    ended.append(execution)
                    done.notify_all()

        sched.queue.observers.append(observe)
        sched.start()
        try:
            if case["kind"] == "throughput":
                return _throughput(sched, case["total"], done, ended)
            if case.get("other"):  # a store of its own, as the CLI's in another process
                from jobscheduler.state import open_store

                other, _ = open_store(url)
                try:
                    return _latency(sched, case["samples"], done, ended, other.submit)
                finally:
                    other.close()
            return _latency(sched, case["samples"], done, ended, sched.submit)
        finally:
            sched.shutdown(wait=True)


def _wait(done: threading.Condition, ended: list[Any], count: int) -> None:
    with done:
        while len(ended) < count:
            if not done.wait(60):
                raise RuntimeError(f"only {len(ended)} of {count} runs ended")


def _throughput(
    sched: Any, total: int, done: threading.Condition, ended: list[Any]
) -> common.Measure:
    started = time.perf_counter()
    cpu = time.process_time()

    def submitter(first: int) -> None:
        for i in range(first, total, SUBMITTERS):
            sched.submit("noop", {"i": i})

    threads = [threading.Thread(target=submitter, args=(n,)) for n in range(SUBMITTERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    submitted = time.perf_counter() - started
    _wait(done, ended, total)
    # The last row is settled right after its run is observed: wait for the queue to agree.
    while sched.state_store.queue(state="running", limit=1):
        time.sleep(0.001)
    elapsed = time.perf_counter() - started
    rows = sched.state_store.queue(limit=total + 10)
    ok = sum(r.state == "succeeded" for r in rows)
    runs = {r.run_id for r in rows if r.run_id}
    return {
        "runs_per_s": total / elapsed,
        "submits_per_s": total / submitted,
        "cpu_us_per_run": (time.process_time() - cpu) / total * 1e6,
        "not_succeeded": total - ok,
        "duplicates": total - len(runs),
    }


def _latency(
    sched: Any,
    samples: int,
    done: threading.Condition,
    ended: list[Any],
    submit: Any,
) -> common.Measure:
    clock = sched.clock
    waits: list[float] = []
    calls: list[float] = []  # the submit call (its commit)
    afters: list[float] = []  # from its return to the start
    for i in range(samples):
        before = clock.now()
        submit("noop")
        returned = clock.now()
        _wait(done, ended, i + 1)
        waits.append((ended[i].started - before).total_seconds())
        calls.append((returned - before).total_seconds())
        afters.append((ended[i].started - returned).total_seconds())
        time.sleep(0.005)  # the node is idle again before the next submit
    dist = common.distribution(waits, 1000.0)
    call, after = common.distribution(calls, 1000.0), common.distribution(afters, 1000.0)
    return {
        "p50_ms": dist["p50"],
        "p99_ms": dist["p99"],
        "max_ms": dist["max"],
        "submit_p50_ms": call["p50"],
        "submit_p99_ms": call["p99"],
        "after_p50_ms": after["p50"],
        "after_p99_ms": after["p99"],
    }


def main(argv: list[str] | None = None) -> int:
    opts = common.options(__doc__ or NAME, argv)
    if opts.child is not None:
        common.child_main(run_case, opts.child)
        return 0
    started = time.perf_counter()
    all_cases, measures = pg.repeat_on_postgres(__file__, opts, cases)
    summary = common.summary(measures)
    rows = []
    targets = []
    for case in all_cases:
        s = summary[common.key_of(case)]
        if case["kind"] == "throughput":
            rows.append(
                [
                    f"{case['total']:,} submits ({SUBMITTERS} threads), {case['workers']} workers, "
                    f"{case['store']}",
                    common.span(s["runs_per_s"], 0) + " runs/s",
                    common.span(s["submits_per_s"], 0) + " submits/s",
                    common.span(s["cpu_us_per_run"], 0),
                ]
            )
            targets.append(
                common.Target(
                    f"submitted runs/s, {case['store']}, {case['workers']} workers",
                    s["runs_per_s"].median,
                    ">=",
                    2000,
                    "runs/s",
                )
            )
            targets.append(
                common.Target(
                    f"rows not succeeded or run twice, {case['store']}, {case['workers']} workers",
                    s["not_succeeded"].median + s["duplicates"].median,
                    "<=",
                    0,
                    "rows",
                )
            )
        elif case["kind"] == "take":
            rows.append(
                [
                    f"take + claim of one row, {case['store']}: two transactions / one",
                    f"p50 {common.span(s['two_p50_ms'], 1)} / {common.span(s['one_p50_ms'], 1)} ms",
                    f"p99 {common.span(s['two_p99_ms'], 1)} / {common.span(s['one_p99_ms'], 1)} ms",
                    "",
                ]
            )
        else:
            where = "another process's submit" if case.get("other") else "submit"
            rows.append(
                [
                    f"start after {where}, idle node, {case['store']}",
                    f"p50 {common.span(s['p50_ms'], 1)} ms",
                    f"p99 {common.span(s['p99_ms'], 1)} ms",
                    "",
                ]
            )
            rows.append(
                [
                    "  the submit call / from its return to the start",
                    f"p50 {common.span(s['submit_p50_ms'], 1)} / "
                    f"{common.span(s['after_p50_ms'], 1)} ms",
                    f"p99 {common.span(s['submit_p99_ms'], 1)} / "
                    f"{common.span(s['after_p99_ms'], 1)} ms",
                    "",
                ]
            )
            if not case.get("other"):
                targets.append(
                    common.Target(
                        f"start within, p99, {case['store']}", s["p99_ms"].median, "<=", 50, "ms"
                    )
                )
                if case["store"] == "postgres":
                    targets.append(
                        common.Target(
                            "submit → start on an idle node, p99, postgres",
                            s["p99_ms"].median,
                            "<=",
                            10,
                            "ms",
                        )
                    )
    common.report(
        NAME,
        opts,
        "On-demand runs through the queue",
        ["case", "result", "", "CPU µs/run"],
        rows,
        common.cases_payload(summary),
        targets,
        ["PostgreSQL 15 started for this run (fsync on, TCP on 127.0.0.1); SQLite WAL, FULL"],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
