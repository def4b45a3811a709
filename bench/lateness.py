"""Start lateness: how long after its slot a job function actually begins.

N one-off jobs at distinct instants 10 ms apart (N = 1, 100, 10,000), and a burst of 1,000
jobs due at one instant, in jobscheduler and in APScheduler; lateness = time.time() at the
start of the job function - the slot. For N = 10,000 all 10,000 jobs are scheduled but only
the first 1,000 runs (10 s) are waited for and measured, to keep the run short.

The machine's own figures, from the same run:
- oversleep: a thread doing a timed Condition.wait until each slot (what a plain timed wait
  gives);
- wait + pool: the same, then ThreadPoolExecutor.submit to a warm pool; lateness at the call;
- spin + handoff: wake 1.5 ms early, spin to the slot, notify a thread already waiting (the
  floor a Python scheduler can reach here);
- burst via pool: a timed wait to the instant, then 1,000 submits to a 10-thread pool.

The cases of one sample per process (N = 1, and the machine's rows after the same idle lead)
run in 3 times as many fresh processes as the others (15 with the default 5 repetitions):
the median of single samples needs more of them to hold still from one run to the next.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench import _common as common
from bench import _jobs
from bench import _systems as systems

NAME = "lateness"
SPACING_US = 10_000
SINGLE_SAMPLE_FACTOR = 3  # repetitions of a one-sample case, times --reps


def cases(smoke: bool) -> list[common.Case]:
    sizes = [(1, 1), (5, 5)] if smoke else [(1, 1), (100, 100), (10_000, 1_000)]
    burst = 20 if smoke else 1_000
    single = 1 if smoke else SINGLE_SAMPLE_FACTOR  # repetitions of a one-sample case
    machine_n = 20 if smoke else 200
    out: list[common.Case] = []
    for system in (systems.JOBSCHEDULER, systems.APSCHEDULER):
        for n, measured in sizes:
            out.append(
                {
                    "key": f"{system}/distinct/{n}",
                    "system": system,
                    "mode": "distinct",
                    "n": n,
                    "measured": measured,
                    "reps_factor": single if measured == 1 else 1,
                }
            )
        out.append(
            {
                "key": f"{system}/burst/{burst}",
                "system": system,
                "mode": "burst",
                "n": burst,
                "measured": burst,
            }
        )
    for mode in ("oversleep", "wait+pool", "spin+handoff"):
        out.append(
            {
                "key": f"machine/{mode}",
                "system": systems.MACHINE,
                "mode": mode,
                "n": machine_n,
                "measured": machine_n,
            }
        )
    for mode in ("oversleep", "spin+handoff"):  # one slot after the same idle lead as N=1
        out.append(
            {
                "key": f"machine/{mode}/1",
                "system": systems.MACHINE,
                "mode": mode,
                "n": 1,
                "measured": 1,
                "lead": _lead(1),
                "reps_factor": single,
            }
        )
    out.append(
        {
            "key": f"machine/burst-pool/{burst}",
            "system": systems.MACHINE,
            "mode": "burst-pool",
            "n": burst,
            "measured": burst,
        }
    )
    return out


# -- children ---------------------------------------------------------------------------------


def run_case(case: common.Case) -> common.Measure:
    common.quiet_logs()
    if case["system"] == systems.MACHINE:
        lateness = _machine(case)
        return _result(lateness, case["measured"], setup_ok=True)
    return _scheduler(case)


def _slots(case: common.Case, lead: float) -> list[int]:
    base = int((time.time() + lead) * 1e6)
    if case["mode"] == "burst" or case["mode"] == "burst-pool":
        return [base] * case["n"]
    return [base + i * SPACING_US for i in range(case["n"])]


def _lead(n: int) -> float:
    """Seconds from the scheduler's start to the first slot: time to build and add n jobs."""
    return 0.6 + n * 0.0003


def _scheduler(case: common.Case) -> common.Measure:
    n, measured = case["n"], case["measured"]
    _jobs.expect(measured)
    # Each scheduler is made and started before the slots are chosen: its first use imports
    # the library, which can take longer than the lead on a busy machine.
    if case["system"] == systems.JOBSCHEDULER:
        scheduler = systems.js_scheduler()
        scheduler.start()
        slots = _slots(case, _lead(n))
        jobs = [systems.js_one_off(f"j{i}", s, args={"key": i}) for i, s in enumerate(slots)]
        scheduler.add_jobs(jobs)
    else:
        scheduler = systems.aps_scheduler()
        scheduler.start()
        slots = _slots(case, _lead(n))
        for i, s in enumerate(slots):
            systems.aps_add_one_off(scheduler, _jobs.record, s, i)
    setup_ok = time.time() < slots[0] / 1e6 - 0.05
    last = slots[measured - 1] / 1e6
    _jobs.DONE.wait(timeout=max(0.0, last - time.time()) + 5.0)
    starts = [(k, t) for k, t in list(_jobs.STARTS) if k < measured]
    if case["system"] == systems.JOBSCHEDULER:
        scheduler.shutdown(wait=True)
    else:
        scheduler.shutdown(wait=False)
    lateness = [t - slots[k] / 1e6 for k, t in starts]
    return _result(lateness, measured, setup_ok)


def _result(lateness: list[float], measured: int, setup_ok: bool) -> common.Measure:
    dist = common.distribution(lateness, 1000.0)  # milliseconds
    return {
        "p50_ms": dist["p50"],
        "p99_ms": dist["p99"],
        "max_ms": dist["max"],
        "min_ms": dist["min"],
        "ran": len(lateness),
        "missed": measured - len(lateness),
        "setup_ok": setup_ok,
    }


def _machine(case: common.Case) -> list[float]:
    mode = case["mode"]
    slots = [s / 1e6 for s in _slots(case, case.get("lead", 0.2))]
    cond = threading.Condition()
    late: list[float] = []
    if mode == "oversleep":
        for slot in slots:
            with cond:
                cond.wait(max(0.0, slot - time.time()))
            late.append(time.time() - slot)
        return late
    if mode in ("wait+pool", "burst-pool"):
        pool = ThreadPoolExecutor(10)
        for _ in range(10):  # warm: every thread started
            pool.submit(time.sleep, 0.001)
        time.sleep(0.05)
        stamps: list[tuple[int, float]] = []

        def job(i: int) -> None:
            stamps.append((i, time.time()))

        for i, slot in enumerate(slots):
            if i == 0 or slot != slots[i - 1]:
                with cond:
                    cond.wait(max(0.0, slot - time.time()))
            pool.submit(job, i)
        pool.shutdown(wait=True)
        return [t - slots[i] for i, t in stamps]
    # spin + handoff: a thread waits on a Condition; it is notified exactly at the slot.
    ready = threading.Condition()
    box: list[Any] = []
    got: list[float] = []

    def worker() -> None:
        with ready:
            while True:
                while not box:
                    ready.wait()
                item = box.pop()
                if item is None:
                    return
                got.append(time.time() - item)

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    for slot in slots:
        with cond:
            cond.wait(max(0.0, slot - 0.0015 - time.time()))
        while time.time() < slot:
            pass
        with ready:
            box.append(slot)
            ready.notify()
    with ready:
        box.insert(0, None)
        ready.notify()
    thread.join()
    return got


# -- the parent -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parent = common.parent(__file__, __doc__ or NAME, run_case, cases, argv, timeout=300)
    if parent is None:
        return 0
    opts, all_cases, measures, summary, started = parent
    rows: list[list[str]] = []
    targets: list[common.Target] = []
    comparisons: dict[str, Any] = {}
    by_key = {common.key_of(c): c for c in all_cases}
    floors = {
        n: summary.get(f"machine/spin+handoff{'/1' if n == 1 else ''}", {})
        for n in {c["n"] for c in all_cases}
    }
    for case in all_cases:
        key = common.key_of(case)
        s = summary[key]
        label = _label(case)
        aps_key = key.replace(systems.JOBSCHEDULER, systems.APSCHEDULER)
        ratio = ""
        if case["system"] == systems.JOBSCHEDULER and aps_key in summary:
            aps = summary[aps_key]
            r50 = common.ratio(s["p50_ms"].median, aps["p50_ms"].median)
            r99 = common.ratio(s["p99_ms"].median, aps["p99_ms"].median)
            rmax = common.ratio(s["max_ms"].median, aps["max_ms"].median)
            ratio = f"p50 {common.times(r50)}, p99 {common.times(r99)} of APS"
            comparisons[key] = {"p50_vs_aps": r50, "p99_vs_aps": r99, "max_vs_aps": rmax}
            floor = floors.get(case["n"])
            if case["mode"] == "distinct" and floor:
                vs_floor = common.ratio(s["p50_ms"].median, floor["p50_ms"].median)
                comparisons[key]["p50_vs_floor"] = vs_floor
                ratio += f"; p50 {common.times(vs_floor)} of spin+handoff"
            n = case["n"]
            if case["mode"] == "distinct":
                targets += [
                    common.Target(f"lateness p50, N={n:,}", s["p50_ms"].median, "<=", 0.2, "ms"),
                    common.Target(f"lateness p99, N={n:,}", s["p99_ms"].median, "<=", 0.5, "ms"),
                    common.Target(f"lateness p99 vs APScheduler, N={n:,}", r99, "<=", 0.6, "x"),
                ]
            else:
                targets.append(
                    common.Target(
                        f"burst of {n:,}: max lateness", s["max_ms"].median, "<=", 20.0, "ms"
                    )
                )
        rows.append(
            [
                label,
                common.span(s["p50_ms"], 3),
                common.span(s["p99_ms"], 3),
                common.span(s["max_ms"], 3),
                common.num(s["missed"].high, 0) if "missed" in s else "0",
                ratio,
            ]
        )
    notes = []
    if any(not m.get("setup_ok", True) for ms in measures.values() for m in ms):
        notes.append("some repetition was still adding jobs at the first slot")
    big = {(c["n"], c["measured"]) for c in all_cases if c["measured"] < c["n"]}
    for n, measured in sorted(big):
        notes.append(f"N={n:,}: all scheduled, the first {measured:,} runs measured")
    notes.append(
        "machine rows 'oversleep 1' and 'spin+handoff 1': one slot after the same idle lead as N=1 "
        f"({_lead(1):.1f} s); the others: slots 10 ms apart"
    )
    common.report(
        NAME,
        opts,
        "Start lateness (ms; median (min–max) over fresh processes)",
        ["case", "p50", "p99", "max", "missed", "ratio"],
        rows,
        {
            "cases": {k: {"params": by_key[k], "metrics": v} for k, v in summary.items()},
            "comparisons": comparisons,
        },
        targets,
        notes,
        started,
    )
    return 0


def _label(case: common.Case) -> str:
    if case["system"] == systems.MACHINE:
        if case["mode"] == "burst-pool" or case.get("lead"):
            return f"machine: {case['mode']} {case['n']:,}"
        return f"machine: {case['mode']}"
    what = f"{case['n']:,} distinct" if case["mode"] == "distinct" else f"burst {case['n']:,}"
    return f"{case['system']}: {what}"


if __name__ == "__main__":
    sys.exit(main())
