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
``--store postgres``: instead, jobscheduler in memory and on PostgreSQL (a server this script
starts for the run, tests/pg_server.py, fsync on, TCP on 127.0.0.1; each case on a new
database of it; the node ``Scheduler(state=URL, node="n0")``), the same 10,000 one-off jobs
due at one instant, alternating; besides runs/s, the CPU per run of the process and of the
database's processes from 50 ms before the instant to the end (``cpu_us_per_run``), and the
runs the store recorded ``succeeded`` once the scheduler closed it (``recorded``: every run,
or the figure is wrong). ``--extra-src DIR --extra-label TEXT``: also the ``jobscheduler/``
of another tree (``git archive REV jobscheduler | tar -x -C DIR``) on PostgreSQL, in the
same run (results in ``bench/results/burst_store.json``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
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


def store_cases(
    smoke: bool, pg: str, postmaster: int, extra: tuple[str, str] | None
) -> list[common.Case]:
    """The cases of ``--store postgres``: in memory, on PostgreSQL, and on PostgreSQL from
    the tree `extra` (source directory, label)."""
    n = 200 if smoke else 10_000
    base = {"system": systems.JOBSCHEDULER, "n": n, "pg": pg, "postmaster": postmaster}
    out: list[common.Case] = [
        {**base, "key": f"{systems.JOBSCHEDULER}/memory/{n}", "store": "memory"},
        {**base, "key": f"{systems.JOBSCHEDULER}/postgres/{n}", "store": "postgres"},
    ]
    if extra is not None:
        key = f"{systems.JOBSCHEDULER}[{extra[1]}]/postgres/{n}"
        out.append({**out[-1], "key": key, "src": extra[0], "label": extra[1]})
    return out


def run_case(case: common.Case) -> common.Measure:
    common.quiet_logs()
    if case.get("src"):  # another tree's jobscheduler, imported from here on
        from bench import _cluster_node

        os.environ[_cluster_node.SRC] = case["src"]
        _cluster_node.use_src()
    if case.get("store") is not None:
        return run_store_case(case)
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


def run_store_case(case: common.Case) -> common.Measure:
    """A case of ``--store postgres`` (see the module notes)."""
    from bench import _cluster_run

    n = case["n"]
    url = None
    if case["store"] == "postgres":
        url = _cluster_run._database(case["pg"], f"b{os.getpid()}_{time.time_ns() % 10**9}")
    _jobs.expect(n)
    scheduler = systems.js_scheduler(**({"state": url, "node": "n0"} if url else {}))
    scheduler.start()
    lead = 1.0 + n * 0.0005  # adding the jobs defines them in the store too
    slot_us = int((time.time() + lead) * 1e6)
    slot = slot_us / 1e6
    scheduler.add_jobs([systems.js_one_off(f"j{i}", slot_us, args={"key": i}) for i in range(n)])
    setup_ok = time.time() < slot - 0.3  # before the claims ahead of the instant
    while (left := slot - 0.05 - time.time()) > 0:
        time.sleep(left)
    cpu0 = _cpu_seconds()
    db0 = _cluster_run.db_cpu(case["postmaster"]) if url else 0.0
    _jobs.DONE.wait(lead + 60)
    scheduler.wait_idle(60)
    ended = time.time()
    cpu1 = _cpu_seconds()
    db1 = _cluster_run.db_cpu(case["postmaster"]) if url else 0.0
    scheduler.shutdown(wait=True)
    recorded = n
    if url:
        rows = _cluster_run._pg(
            url, "SELECT count(*) FROM jobscheduler_runs WHERE state = 'succeeded'"
        )
        recorded = int(rows[0][0])
    starts = [t for _, t in list(_jobs.STARTS)]
    all_ended = ended - slot
    node_cpu, db_cpu = cpu1 - cpu0, db1 - db0
    return {
        "ran": len(starts),
        "recorded": recorded,
        "first_start_ms": (min(starts) - slot) * 1000 if starts else float("nan"),
        "all_started_s": (max(starts) - slot) if starts else float("nan"),
        "all_ended_s": all_ended,
        "runs_per_s": len(starts) / all_ended if all_ended > 0 else float("nan"),
        "node_cpu_s": node_cpu,
        "db_cpu_s": db_cpu,
        "cpu_us_per_run": (node_cpu + db_cpu) / max(1, len(starts)) * 1e6,
        "setup_ok": setup_ok,
    }


def store_main(opts: common.Options, extra: tuple[str, str] | None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import pg_server

    started = time.perf_counter()
    server = pg_server.start(fsync=True)
    try:
        postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
        all_cases = store_cases(opts.smoke, server.url(), postmaster, extra)
        measures = common.repeat(__file__, all_cases, opts.reps, quiet=opts.quiet, timeout=180)
        version = server.execute("SHOW server_version")[0][0]
    finally:
        server.stop()
    summary = common.summary(measures)
    n = all_cases[0]["n"]
    rows = []
    for case in all_cases:
        s = summary[common.key_of(case)]
        where = "in memory" if case["store"] == "memory" else "PostgreSQL"
        label = f"jobscheduler ({case['label']})" if case.get("label") else "jobscheduler"
        rows.append(
            [
                f"{label}, {where}: {n:,} at once",
                common.span(s["all_started_s"], 3),
                common.span(s["all_ended_s"], 3),
                common.span(s["runs_per_s"], 0),
                common.span(s["cpu_us_per_run"], 0),
                common.num(s["recorded"].low, 0),
            ]
        )
    pg = summary[f"{systems.JOBSCHEDULER}/postgres/{n}"]
    targets = [
        common.Target(
            f"burst of {n:,} on PostgreSQL: runs per second",
            pg["runs_per_s"].median,
            ">=",
            20_000,
            "runs/s",
        ),
        common.Target(
            f"burst of {n:,} on PostgreSQL: runs recorded", pg["recorded"].low, ">=", n, "runs"
        ),
    ]
    common.report(
        f"{NAME}_store",
        opts,
        "Burst on a store (median (min–max) over fresh processes)",
        ["case", "all started s", "all ended s", "runs/s", "CPU µs/run", "recorded"],
        rows,
        {"cases": {k: {"metrics": v} for k, v in summary.items()}},
        targets,
        [
            f"PostgreSQL {version} started for this run (fsync on, TCP on 127.0.0.1)",
            "CPU µs/run: the scheduler's process and the database's, from 50 ms before the "
            "instant until every run ended",
        ],
        started,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--store", choices=("postgres",), default=None)
    own.add_argument("--extra-src", default=None)
    own.add_argument("--extra-label", default="other")
    mine, rest = own.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    if mine.store is not None:
        opts = common.options(__doc__ or NAME, rest)
        if opts.child is not None:
            common.child_main(run_case, opts.child)
            return 0
        extra = None
        if mine.extra_src:
            if not (Path(mine.extra_src) / "jobscheduler" / "__init__.py").exists():
                own.error(f"--extra-src {mine.extra_src}: no jobscheduler/__init__.py there")
            extra = (str(Path(mine.extra_src).resolve()), mine.extra_label)
        return store_main(opts, extra)
    argv = rest
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
