"""`next_after` for an old job: a 1-second job started in 2003, a monthly job started in 1900.

- jobscheduler: ``Job.next_after(t)`` for 1,000 instants spread over an hour around now (time
  zone Europe/Berlin), µs per call (the best of 5 timings of 20 passes, as docs/semantics.md).
- APScheduler: ``IntervalTrigger(seconds=1)`` and, for the monthly job (31 January 02:30),
  the equivalent ``CronTrigger(day="last", hour=2, minute=30)``: ``get_next_fire_time(None,
  t)`` per call.
- The specification's loop (§1.3.2: "While NextRun <= currentTime: NextRun = NextRun +
  interval", a calendar add from the previous value, as GregorianCalendar does). The monthly
  loop runs to the end (about 1,500 steps). The 1-second loop would take some 750 million
  steps: it runs for a bounded number of steps, and its time is that step cost times the
  exact number of steps needed (extrapolated, and reported as such).
- Cron and calendar jobs: `Job.next_after(t)` for the same 1,000 instants
  ("spread"), and chained (``next_after`` of the slot before, as the engine asks: 1,000
  slots in a row), for a few expressions each; target <= 20 µs.
- Loading a 10,000-job file (as `dump_config` writes it) of cron jobs, of calendar jobs and
  of interval jobs: `load_config`, best of 3 in one process; target: cron within 2x of
  interval.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import time
import timeit
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bench import _common as common

NAME = "next_after"
ZONE = "Europe/Berlin"
SECOND_START = datetime(2003, 5, 10, 1, 0)
MONTH_START = datetime(1900, 1, 31, 2, 30)
SPEC = "spec loop"


# (kind, expression): the expressions timed for cron and calendar jobs, Europe/Berlin.
EXPRESSIONS = [
    ("cron", "30 2 * * *"),
    ("cron", "*/15 * * * MON-FRI"),
    ("cron", "0 0 L * *"),
    ("calendar", "Mon..Fri 09:00"),
    ("calendar", "*:0/15"),
    ("calendar", "*-*~01 23:00"),
]
LOAD_KINDS = ("interval", "cron", "calendar")


def cases(smoke: bool) -> list[common.Case]:
    steps = 50_000 if smoke else 2_000_000
    out: list[common.Case] = []
    for kind, expression in EXPRESSIONS:
        out.append(
            {
                "key": f"jobscheduler/{kind} {expression}",
                "system": "jobscheduler",
                "job": kind,
                "expression": expression,
                "passes": 1 if smoke else 3,
            }
        )
    for kind in LOAD_KINDS:
        n = 300 if smoke else 10_000
        out.append({"key": f"load/{kind}", "system": "load", "job": kind, "n": n})
    for system in ("jobscheduler", "apscheduler", SPEC):
        for job in ("second", "month"):
            out.append(
                {
                    "key": f"{system}/{job}",
                    "system": system,
                    "job": job,
                    "steps": steps,
                    "passes": 2 if smoke else 20,
                }
            )
    return out


def _instants() -> list[datetime]:
    now = datetime.now(UTC).replace(microsecond=123456)
    return [now + timedelta(seconds=3.7 * i) for i in range(1000)]


def _best(call: Any, count: int, passes: int) -> float:
    """µs per call: the best of 5 timings of `passes` passes over `count` calls."""
    best = min(timeit.repeat(call, number=passes, repeat=5))
    return best / (passes * count) * 1e6


def run_case(case: common.Case) -> common.Measure:
    system, job = case["system"], case["job"]
    if system == "load":
        return _load(job, case["n"])
    passes = case["passes"]
    ts = _instants()
    if system == "jobscheduler" and job in ("cron", "calendar"):
        return _expression(job, case["expression"], ts, passes)
    if system == "jobscheduler":
        from jobscheduler import Interval, Job, Unit

        if job == "second":
            js = Job(
                "s",
                command="true",
                start=SECOND_START,
                interval=Interval(1, Unit.SECOND),
                timezone=ZONE,
            )
        else:
            js = Job(
                "m",
                command="true",
                start=MONTH_START,
                interval=Interval(1, Unit.MONTH),
                timezone=ZONE,
            )
        us = _best(lambda: [js.next_after(t) for t in ts], len(ts), passes)
        trigger = js.trigger
        steps = trigger.index_after(ts[0]) if trigger is not None else 0
        return {"us_per_call": us, "steps_needed": steps, "extrapolated": False}
    if system == "apscheduler":
        from apscheduler.triggers.cron import CronTrigger
        from apscheduler.triggers.interval import IntervalTrigger

        zone = ZoneInfo(ZONE)
        if job == "second":
            trig: Any = IntervalTrigger(seconds=1, start_date=SECOND_START, timezone=zone)
        else:
            trig = CronTrigger(day="last", hour=2, minute=30, start_date=MONTH_START, timezone=zone)
        us = _best(lambda: [trig.get_next_fire_time(None, t) for t in ts], len(ts), passes)
        return {"us_per_call": us, "extrapolated": False}
    return _spec_loop(job, case["steps"], ts[0])


def _expression(kind: str, expression: str, ts: list[datetime], passes: int) -> common.Measure:
    from jobscheduler import Job

    js = Job("x", command="true", timezone=ZONE, **{kind: expression})
    spread = _best(lambda: [js.next_after(t) for t in ts], len(ts), passes)

    def chained() -> None:
        slot: datetime | None = ts[0]
        for _ in range(1000):
            assert slot is not None
            slot = js.next_after(slot)

    chain = _best(chained, 1000, passes)
    return {"us_per_call": spread, "us_chained": chain}


def _load(kind: str, n: int) -> common.Measure:
    import tempfile

    from jobscheduler import Job
    from jobscheduler.config import dump_config, load_config
    from jobscheduler.model.catalog import Catalog

    def job(i: int) -> Job:
        fields: dict[str, Any] = {"command": ["backup", f"db{i}"], "timezone": ZONE}
        if kind == "cron":
            return Job(f"job-{i}", cron=f"{i % 60} {i % 24} * * *", **fields)
        if kind == "calendar":
            return Job(f"job-{i}", calendar=f"*-*-* {i % 24:02d}:{i % 60:02d}", **fields)
        start = datetime(2024, 1, 1, i % 24, i % 60)
        return Job(f"job-{i}", start=start, interval="1 day", **fields)

    text = dump_config(Catalog.build([job(i) for i in range(n)], []))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.yaml"
        path.write_text(text)
        best = min(timeit.repeat(lambda: load_config(path), number=1, repeat=3))
    return {"s_load": best, "us_per_job": best / n * 1e6}


def _spec_loop(job: str, bounded_steps: int, now: datetime) -> common.Measure:
    zone = ZoneInfo(ZONE)
    if job == "second":
        start = SECOND_START.replace(tzinfo=zone).astimezone(UTC)
        step = timedelta(seconds=1)
        needed = int((now - start) // step) + 1
        # Run the loop itself for `bounded_steps` steps, as if now were that far ahead.
        horizon = start + step * (bounded_steps - 1)
        began = time.perf_counter()
        nxt = start
        count = 0
        while nxt <= horizon:
            nxt = nxt + step
            count += 1
        took = time.perf_counter() - began
        per_step = took / count
        return {
            "us_per_call": per_step * needed * 1e6,
            "steps_needed": needed,
            "steps_run": count,
            "ns_per_step": per_step * 1e9,
            "extrapolated": True,
        }
    # Monthly: GregorianCalendar.add(MONTH, 1) on the previous value, on the wall clock.
    wall_now = now.astimezone(zone).replace(tzinfo=None)

    def loop() -> int:
        nxt = MONTH_START
        count = 0
        while nxt <= wall_now:
            year, month0 = divmod(nxt.year * 12 + nxt.month, 12)  # the next month
            day = min(nxt.day, _days(year, month0 + 1))
            nxt = nxt.replace(year=year, month=month0 + 1, day=day)
            count += 1
        return count

    needed = loop()
    best = min(timeit.repeat(loop, number=10, repeat=5)) / 10
    return {
        "us_per_call": best * 1e6,
        "steps_needed": needed,
        "steps_run": needed,
        "ns_per_step": best / needed * 1e9,
        "extrapolated": False,
    }


def _long(s: common.Stat) -> str:
    """A time given in µs, shown in seconds when it is that long."""
    if s.median < 1e5:
        return common.span(s, 1)
    seconds = common.Stat(s.median / 1e6, s.low / 1e6, s.high / 1e6, [v / 1e6 for v in s.values])
    return common.span(seconds, 1) + " s"


def _days(year: int, month: int) -> int:
    import calendar

    return calendar.monthrange(year, month)[1]


def main(argv: list[str] | None = None) -> int:
    parent = common.parent(__file__, __doc__ or NAME, run_case, cases, argv, timeout=300)
    if parent is None:
        return 0
    opts, _, measures, summary, started = parent
    labels = {"second": "1-second job from 2003", "month": "monthly job from 1900"}
    rows = []
    targets = []
    comparisons: dict[str, Any] = {}
    for job in ("second", "month"):
        ours = summary[f"jobscheduler/{job}"]
        aps = summary[f"apscheduler/{job}"]
        spec = summary[f"{SPEC}/{job}"]
        vs_aps = common.ratio(ours["us_per_call"].median, aps["us_per_call"].median)
        speedup = common.ratio(spec["us_per_call"].median, ours["us_per_call"].median)
        comparisons[job] = {"vs_aps": vs_aps, "spec_loop_vs_ours": speedup}
        extrapolated = any(m.get("extrapolated") for m in measures[f"{SPEC}/{job}"])
        steps = spec["steps_needed"].median
        rows += [
            [
                labels[job],
                "jobscheduler next_after",
                common.span(ours["us_per_call"], 2),
                f"{common.times(vs_aps)} APS",
            ],
            [labels[job], "apscheduler trigger", common.span(aps["us_per_call"], 2), ""],
            [
                labels[job],
                f"spec loop ({steps:,.0f} steps"
                + (
                    f"; {spec['steps_run'].median:,.0f} run, extrapolated)" if extrapolated else ")"
                ),
                _long(spec["us_per_call"]),
                f"{speedup:,.0f}x slower than ours",
            ],
        ]
        targets.append(
            common.Target(
                f"next_after, {labels[job]}", ours["us_per_call"].median, "<=", 10.0, "µs"
            )
        )
    for kind, expression in EXPRESSIONS:
        m = summary[f"jobscheduler/{kind} {expression}"]
        spread, chained = common.span(m["us_per_call"], 1), common.span(m["us_chained"], 1)
        rows.append([f"{kind} {expression}", "next_after", spread, f"chained: {chained} µs"])
        name = f"next_after, {kind} {expression}"
        targets.append(common.Target(name, m["us_per_call"].median, "<=", 20.0, "µs"))
    per_job = {kind: summary[f"load/{kind}"]["us_per_job"] for kind in LOAD_KINDS}
    for kind in LOAD_KINDS:
        vs = common.ratio(per_job[kind].median, per_job["interval"].median)
        rows.append(
            [f"10,000-job {kind} file", "load_config, µs/job", common.span(per_job[kind], 1),
             f"{common.times(vs)} interval"]
        )  # fmt: skip
    cron_vs = common.ratio(per_job["cron"].median, per_job["interval"].median)
    targets.append(common.Target("loading a cron file vs an interval one", cron_vs, "<=", 2.0, "x"))
    common.report(
        NAME,
        opts,
        "next_after for old jobs (µs per call; median (min–max) over fresh processes)",
        ["job", "how", "µs per call", "ratio"],
        rows,
        {"cases": {k: {"metrics": v} for k, v in summary.items()}, "comparisons": comparisons},
        targets,
        [
            "the 1-second spec loop is timed over a bounded number of steps and extrapolated to "
            "the steps it needs"
        ],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
