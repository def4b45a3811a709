"""A run's CPU cost in one thread: the in-memory burst's path without threads.

The burst of `bench/burst.py` (10,000 trivial internal jobs due at one instant, in memory)
taken through a real ``Scheduler(None)`` with no worker thread, the slot an hour ahead: the
calling thread dispatches the slot's instant, passed as ``now`` (``JobProcessor.run_due``),
and then takes, claims, runs, records and reports every run itself (``JobProcessor.drain``,
each run reported in place).
The process's CPU time around each part, per run, is what a run costs the library whatever
else the machine runs (no thread waits for another, no GIL is handed over), so the figure
holds on a loaded machine where the burst's runs per second do not. A second pass in the same
process under ``cProfile`` counts the Python function calls a run makes.

Beside it, in the same kind of process: a bare ``ThreadPoolExecutor(10)`` given the same
10,000 calls (``submit``, then every ``result()``: its CPU per call, its threads included),
and a plain loop calling the job function (the floor: the call itself).

Instructions, which a shared machine does not move: ``python bench/run_cost.py --one 2000``
runs one burst of 2,000 in the calling process, ``--one 2000 --set-up-only`` the same process
without the burst; under ``PYTHONHASHSEED=0 valgrind --tool=callgrind
--callgrind-out-file=/dev/null``, the difference of the two "Collected" counts over 2,000 is a
run's instructions (compile the tree first, ``python -m compileall jobscheduler bench``, so
that no import compiles inside the burst).

Uses one private seam, kept small: the scheduler's processor (``Scheduler._processor``), with
its workers held back (``wake`` and ``prestart`` of its pool replaced by no-ops before
``start``), so that ``drain`` in this thread does all the work.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import cProfile
import pstats
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import _common as common
from bench import _jobs
from bench import _systems as systems

NAME = "run_cost"
ENGINE = systems.JOBSCHEDULER
POOL = systems.MACHINE
LOOP = "loop"


def cases(smoke: bool) -> list[common.Case]:
    n = 300 if smoke else 10_000
    return [{"key": f"{what}/{n}", "what": what, "n": n} for what in (ENGINE, POOL, LOOP)]


def run_case(case: common.Case) -> common.Measure:
    common.quiet_logs()
    n = case["n"]
    if case["what"] == POOL:
        return _pool(n)
    if case["what"] == LOOP:
        _jobs.expect(n)
        before = time.process_time()
        for i in range(n):
            _jobs.record(i)
        return {"cpu_us_per_run": (time.process_time() - before) / n * 1e6, "ran": n}
    first = _burst(n, profile=None)
    profile = cProfile.Profile()
    second = _burst(n, profile=profile)
    calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
    return {
        "dispatch_us_per_run": first["dispatch"],
        "run_us_per_run": first["run"],
        "cpu_us_per_run": first["dispatch"] + first["run"],
        "calls_per_run": calls / n,
        "ran": min(first["ran"], second["ran"]),
        "missed": n - min(first["ran"], second["ran"]),
    }


def _burst(n: int, profile: cProfile.Profile | None, *, burst: bool = True) -> dict[str, float]:
    """The one-thread burst of `n` runs (without `burst`: the same process up to it, and
    its shutdown, for `--one`'s set-up figure)."""
    from jobscheduler.scheduler import Scheduler

    # The system clock (a FakeClock takes a lock on every read: not what a run costs), with
    # the slot an hour ahead: the scheduler's own thread sleeps until then, and this thread
    # dispatches it now, by passing it as `now`.
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    scheduler = Scheduler(None, max_workers=1)
    pool = scheduler._processor._pool  # the one private seam (see the module notes)
    pool.wake = lambda count: None  # type: ignore[method-assign]
    pool.prestart = lambda: None  # type: ignore[method-assign]
    scheduler.start()
    slot = start + timedelta(seconds=10)
    slot_us = int(slot.timestamp() * 1e6)
    scheduler.add_jobs([systems.js_one_off(f"j{i}", slot_us, args={"key": i}) for i in range(n)])
    _jobs.expect(n)
    processor = scheduler._processor
    if profile is not None:
        profile.enable()
    before = time.process_time()
    if burst:
        processor.run_due(slot)
    dispatched = time.process_time()
    if burst:
        processor.drain()
    ended = time.process_time()
    if profile is not None:
        profile.disable()
    ran = len(_jobs.STARTS)
    scheduler.shutdown(wait=True)
    return {
        "dispatch": (dispatched - before) / n * 1e6,
        "run": (ended - dispatched) / n * 1e6,
        "ran": ran,
    }


def _pool(n: int) -> common.Measure:
    _jobs.expect(n)
    pool = ThreadPoolExecutor(10)
    for _ in range(10):  # warm: every thread started
        pool.submit(time.sleep, 0.001).result()
    before = common.cpu_seconds()
    futures: list[Any] = [pool.submit(_jobs.record, i) for i in range(n)]
    for future in futures:
        future.result()
    cpu = common.cpu_seconds() - before
    pool.shutdown(wait=True)
    return {"cpu_us_per_run": cpu / n * 1e6, "ran": len(_jobs.STARTS)}


def one(argv: list[str]) -> int:
    """``--one N [--set-up-only]``: one burst of N runs in this process, nothing printed but
    the runs made; for a deterministic count under valgrind (see the module notes)."""
    own = argparse.ArgumentParser(prog="run_cost.py --one")
    own.add_argument("--one", type=int, required=True)
    own.add_argument("--set-up-only", action="store_true")
    args = own.parse_args(argv)
    common.quiet_logs()
    result = _burst(args.one, None, burst=not args.set_up_only)
    print(f"ran {int(result['ran'])}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--one" in argv:
        return one(argv)
    parent = common.parent(__file__, __doc__ or NAME, run_case, cases, argv, timeout=180)
    if parent is None:
        return 0
    opts, all_cases, _measures, summary, started = parent
    n = all_cases[0]["n"]
    ours = summary[f"{ENGINE}/{n}"]
    pool = summary[f"{POOL}/{n}"]
    loop = summary[f"{LOOP}/{n}"]
    vs_pool = common.ratio(ours["cpu_us_per_run"].median, pool["cpu_us_per_run"].median)
    rows = [
        [
            "jobscheduler, one thread: dispatch + take, claim, run, record, report",
            common.span(ours["cpu_us_per_run"], 1),
            f"{common.span(ours['dispatch_us_per_run'], 1)} + "
            f"{common.span(ours['run_us_per_run'], 1)}",
            common.span(ours["calls_per_run"], 0),
            common.times(vs_pool) + " pool",
        ],
        [
            "bare ThreadPoolExecutor(10): submit + result",
            common.span(pool["cpu_us_per_run"], 1),
            "",
            "",
            "ceiling",
        ],
        ["the job function alone, in a loop", common.span(loop["cpu_us_per_run"], 2), "", "", ""],
    ]
    targets = [
        common.Target(
            f"a run's CPU in one thread vs a bare pool's call ({n:,} at once)",
            vs_pool,
            "<=",
            1.43,  # the burst at >= 0.7x the pool's runs/s, both bound by one core's CPU
            "x",
        ),
    ]
    common.report(
        NAME,
        opts,
        "A run's CPU cost (µs a run, median (min–max) over fresh processes)",
        ["case", "CPU µs/run", "dispatch + the rest", "calls/run", "ratio"],
        rows,
        common.cases_payload(summary),
        targets,
        [
            "process CPU time; jobscheduler's in the calling thread alone (no worker thread), "
            "calls counted by cProfile in a second pass",
        ],
        started,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
