"""Several nodes on PostgreSQL: jobscheduler vs APScheduler 4, side by side in one run.

The same machine, the same PostgreSQL server (started by this script for the run with
``initdb``/``pg_ctl`` in a temporary directory, tests/pg_server.py, **fsync on**, TCP on
127.0.0.1), each case on a new database of it. 1,000 interval jobs every second for 60 s (every
job's slots on the whole second, all 1,000 due at once), each run a no-op that notes its start
(`bench._cluster_jobs`), on 1, 2 and 4 node processes sharing the database; then 2 nodes of
which one is killed with SIGKILL halfway (10 ms into a slot's burst, when claims are in
flight). Per case (bench/_cluster_run.py): runs/s, start lateness p50/p99 (start minus slot),
duplicates (a (job, slot) run twice), missed slots (never started before the nodes stop, 5 s
after the last slot), CPU seconds of the node processes and of the database's processes over
the 60 s. Also jobscheduler in memory (no store, 1 node) with the same jobs, for the target
"lateness p99 with a store within 2 ms of the in-memory scheduler", and an idle node of each
(1,000 daily jobs due tomorrow): its database's transactions per second (``pg_stat_database``).

- jobscheduler nodes: ``Scheduler(state="postgresql://…", node="nK")`` + ``add_jobs`` (the
  definitions in memory, the same in each node; the store's claims make a slot run once).
- APScheduler 4.0.0a6 nodes: ``AsyncScheduler`` with ``SQLAlchemyDataStore`` (asyncpg) and
  ``AsyncpgEventBroker`` on the same database, defaults otherwise; the schedules written once
  by a setup process before the nodes start. It runs with the interpreter of
  ``bench/.venv-aps4`` (APScheduler 3.11 is in the project's own environment for the other
  benchmarks), which the full run creates when missing (pip: ``apscheduler==4.0.0a6 sniffio
  sqlalchemy[asyncio]<2.1 asyncpg psutil``). ``--smoke`` uses it only when it is already there
  (creating it takes longer than the smoke run) and says so when it is not; ``--aps4 skip`` or
  ``--aps4 require`` decide outright.

``python bench/cluster.py`` (``make bench-cluster``: about 13 minutes, one repetition by
default; ``--reps N`` for more, alternating the order of the cases); ``--smoke``: 50 jobs for
5 s on 1–2 nodes (the test suite runs it). ``--extra-src DIR --extra-label TEXT``: also the
``jobscheduler/`` of another tree (say ``git archive BRANCH jobscheduler | tar -x -C DIR``) on
2 nodes with a kill, and idle, in the same run (about 3 min more). ``--lateness``: only
jobscheduler in memory and on PostgreSQL with 1 node, alternating, 5 repetitions by default
(about 12 min; ``bench/results/cluster_lateness.json``): the target "p99 within 2 ms of the
in-memory scheduler" against a run-to-run spread larger than that, with the difference of
each repetition's pair.

``--lateness --stores memory,sqlite,postgres --nodes 1,2,4 --slots 20``: the same lateness
cases over several stores (a SQLite file in the case's temporary directory: 1 node; its CPU
is all in the node) and PostgreSQL on several nodes, each slot count given (default 60),
and with ``--extra-src`` each case again on the other tree, right after it (results in
``bench/results/cluster_lateness.json``); the CPU per run is nodes + database. With the
memory store, the floor in the same run: a bare ``ThreadPoolExecutor(10)`` given the same
1,000 calls (each noting its start as the jobs do) at each whole second, no scheduler
(``bare ThreadPoolExecutor(10)``): what a pool of Python threads starts them in here.

``--limits``: only the limits cases (about 2 minutes; ``bench/results/cluster_limits.json``):
1,000 jobs every second, each run lasting 1.5 s (``async def``: runs hold no worker), for 6
s of slots, on 2 and 4 nodes, each shape twice in one run: without a limit, and with
``max_instances: 1`` and ``overlap: skip`` (decided in the claim over every node's runs).
Per case: claimed runs/s, lateness p50/p99, overlapping runs (a run started while another of
its job had not ended, from the runs' own start and end), slots recorded ``skipped``, slots
neither run nor recorded. Targets: 0 overlapping runs with the limit, and its lateness p99
within 2x of the same shape without it. With ``--extra-src``, each shape's pair again on the
other tree right after it (the ratio is taken within each tree's pair).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import argparse
import statistics
import subprocess
import time
from typing import Any

from bench import _cluster_run
from bench import _common as common

NAME = "cluster"
BENCH = Path(__file__).resolve().parent
APS4_VENV = BENCH / ".venv-aps4"
APS4_PACKAGES = [
    "apscheduler==4.0.0a6",
    "sniffio",  # 4.0.0a6 imports it without declaring it
    "sqlalchemy[asyncio]>=2.0,<2.1",
    "asyncpg",
    "psutil",
]
JS, APS, POOL = "jobscheduler", "apscheduler4", "pool"
LABEL = {JS: "jobscheduler", APS: "APScheduler 4.0.0a6", POOL: "bare ThreadPoolExecutor(10)"}


def aps4_python(mode: str) -> tuple[str | None, str]:
    """The APScheduler 4 interpreter (None when not used) and a sentence on where it is from."""
    python = APS4_VENV / "bin" / "python"
    if mode == "skip":
        return None, "APScheduler 4 not measured (--aps4 skip)"
    if _aps4_works(python):
        return str(python), f"APScheduler 4 from {APS4_VENV.relative_to(BENCH.parent)}"
    if mode == "auto":
        return None, (
            f"APScheduler 4 NOT measured: {APS4_VENV.relative_to(BENCH.parent)} is missing "
            "(the smoke run does not create it; `make bench-cluster` does)"
        )
    print(f"creating {APS4_VENV} with {' '.join(APS4_PACKAGES)}", file=sys.stderr)
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(APS4_VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *APS4_PACKAGES],
            check=True,
            timeout=900,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        raise SystemExit(f"could not create {APS4_VENV}: {exc}") from None
    if not _aps4_works(python):
        raise SystemExit(f"{APS4_VENV} was created but APScheduler 4.0.0a6 does not import")
    return str(python), f"APScheduler 4 from {APS4_VENV.relative_to(BENCH.parent)} (created)"


def _aps4_works(python: Path) -> bool:
    if not python.exists():
        return False
    check = (
        "import importlib.metadata as m, apscheduler, sniffio, asyncpg, psutil, "
        "sqlalchemy.ext.asyncio; assert m.version('apscheduler') == '4.0.0a6'"
    )
    return subprocess.run([str(python), "-c", check], capture_output=True).returncode == 0


def lateness_cases(
    smoke: bool,
    pg: str,
    postmaster: int,
    stores: list[str],
    nodes: list[int],
    slots: int,
    extra: tuple[str, str] | None,
) -> list[common.Case]:
    """``--lateness --stores``: each store on 1 node, PostgreSQL also on each of `nodes`;
    each case followed by the same on the tree `extra` when given."""
    base = {
        "kind": "slots",
        "system": JS,
        "jobs": 50 if smoke else 1000,
        "slots": slots,
        "grace": 1 if smoke else 5,
        "lead": 3 if smoke else 6,
        "setup_lead": 0,
        "pg": pg,
        "postmaster": postmaster,
        "aps_python": None,
        "kill": False,
    }
    out: list[common.Case] = []
    for store in stores:
        for count in sorted({1, *nodes}) if store == "postgres" else [1]:
            case = {**base, "key": f"{JS}/{store}/{count}", "store": store, "nodes": count}
            if not smoke:  # each node defines its 1,000 jobs as it starts: more nodes, longer
                case["lead"] = 6 * count
            out.append(case)
            if extra:
                key = f"{JS}[{extra[1]}]/{store}/{count}"
                out.append({**case, "key": key, "src": extra[0], "label": extra[1]})
            if store == "memory":  # the floor: the same calls on a bare pool, no scheduler
                out.append({**case, "key": f"{POOL}/{store}/1", "system": POOL})
    return out


def cases(
    smoke: bool,
    pg: str,
    postmaster: int,
    aps: str | None,
    extra: tuple[str, str] | None = None,
    lateness: bool = False,
) -> list[common.Case]:
    """The cases in the order of a repetition; `extra` (source directory, label): also
    jobscheduler from another tree, on 2 nodes with a kill and idle; `lateness`: only
    jobscheduler in memory and on PostgreSQL, 1 node each."""
    base = {
        "kind": "slots",
        "jobs": 50 if smoke else 1000,
        "slots": 5 if smoke else 60,
        "grace": 1 if smoke else 5,
        "lead": 3 if smoke else 6,
        "setup_lead": 2 if smoke else 12,
        "pg": pg,
        "postmaster": postmaster,
        "aps_python": aps,
    }
    shapes = [(1, False), (2, True)] if smoke else [(1, False), (2, False), (4, False), (2, True)]
    out: list[common.Case] = [
        {**base, "key": f"{JS}/memory/1", "system": JS, "store": "memory", "nodes": 1}
    ]
    if lateness:
        return [*out, {**out[0], "key": f"{JS}/postgres/1", "store": "postgres", "kill": False}]
    for nodes, kill in shapes:
        for system in [JS, APS] if aps else [JS]:
            if smoke and nodes == 1:
                continue  # the smoke run: memory, then 2 nodes with a kill, to stay short
            suffix = "+kill" if kill else ""
            out.append(
                {
                    **base,
                    "key": f"{system}/postgres/{nodes}{suffix}",
                    "system": system,
                    "store": "postgres",
                    "nodes": nodes,
                    "kill": kill,
                }
            )
            if extra and system == JS and kill:
                out.append(
                    {
                        **out[-1],
                        "key": f"{JS}[{extra[1]}]/postgres/{nodes}{suffix}",
                        "src": extra[0],
                        "label": extra[1],
                    }
                )
    out.append(
        {
            **base,
            "key": "idle",
            "kind": "idle",
            "jobs": 100 if smoke else 1000,
            "settle": 1.0 if smoke else 12.0,
            "window": 2.0 if smoke else 20.0,
        }
    )
    if extra:
        idle = out[-1]
        key = f"idle[{extra[1]}]"
        out.append({**idle, "key": key, "src": extra[0], "label": extra[1], "aps_python": None})
    return out


def limit_cases(
    smoke: bool, pg: str, postmaster: int, extra: tuple[str, str] | None = None
) -> list[common.Case]:
    """The limits cases (see the module notes), alternating without and with the limit;
    `extra` (source directory, label): each pair again on the other tree, right after it."""
    base = {
        "kind": "slots",
        "system": JS,
        "store": "postgres",
        "jobs": 50 if smoke else 1000,
        "slots": 3 if smoke else 6,
        "grace": 3,
        "lead": 10,  # seconds for the nodes to start: see below
        "setup_lead": 0,
        "pg": pg,
        "postmaster": postmaster,
        "aps_python": None,
        "run_s": 1.5,
        "kill": False,
    }
    out: list[common.Case] = []
    trees = [(JS, None, None)]
    if extra:
        trees.append((f"{JS}[{extra[1]}]", extra[0], extra[1]))
    for nodes in (2,) if smoke else (2, 4):
        for system, src, label in trees:
            for limit in (False, True):
                what = "limited" if limit else "unlimited"
                key = f"{system}/postgres/{nodes}/{what}"
                # Each node defines its 1,000 jobs as it starts: on a loaded machine 4 of
                # them need more than 15 s before the first slot.
                lead = base["lead"] if smoke else 10 + 6 * nodes
                case = {**base, "key": key, "nodes": nodes, "limit": limit, "lead": lead}
                if src is not None:
                    case.update(src=src, label=label)
                out.append(case)
    return out


def _limits_report(
    opts: common.Options,
    all_cases: list[common.Case],
    measures: dict[str, list[common.Measure]],
    started: float,
    version: str,
) -> int:
    summary = common.summary(measures)
    rows = []
    targets: list[common.Target] = []
    for case in all_cases:
        key = common.key_of(case)
        s = summary[key]
        nodes = case["nodes"]
        what = "max_instances: 1, overlap: skip" if case["limit"] else "no limit"
        tree = f" ({case['label']})" if case.get("label") else ""
        rows.append(
            [
                f"{case['jobs']:,} jobs, {case['run_s']} s runs every 1 s, {nodes} nodes, "
                f"{what}{tree}",
                common.span(s["runs_per_s"], 0),
                common.span(s["late_p50_ms"], 1),
                common.span(s["late_p99_ms"], 1),
                common.span(s["overlapping"], 0),
                common.span(s["skipped"], 0),
                common.span(s["missed"], 0),
                common.span(s["node_cpu_pct"], 0),
                common.span(s["db_cpu_pct"], 0),
            ]
        )
        if case["limit"]:
            free = summary[key.replace("/limited", "/unlimited")]["late_p99_ms"].median
            targets.append(
                common.Target(f"overlapping runs, {key}", s["overlapping"].median, "<=", 0, "runs")
            )
            targets.append(
                common.Target(
                    f"lateness p99 with the limit / without it, {nodes} nodes{tree}",
                    common.ratio(s["late_p99_ms"].median, free),
                    "<=",
                    2.0,
                    "x",
                )
            )
    notes = [
        f"PostgreSQL {version} started for this run (fsync on, TCP on 127.0.0.1)",
        "runs/s: runs started within the window of slots; skipped: slots the store recorded "
        "skipped; missed: slots neither run nor recorded skipped",
    ]
    notes += _node_warnings(all_cases, measures)
    common.report(
        f"{NAME}_limits",
        opts,
        "max_instances: 1 across nodes on PostgreSQL: with and without the limit",
        [
            "case",
            "runs/s",
            "lateness p50 ms",
            "p99 ms",
            "overlapping",
            "skipped",
            "missed",
            "nodes CPU %",
            "DB CPU %",
        ],
        rows,
        {
            "cases": _cases_json(all_cases, summary, measures),
        },
        targets,
        notes,
        started,
    )
    return 0


def _label(case: common.Case) -> str:
    label = LABEL[case["system"]]
    return f"{label} ({case['label']})" if case.get("label") else label


def _row(case: common.Case, s: dict[str, common.Stat]) -> list[str]:
    nodes = case["nodes"]
    where = {"memory": "in memory", "sqlite": "SQLite"}.get(case["store"], "PostgreSQL")
    what = f"{_label(case)}, {where}, {nodes} node{'s' if nodes > 1 else ''}"
    if case["system"] == POOL:
        what = f"{_label(case)}: the floor, no scheduler"
    if case.get("kill"):
        what += ", 1 killed at 30 s" if case["slots"] == 60 else ", 1 killed halfway"
    missed = common.span(s["missed"], 0)
    if "missed_after_kill" in s:
        missed += f" ({common.num(s['missed_after_kill'].median, 0)} after the kill)"
    return [
        what,
        common.span(s["runs_per_s"], 0),
        common.span(s["late_p50_ms"], 1),
        common.span(s["late_p99_ms"], 1),
        common.span(s["duplicates"], 0),
        missed,
        common.span(s["node_cpu_pct"], 0),
        common.span(s["db_cpu_pct"], 0),
        common.span(s["cpu_us_per_run"], 0),
    ]


def _parse(
    argv: list[str] | None,
) -> tuple[common.Options, str, tuple[str, str] | None, bool, bool, argparse.Namespace]:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--aps4", choices=("auto", "skip", "require"), default="default")
    own.add_argument("--lateness", action="store_true")
    own.add_argument("--stores", default=None, help="--lateness: memory,sqlite,postgres")
    own.add_argument("--nodes", default="1", help="--lateness --stores: PostgreSQL's nodes")
    own.add_argument("--slots", type=int, default=60, help="--lateness --stores: seconds")
    own.add_argument("--limits", action="store_true")
    own.add_argument("--extra-src", default=None)
    own.add_argument("--extra-label", default="other")
    mine, args = own.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    aps_mode = mine.aps4
    extra = None
    if mine.extra_src:
        if not (Path(mine.extra_src) / "jobscheduler" / "__init__.py").exists():
            own.error(f"--extra-src {mine.extra_src}: no jobscheduler/__init__.py there")
        extra = (str(Path(mine.extra_src).resolve()), mine.extra_label)
    opts = common.options(__doc__ or NAME, args)
    if not opts.smoke and not any(a == "--reps" or a.startswith("--reps=") for a in args):
        opts.reps = 5 if mine.lateness else 1  # 13 minutes a repetition: one unless asked
    if aps_mode == "default":
        quick = mine.lateness or mine.limits
        aps_mode = "skip" if quick else "auto" if opts.smoke else "require"
    if mine.stores is not None:
        unknown = set(mine.stores.split(",")) - {"memory", "sqlite", "postgres"}
        if unknown or not mine.lateness:
            own.error("--stores: with --lateness, a list of memory, sqlite, postgres")
    return opts, aps_mode, extra, mine.lateness, mine.limits, mine


def _cases_json(
    cases: list[common.Case],
    summary: dict[str, dict[str, common.Stat]],
    measures: dict[str, list[common.Measure]],
) -> dict[str, Any]:
    """The results file's cases: each case's options (no server URL or interpreter path),
    its summary and its runs, by key."""
    return {
        common.key_of(c): {
            "case": {k: v for k, v in c.items() if k not in ("pg", "aps_python")},
            "metrics": summary[common.key_of(c)],
            "runs": measures[common.key_of(c)],
        }
        for c in cases
    }


def _node_warnings(
    cases: list[common.Case], measures: dict[str, list[common.Measure]]
) -> list[str]:
    """A note for each node that logged a WARNING or ERROR line (its first four)."""
    notes = []
    for case in cases:
        for m in measures[common.key_of(case)]:
            for err in m.get("node_errors") or []:
                lines = [ln for ln in err.splitlines() if ln.startswith(("WARNING", "ERROR"))]
                if lines:
                    notes.append(f"{case['key']}: a node logged: " + " | ".join(lines[:4])[:400])
    return notes


def main(argv: list[str] | None = None) -> int:
    opts, aps_mode, extra, lateness, limits, mine = _parse(argv)
    if opts.child is not None:
        common.child_main(_cluster_run.run_case, opts.child)
        return 0
    import pg_server

    started = time.perf_counter()
    if mine.stores is not None:
        server = pg_server.start(fsync=True)
        try:
            postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
            stores = mine.stores.split(",")
            nodes = [int(n) for n in mine.nodes.split(",")]
            slots = 3 if opts.smoke else mine.slots
            all_cases = lateness_cases(
                opts.smoke, server.url(), postmaster, stores, nodes, slots, extra
            )
            measures = common.repeat(__file__, all_cases, opts.reps, quiet=opts.quiet, timeout=300)
            version = server.execute("SHOW server_version")[0][0]
        finally:
            server.stop()
        return _stores_report(opts, all_cases, measures, started, str(version))
    if limits:
        server = pg_server.start(fsync=True)
        try:
            postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
            all_cases = limit_cases(opts.smoke, server.url(), postmaster, extra)
            measures = common.repeat(__file__, all_cases, opts.reps, quiet=opts.quiet, timeout=300)
            version = server.execute("SHOW server_version")[0][0]
        finally:
            server.stop()
        return _limits_report(opts, all_cases, measures, started, str(version))
    aps, aps_note = aps4_python(aps_mode)
    print(aps_note, file=sys.stderr)
    server = pg_server.start(fsync=True)
    try:
        postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
        all_cases = cases(opts.smoke, server.url(), postmaster, aps, extra, lateness)
        measures = common.repeat(__file__, all_cases, opts.reps, quiet=opts.quiet, timeout=300)
        version = server.execute("SHOW server_version")[0][0]
    finally:
        server.stop()
    name = f"{NAME}_lateness" if lateness else NAME
    return _report(name, opts, all_cases, measures, started, aps, aps_note, str(version))


def _stores_report(
    opts: common.Options,
    all_cases: list[common.Case],
    measures: dict[str, list[common.Measure]],
    started: float,
    version: str,
) -> int:
    summary = common.summary(measures)
    rows = [_row(c, summary[common.key_of(c)]) for c in all_cases]
    targets: list[common.Target] = []
    limit = {"memory": 20.0, "sqlite": 30.0, "postgres": 30.0}
    for case in all_cases:
        if case.get("src") or case["system"] == POOL:
            continue
        key = common.key_of(case)
        s = summary[key]
        targets.append(
            common.Target(
                f"lateness p99, {key}", s["late_p99_ms"].median, "<=", limit[case["store"]], "ms"
            )
        )
        if case["store"] == "postgres":
            targets.append(
                common.Target(f"CPU per run, {key}", s["cpu_us_per_run"].median, "<=", 100, "µs")
            )
        targets.append(common.Target(f"missed, {key}", s["missed"].median, "<=", 0, "runs"))
    notes = [
        f"PostgreSQL {version} started for this run (fsync on, TCP on 127.0.0.1)",
        "CPU µs/run is nodes + database over the runs (SQLite: the node's process only)",
    ]
    if any(case["system"] == POOL for case in all_cases):
        notes.append(
            "bare ThreadPoolExecutor(10): the floor, no scheduler: the same 1,000 calls "
            "(each noting its start as the jobs do) submitted at each whole second"
        )
    notes += _node_warnings(all_cases, measures)
    common.report(
        f"{NAME}_lateness",
        opts,
        "1,000 jobs due every second: lateness and CPU per run by store and nodes",
        [
            "case",
            "runs/s",
            "lateness p50 ms",
            "p99 ms",
            "dups",
            "missed",
            "nodes CPU %",
            "DB CPU %",
            "CPU µs/run",
        ],
        rows,
        {
            "cases": _cases_json(all_cases, summary, measures),
        },
        targets,
        notes,
        started,
    )
    return 0


def _report(
    name: str,
    opts: common.Options,
    all_cases: list[common.Case],
    measures: dict[str, list[common.Measure]],
    started: float,
    aps: str | None,
    aps_note: str,
    version: str,
) -> int:
    summary = common.summary(measures)
    slot_cases = [c for c in all_cases if c["kind"] == "slots"]
    rows = [_row(c, summary[common.key_of(c)]) for c in slot_cases]
    targets: list[common.Target] = []
    memory = summary[f"{JS}/memory/1"]["late_p99_ms"].median
    for case in [c for c in all_cases if c["kind"] == "idle"]:
        idle = summary[common.key_of(case)]
        for system in [JS, APS] if case["aps_python"] else [JS]:
            label = _label({**case, "system": system})
            rows.append(
                [
                    f"{label}, idle node ({case['jobs']:,} jobs due tomorrow): "
                    "store transactions/s",
                    common.span(idle[f"{system}_queries_per_s"], 2),
                    "",
                    "",
                    "",
                    "",
                    common.span(idle[f"{system}_cpu_pct"], 2),
                    "",
                    "",
                ]
            )
        targets.append(
            common.Target(
                f"an idle node's store transactions/s, {_label({**case, 'system': JS})}",
                idle[f"{JS}_queries_per_s"].median,
                "<=",
                1.0,
                "queries/s",
            )
        )
    for case in slot_cases:
        if case["system"] == JS and case["store"] == "postgres" and case["nodes"] == 1:
            key = common.key_of(case)
            targets.append(
                common.Target(
                    f"lateness p99 with a store minus in memory, {key}",
                    summary[key]["late_p99_ms"].median - memory,
                    "<=",
                    2.0,
                    "ms",
                )
            )
    for case in slot_cases:
        if case["system"] == JS and case["store"] == "postgres":
            key = common.key_of(case)
            dups = summary[key]["duplicates"].median
            targets.append(common.Target(f"duplicates, {key}", dups, "<=", 0, "runs"))
            if not case.get("kill"):
                targets.append(
                    common.Target(f"missed, {key}", summary[key]["missed"].median, "<=", 0, "runs")
                )
    ratios: dict[str, Any] = {}
    if aps:
        for case in slot_cases:
            if case["system"] != APS:
                continue
            key = common.key_of(case)
            if key.replace(APS, JS) not in summary:
                continue
            mine = summary[key.replace(APS, JS)]
            theirs = summary[key]
            ratios[key.replace(f"{APS}/", "")] = {
                "runs_per_s": common.ratio(mine["runs_per_s"].median, theirs["runs_per_s"].median),
                "late_p99": common.ratio(theirs["late_p99_ms"].median, mine["late_p99_ms"].median),
                "cpu_per_run": common.ratio(
                    theirs["cpu_us_per_run"].median, mine["cpu_us_per_run"].median
                ),
            }
    notes = [
        f"PostgreSQL {version} started for this run (fsync on, TCP on 127.0.0.1); {aps_note}",
        "CPU % is of one core over the window of slots (the machine has "
        f"{common.machine()['nproc']}); CPU µs/run is nodes + database over the runs",
        "a kill case's missed slots count runs claimed by the killed node and never started",
    ]
    for case in slot_cases:
        key = common.key_of(case)
        states = [m.get("store_states") for m in measures[key] if m.get("store_states")]
        if case.get("kill") and states:
            notes.append(f"{key}: jobscheduler's store after the run: {states}")
        for m in measures[key]:
            for err in m.get("node_errors") or []:
                lines = [ln for ln in err.splitlines() if ln.startswith(("WARNING", "ERROR"))]
                if lines:
                    notes.append(f"{key}: a node logged: " + " | ".join(lines[:4])[:400])
    paired = zip(measures[f"{JS}/memory/1"], measures.get(f"{JS}/postgres/1", []), strict=False)
    differences = [round(pg["late_p99_ms"] - mem["late_p99_ms"], 1) for mem, pg in paired]
    if len(differences) > 1:
        notes.append(
            "p99 lateness, PostgreSQL minus memory, each repetition's pair (ms): "
            f"{differences}; median {statistics.median(differences):.1f}"
        )
    for key, r in ratios.items():
        notes.append(
            f"{key}: jobscheduler {common.times(r['runs_per_s'])} the runs/s, APScheduler 4 "
            f"{common.times(r['late_p99'])} the p99 lateness and {common.times(r['cpu_per_run'])} "
            "the CPU per run"
        )
    common.report(
        name,
        opts,
        "Several nodes on PostgreSQL: jobscheduler vs APScheduler 4",
        [
            "case",
            "runs/s",
            "lateness p50 ms",
            "p99 ms",
            "dups",
            "missed",
            "nodes CPU %",
            "DB CPU %",
            "CPU µs/run",
        ],
        rows,
        {
            "aps4": aps_note,
            "ratios": ratios,
            "cases": _cases_json(all_cases, summary, measures),
        },
        targets,
        notes,
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
