"""Adding and loading jobs: µs and RSS per job; start-to-running for a YAML file.

Adding, to a running scheduler, N daily jobs whose first slot is in the future:
- ``add_job`` one at a time, in memory (``Scheduler()``), against APScheduler's ``add_job``
  one at a time (which builds its job inside the call: compared with jobscheduler's
  construct + add). A case stops early when it passes its time budget; it then reports how far
  it got and the cost of its last 1,000 adds;
- ``add_jobs`` of all N at once, in memory and with a file (one write).
RSS per job: the growth of the process's RSS from before the jobs were built to after they
were added, over the jobs added.

Loading: a YAML file of N jobs written beforehand; the time from ``Scheduler(path)`` to
``start()`` returning, then the parts of reading it, timed one by one with the garbage
collector paused (as jobscheduler pauses it while reading a file): PyYAML's C parser
producing events (the parser's own share), the C safe loader building Python objects,
jobscheduler's node composer, the whole ``parse_config``; and, to say what a faster parser
would give, rapidyaml (``ryml``, when installed) parsing the same text into its tree and
``json.loads`` of the same data.

The 100,000-job file (about 12 MiB, 1.3 million YAML nodes) is within jobscheduler's limits
(32 MiB, 2,000,000 nodes once aliases are expanded).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gc
import json
import math
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import _common as common
from bench import _jobs
from bench import _systems as systems

NAME = "adding"
CHUNK = 1_000  # adds per timed chunk (fewer for smoke sizes)
START = datetime(2031, 1, 1, tzinfo=UTC)
FILE_ADD_LARGEST = 30_000  # add_jobs with a file at the largest size (the cost per job is flat)


def cases(smoke: bool) -> list[common.Case]:
    sizes = (300,) if smoke else (10_000, 100_000)
    budget = 5.0 if smoke else 10.0
    out: list[common.Case] = []
    for n in sizes:
        big = n >= 50_000
        filed = FILE_ADD_LARGEST if big else n
        out += [
            {
                "key": f"jobscheduler/add_job/memory/{n}",
                "system": "jobscheduler",
                "kind": "add_job",
                "n": n,
                "size": n,
                "budget": budget,
            },
            {
                "key": f"apscheduler/add_job/memory/{n}",
                "system": "apscheduler",
                "kind": "add_job",
                "n": n,
                "size": n,
                "budget": budget,
            },
            {
                "key": f"jobscheduler/add_jobs/memory/{n}",
                "system": "jobscheduler",
                "kind": "add_jobs",
                "n": n,
                "size": n,
                "file": False,
            },
            {
                "key": f"jobscheduler/add_jobs/file/{filed}",
                "system": "jobscheduler",
                "kind": "add_jobs",
                "n": filed,
                "size": n,
                "file": True,
            },
            {
                "key": f"jobscheduler/load/{n}",
                "system": "jobscheduler",
                "kind": "load",
                "n": n,
                "size": n,
                "parse_config": not big,
            },
        ]
    return out


def _start(i: int) -> datetime:
    return START + timedelta(seconds=i)


def run_case(case: common.Case) -> common.Measure:
    common.quiet_logs()
    if case["kind"] == "add_job":
        return _add_one_by_one(case)
    if case["kind"] == "add_jobs":
        return _add_all(case)
    return _load(case)


def _add_one_by_one(case: common.Case) -> common.Measure:
    n, budget = case["n"], case["budget"]
    chunk = CHUNK if n >= 10 * CHUNK else max(1, n // 10)
    ours = case["system"] == "jobscheduler"
    scheduler = systems.js_scheduler() if ours else systems.aps_scheduler()
    scheduler.start()
    gc.collect()
    rss0 = common.rss_bytes()
    perf = time.perf_counter
    add_total = 0.0
    chunks: list[float] = []
    chunk_began = began = perf()
    added = 0
    for i in range(n):
        if ours:
            job = systems.js_future(f"j{i}", _start(i))
            t = perf()
            scheduler.add_job(job)
            add_total += perf() - t
        else:
            t = perf()
            scheduler.add_job(_jobs.noop, "interval", days=1, start_date=_start(i), id=f"j{i}")
            add_total += perf() - t
        added += 1
        if added % chunk == 0:
            now = perf()
            chunks.append(now - chunk_began)
            chunk_began = now
            if now - began > budget:
                break
    total = perf() - began
    gc.collect()
    rss1 = common.rss_bytes()
    scheduler.shutdown(wait=False)
    return {
        "added": added,
        "complete": added == n,
        "us_per_job": total / added * 1e6,  # construct + add (APScheduler: its add_job)
        "add_us_per_job": add_total / added * 1e6,
        "first_chunk_us": chunks[0] / chunk * 1e6 if chunks else math.nan,
        "last_chunk_us": chunks[-1] / chunk * 1e6 if chunks else math.nan,
        "rss_per_job": (rss1 - rss0) / added,
    }


def _add_all(case: common.Case) -> common.Measure:
    n = case["n"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.yaml"
        scheduler = systems.js_scheduler(config_path=path if case["file"] else None)
        scheduler.start()
        gc.collect()
        rss0 = common.rss_bytes()
        began = time.perf_counter()
        jobs = [systems.js_future(f"j{i}", _start(i)) for i in range(n)]
        built = time.perf_counter()
        scheduler.add_jobs(jobs)
        done = time.perf_counter()
        del jobs
        gc.collect()
        rss1 = common.rss_bytes()
        size = path.stat().st_size if case["file"] else 0
        scheduler.shutdown(wait=False)
    return {
        "construct_us_per_job": (built - began) / n * 1e6,
        "add_us_per_job": (done - built) / n * 1e6,
        "add_s": done - built,
        "us_per_job": (done - began) / n * 1e6,
        "rss_per_job": (rss1 - rss0) / n,
        "file_mb": size / 1e6,
    }


def job_yaml(i: int) -> str:
    """One job exactly as dump_config writes it (a test checks), 100 times faster."""
    return (
        f"  j{i}:\n"
        f"    type: internal\n"
        f"    command: bench._jobs:noop\n"
        f"    start: {_start(i).strftime('%Y-%m-%d %H:%M:%S')}\n"
        f"    interval: 1 day\n"
        f"    timezone: UTC\n"
    )


def write_file(path: Path, n: int) -> None:
    path.write_text("jobs:\n" + "\n".join(job_yaml(i) for i in range(n)))


def _load(case: common.Case) -> common.Measure:
    import yaml

    from jobscheduler.config import parse_config
    from jobscheduler.config.yamlnodes import compose

    n = case["n"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.yaml"
        write_file(path, n)
        gc.collect()
        rss0 = common.rss_bytes()
        t0 = time.perf_counter()
        scheduler = systems.js_scheduler(config_path=path)
        t1 = time.perf_counter()
        scheduler.start()
        t2 = time.perf_counter()
        jobs = len(scheduler.jobs)
        rss1 = common.rss_bytes()
        scheduler.shutdown(wait=False)
        del scheduler
        text = path.read_text()
    gc.collect()
    parts: dict[str, float] = {}

    def timed(name: str, action: Any) -> Any:
        began = time.perf_counter()
        result = action()
        parts[name] = time.perf_counter() - began
        return result

    # Timed with the cyclic collector paused, as jobscheduler itself reads a file: otherwise
    # full collections over the growing tree inflate the composer's share several-fold.
    gc.disable()
    timed("yaml_events_s", lambda: sum(1 for _ in yaml.parse(text, Loader=yaml.CSafeLoader)))
    data = timed("yaml_c_load_s", lambda: yaml.load(text, Loader=yaml.CSafeLoader))
    timed("compose_s", lambda: compose(text))
    if case.get("parse_config", True):  # about as long as Scheduler(path): skipped when big
        timed("parse_config_s", lambda: parse_config(text))
    else:
        parts["parse_config_s"] = math.nan
    as_json = json.dumps(data, default=str)
    timed("json_s", lambda: json.loads(as_json))
    try:
        import ryml

        raw = text.encode()
        timed("ryml_s", lambda: ryml.parse_in_arena(raw))
    except ImportError:
        parts["ryml_s"] = math.nan
    finally:
        gc.enable()
    total = t2 - t0
    return {
        "jobs": jobs,
        "file_mb": len(text.encode()) / 1e6,
        "start_to_running_s": total,
        "scheduler_init_s": t1 - t0,
        "start_s": t2 - t1,
        "rss_per_job": (rss1 - rss0) / n,
        **parts,
        "parser_share": parts["yaml_events_s"] / total,
        "compose_share": parts["compose_s"] / total,
        # compose (libyaml events -> located nodes) replaced by a parser as fast as rapidyaml
        "with_fast_parser_s": total - parts["compose_s"] + parts["ryml_s"],
    }


# -- the parent -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parent = common.parent(__file__, __doc__ or NAME, run_case, cases, argv, timeout=600)
    if parent is None:
        return 0
    opts, all_cases, _measures, summary, started = parent
    rows: list[list[str]] = []
    targets: list[common.Target] = []
    notes: list[str] = []
    comparisons: dict[str, Any] = {}
    sizes = sorted({c["size"] for c in all_cases})
    for n in sizes:
        filed_n = next(c["n"] for c in all_cases if c["size"] == n and c.get("file"))
        ours = summary[f"jobscheduler/add_job/memory/{n}"]
        aps = summary[f"apscheduler/add_job/memory/{n}"]
        bulk = summary[f"jobscheduler/add_jobs/memory/{n}"]
        filed = summary[f"jobscheduler/add_jobs/file/{filed_n}"]
        load = summary[f"jobscheduler/load/{n}"]
        vs_aps = common.ratio(ours["us_per_job"].median, aps["us_per_job"].median)
        rss_vs_aps = common.ratio(ours["rss_per_job"].median, aps["rss_per_job"].median)
        comparisons[str(n)] = {"add_job_vs_aps": vs_aps, "rss_vs_aps": rss_vs_aps}
        reached = ours["added"].median
        partial = "" if reached >= n else f" (budget: {reached:,.0f} added)"
        aps_partial = "" if aps["added"].median >= n else f" ({aps['added'].median:,.0f} added)"
        filed_label = "" if filed_n == n else f" ({filed_n:,} jobs)"
        rows += [
            [
                f"{n:,}",
                "jobscheduler add_job, memory" + partial,
                common.span(ours["us_per_job"], 1),
                common.span(ours["add_us_per_job"], 1),
                common.span(ours["last_chunk_us"], 1),
                common.span(ours["rss_per_job"], 0),
                f"{common.times(vs_aps)} APS time, {common.times(rss_vs_aps)} APS RSS",
            ],
            [
                f"{n:,}",
                "apscheduler add_job, memory" + aps_partial,
                common.span(aps["us_per_job"], 1),
                "",
                common.span(aps["last_chunk_us"], 1),
                common.span(aps["rss_per_job"], 0),
                "",
            ],
            [
                f"{n:,}",
                "jobscheduler add_jobs, memory",
                common.span(bulk["us_per_job"], 1),
                common.span(bulk["add_us_per_job"], 1),
                "",
                common.span(bulk["rss_per_job"], 0),
                f"add_jobs {common.span(bulk['add_s'], 2)} s",
            ],
            [
                f"{n:,}",
                "jobscheduler add_jobs, file" + filed_label,
                common.span(filed["us_per_job"], 1),
                common.span(filed["add_us_per_job"], 1),
                "",
                common.span(filed["rss_per_job"], 0),
                f"add_jobs {common.span(filed['add_s'], 2)} s, {filed['file_mb'].median:.1f} MB",
            ],
        ]
        targets += [
            common.Target(
                f"add_job to a running in-memory scheduler, {n:,} jobs (add only)",
                ours["add_us_per_job"].median,
                "<=",
                15.0,
                "µs/job",
                "" if reached >= n else f"only {reached:,.0f} added in the budget",
            ),
            common.Target(
                f"RSS per job, {n:,} jobs added in memory",
                ours["rss_per_job"].median,
                "<=",
                500.0,
                "bytes",
            ),
        ]
        if n == 10_000 or opts.smoke:
            targets.append(
                common.Target(
                    f"add_jobs of {n:,} jobs, file-backed", filed["add_s"].median, "<=", 2.0, "s"
                )
            )
            targets.append(
                common.Target(
                    f"start-to-running, {n:,}-job file",
                    load["start_to_running_s"].median,
                    "<=",
                    2.0,
                    "s",
                )
            )
        load_rows = [
            ("start to running (Scheduler(path) + start())", "start_to_running_s"),
            ("  of which Scheduler(path)", "scheduler_init_s"),
            ("  of which start()", "start_s"),
            ("PyYAML C parser, events only", "yaml_events_s"),
            ("PyYAML C safe loader (yaml.load)", "yaml_c_load_s"),
            ("jobscheduler compose (events -> nodes)", "compose_s"),
            ("jobscheduler parse_config (all checks)", "parse_config_s"),
            ("rapidyaml parse (ryml)", "ryml_s"),
            ("json.loads of the same data", "json_s"),
            ("start to running with compose at ryml speed", "with_fast_parser_s"),
        ]
        for label, metric in load_rows:
            if math.isnan(load[metric].median):
                continue  # not measured at this size
            share = common.ratio(load[metric].median, load["start_to_running_s"].median)
            rows.append(
                [
                    f"{n:,}",
                    f"load: {label}",
                    common.span(load[metric], 3) + " s",
                    "",
                    "",
                    common.span(load["rss_per_job"], 0) if metric == "start_to_running_s" else "",
                    f"{share * 100:.0f}% of start-to-running",
                ]
            )
    if any(c.get("file") and c["n"] != c["size"] for c in all_cases):
        notes.append(
            f"add_jobs with a file at the largest size adds {FILE_ADD_LARGEST:,} jobs (its cost "
            "per job is flat)"
        )
    if any(not c.get("parse_config", True) for c in all_cases):
        notes.append(
            "parse_config alone is timed on the smaller file only (it is about "
            "Scheduler(path)'s time)"
        )
    budgeted = [c for c in all_cases if c["kind"] == "add_job"]
    if budgeted:
        notes.append(
            f"add_job one at a time stops after {budgeted[0]['budget']:g} s; 'last chunk' is the "
            "cost per add over its last 1,000 adds (a cost growing with the number of jobs shows "
            "there)"
        )
    common.report(
        NAME,
        opts,
        "Adding and loading jobs (median (min–max) over fresh processes)",
        ["N", "case", "µs/job", "add µs/job", "last chunk µs/add", "RSS B/job", "notes"],
        rows,
        {"cases": {k: {"metrics": v} for k, v in summary.items()}, "comparisons": comparisons},
        targets,
        notes,
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
