"""State store: claims per second (memory, SQLite, PostgreSQL; 1, 4, 8 claimers) and the
store queries of an idle node.

Claims: `threads` threads share one store and claim distinct slots (job, slot, attempt 1)
with `claim(...)`, the engine's per-run call, as fast as they can, `total` claims in all;
claims/s is that total over the wall time from the first claim to the last. The SQL stores
run concurrent claims in shared transactions (group commit): `batches` counts the
transactions. Every row is then counted: duplicates would show as claims won twice.

- SQLite: a new file in a temporary directory, WAL, synchronous=FULL (the default) and
  NORMAL (for the decision in docs/state.md).
- PostgreSQL: the same server for every case, started by the parent for this run with
  ``initdb``/``pg_ctl`` in a temporary directory (tests/pg_server.py), **fsync on**, on
  127.0.0.1 (TCP); each case in a schema of its own.

`claim_many` (the batched seam an engine may use for the runs of one tick): one thread
claims 100 runs a call.

Idle: a `Scheduler` given the store, holding 1,000 daily jobs due tomorrow, left alone for
`settle` seconds (past its first heartbeat, which prunes history: then once an hour), then
`window` seconds; the store's statements over the window (the store counts what it sends).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import _common as common
from bench import _pg as pg
from bench import _systems as systems

NAME = "claims"
THREADS = (1, 4, 8)
STORES = ("memory", "sqlite", "sqlite-normal", "postgres")
MANY = 100  # claims per claim_many call (the engine's batched seam)


def cases(smoke: bool, pg_url: str) -> list[common.Case]:
    totals = {"memory": 200_000, "sqlite": 40_000, "sqlite-normal": 40_000, "postgres": 30_000}
    out: list[common.Case] = []
    for store in STORES:
        for threads in THREADS:
            out.append(
                {
                    "key": f"claims/{store}/{threads}",
                    "kind": "claims",
                    "store": store,
                    "threads": threads,
                    "total": 400 if smoke else totals[store],
                    "pg": pg_url,
                }
            )
    for store in STORES[1:]:
        out.append(
            {
                "key": f"many/{store}/1",
                "kind": "claims",
                "store": store,
                "threads": 1,
                "many": MANY,
                "total": 1_000 if smoke else 100_000,
                "pg": pg_url,
            }
        )
    for store in ("sqlite", "postgres"):
        out.append(
            {
                "key": f"idle/{store}",
                "kind": "idle",
                "store": store,
                "jobs": 100 if smoke else 1000,
                # Past the first heartbeat (5 s), which prunes history (then once an hour).
                "settle": 1.0 if smoke else 6.0,
                "window": 1.0 if smoke else 20.0,
                "pg": pg_url,
            }
        )
    return out


def _open(case: common.Case, directory: str) -> Any:
    store = case["store"]
    if store == "memory":
        from jobscheduler.state import MemoryStateStore

        return MemoryStateStore()
    if store.startswith("sqlite"):
        from jobscheduler.state.sqlite import SqliteStateStore

        sync = "normal" if store == "sqlite-normal" else "full"
        return SqliteStateStore(f"{directory}/state.db", synchronous=sync)
    import os

    import psycopg

    from jobscheduler.state.postgres import PostgresStateStore

    schema = f"bench_{os.getpid()}"
    with psycopg.connect(case["pg"], autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    return PostgresStateStore(f"{case['pg']}?options=-csearch_path%3D{schema}")


def run_claims(case: common.Case, store: Any) -> common.Measure:
    threads, total = case["threads"], case["total"]
    each = total // threads
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    barrier = threading.Barrier(threads + 1)
    won = [0] * threads

    many = case.get("many", 0)

    def claimer(n: int) -> None:
        job = f"job{n}"
        barrier.wait()
        count = 0
        if many:
            for first in range(0, each, many):
                batch = []
                for k in range(first, min(each, first + many)):
                    slot = t0 + timedelta(seconds=k)
                    batch.append((job, slot, "schedule", f"{n}-{k}", "bench", 1, slot))
                count += sum(store.claim_many(batch))
        else:
            for k in range(each):
                slot = t0 + timedelta(seconds=k)
                if store.claim(job, slot, "schedule", f"{n}-{k}", node="bench", started=slot):
                    count += 1
        won[n] = count

    workers = [threading.Thread(target=claimer, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    batches0 = getattr(store, "batches", 0)
    cpu0 = common.cpu_seconds()
    barrier.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    took = time.perf_counter() - started
    cpu = common.cpu_seconds() - cpu0
    batches = getattr(store, "batches", 0) - batches0
    rows = len(store.history(limit=10 * total))
    return {
        "claims_per_s": sum(won) / took,
        "won": sum(won),
        "rows": rows,
        "duplicates": sum(won) - rows,
        "claims_per_batch": sum(won) / batches if batches else float("nan"),
        "cpu_us_per_claim": cpu / max(1, sum(won)) * 1e6,
    }


def run_idle(case: common.Case, store: Any) -> common.Measure:
    tomorrow = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    scheduler = systems.js_scheduler(state=store)
    scheduler.start()
    scheduler.add_jobs(
        [systems.js_future(f"j{i}", tomorrow + timedelta(seconds=i)) for i in range(case["jobs"])]
    )
    time.sleep(case.get("settle", 1.0))
    q0 = store.statements
    time.sleep(case["window"])
    queries = store.statements - q0
    scheduler.shutdown(wait=True)
    return {"queries_per_s": queries / case["window"], "queries": queries}


def run_case(case: common.Case) -> common.Measure:
    common.quiet_logs()
    with tempfile.TemporaryDirectory() as directory:
        store = _open(case, directory)
        try:
            return run_claims(case, store) if case["kind"] == "claims" else run_idle(case, store)
        finally:
            store.close()


def main(argv: list[str] | None = None) -> int:
    opts = common.options(__doc__ or NAME, argv)
    if opts.child is not None:
        common.child_main(run_case, opts.child)
        return 0
    started = time.perf_counter()
    all_cases, measures = pg.repeat_on_postgres(__file__, opts, cases)
    summary = common.summary(measures)
    rows = []
    for case in all_cases:
        s = summary[common.key_of(case)]
        if case["kind"] == "claims":
            how = f"claim_many ({case['many']} a call)" if case.get("many") else "claim"
            rows.append(
                [
                    f"{how}, {case['store']}, {case['threads']} claimer(s)",
                    common.span(s["claims_per_s"], 0),
                    common.span(s["claims_per_batch"], 1),
                    common.span(s["cpu_us_per_claim"], 1),
                    common.span(s["duplicates"], 0),
                ]
            )
        else:
            rows.append(
                [
                    f"idle node, {case['store']}, {case['jobs']:,} jobs: queries/s",
                    common.span(s["queries_per_s"], 2),
                    "",
                    "",
                    "",
                ]
            )
    targets = [
        common.Target(
            f"claims/s on {store}, 8 claimers",
            summary[f"claims/{store}/8"]["claims_per_s"].median,
            ">=",
            5000,
            "runs/s",
        )
        for store in ("sqlite", "postgres")
    ]
    targets += [
        common.Target(
            f"duplicate claims, {key}",
            summary[key]["duplicates"].median,
            "<=",
            0,
            "runs",
        )
        for key in summary
        if not key.startswith("idle/")
    ]
    targets += [
        common.Target(
            f"idle node's store queries/s, {store}",
            summary[f"idle/{store}"]["queries_per_s"].median,
            "<=",
            1,
            "queries/s",
        )
        for store in ("sqlite", "postgres")
    ]
    common.report(
        NAME,
        opts,
        "State store: claims per second and an idle node's queries",
        ["case", "claims/s (or queries/s)", "claims per transaction", "CPU µs/claim", "dups"],
        rows,
        common.cases_payload(summary),
        targets,
        [
            "PostgreSQL 15 started for this run (fsync on, TCP on 127.0.0.1); SQLite WAL",
            "CPU µs/claim is the whole process's (claimers, store, driver)",
        ],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
