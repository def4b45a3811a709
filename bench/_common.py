"""What every benchmark script shares: options, fresh-process repetitions, statistics, output.

A script describes its *cases* (plain dicts, JSON-able). The parent process runs each case
``reps`` times, each time in a fresh ``python bench/<script>.py --child '<case>'`` process,
alternating the order of the cases from one repetition to the next so that a drift of the
machine does not favour one side. A child prints one JSON object (its measurements) as its
last line of output. The parent reports the median and the range of each measurement.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"

Case = dict[str, Any]
Measure = dict[str, Any]


# -- options ------------------------------------------------------------------------------


@dataclass
class Options:
    smoke: bool
    reps: int
    child: Case | None
    results: Path
    quiet: bool


def options(description: str, argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=description.strip().splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 5; smoke 1)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where JSON goes")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    reps = args.reps if args.reps is not None else (1 if args.smoke else 5)
    if reps < 1:
        parser.error("--reps must be at least 1")
    child = json.loads(args.child) if args.child else None
    return Options(args.smoke, reps, child, args.results, args.quiet)


def child_main(run: Callable[[Case], Measure], case: Case) -> None:
    """Run one case in this (fresh) process and print its measurements as the last line.

    A child that hangs dumps every thread's stack on stderr before its parent gives up.
    """
    limit = float(os.environ.get("BENCH_CHILD_TIMEOUT", "0"))
    if limit > 2:
        faulthandler.dump_traceback_later(limit - 1, exit=True)
    result = run(case)
    faulthandler.cancel_dump_traceback_later()
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    sys.stdout.flush()


# -- repetitions ----------------------------------------------------------------------------


def key_of(case: Case) -> str:
    return str(case["key"])


def repeat(
    script: str,
    cases: Sequence[Case],
    reps: int,
    *,
    quiet: bool = False,
    timeout: float = 600.0,
) -> dict[str, list[Measure]]:
    """Each case `reps` times, one fresh process each; the measurements by case key.

    A case with ``"reps_factor": k`` runs ``k * reps`` times (a case measuring one sample per
    process needs more processes for a median as steady as the others')."""
    out: dict[str, list[Measure]] = {key_of(c): [] for c in cases}
    rounds = reps * max((_factor(c) for c in cases), default=1)
    for rep in range(rounds):
        order = list(cases) if rep % 2 == 0 else list(reversed(cases))
        for case in order:
            total = reps * _factor(case)
            if rep >= total:
                continue
            started = time.perf_counter()
            measure = run_child(script, case, timeout)
            out[key_of(case)].append(measure)
            if not quiet:
                took = time.perf_counter() - started
                print(f"  rep {rep + 1}/{total} {key_of(case)}: {took:.1f} s", file=sys.stderr)
    return out


def _factor(case: Case) -> int:
    return max(1, int(case.get("reps_factor", 1)))


def parent(
    script: str,
    description: str,
    run_case: Callable[[Case], Measure],
    make_cases: Callable[[bool], list[Case]],
    argv: Sequence[str] | None,
    *,
    timeout: float,
) -> tuple[Options, list[Case], dict[str, list[Measure]], dict[str, dict[str, Stat]], float] | None:
    """A benchmark script's start: in a child process, run its one case and return None;
    in the parent, run every case `reps` times (`timeout`: seconds per child, a smoke run's
    too: it only catches a hung child, and on a loaded machine tiny sizes can take that long)
    and return (options, cases, measures and summary by case key, perf_counter at the start)."""
    opts = options(description, argv)
    if opts.child is not None:
        child_main(run_case, opts.child)
        return None
    started = time.perf_counter()
    all_cases = make_cases(opts.smoke)
    measures = repeat(script, all_cases, opts.reps, quiet=opts.quiet, timeout=timeout)
    return opts, all_cases, measures, summary(measures), started


def repeat_parallel(
    script: str,
    cases: Sequence[Case],
    reps: int,
    *,
    quiet: bool = False,
    timeout: float = 600.0,
    width: int = 4,
) -> dict[str, list[Measure]]:
    """As `repeat`, with up to `width` children at once: only for measurements that count
    (wake-ups, CPU seconds of the child itself), never for ones that time anything."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(rep, case) for rep in range(reps) for case in cases]
    out: dict[str, list[Measure]] = {key_of(c): [] for c in cases}
    with ThreadPoolExecutor(width) as pool:
        futures = [(rep, case, pool.submit(run_child, script, case, timeout)) for rep, case in jobs]
        for rep, case, future in futures:
            out[key_of(case)].append(future.result())
            if not quiet:
                print(f"  rep {rep + 1}/{reps} {key_of(case)}: done", file=sys.stderr)
    return out


def run_child(script: str, case: Case, timeout: float) -> Measure:
    cmd = [sys.executable, script, "--child", json.dumps(case)]
    env = {**os.environ, "BENCH_CHILD_TIMEOUT": str(timeout)}
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout + 5, cwd=REPO, env=env
        )
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
        raise RuntimeError(f"benchmark child hung: {' '.join(cmd[1:])}\n{err}") from None
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"benchmark child failed ({proc.returncode}): {' '.join(cmd[1:])}\n"
            f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-4000:]}"
        )
    result: Measure = json.loads(lines[-1])
    return result


# -- statistics -----------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """The `p`-th percentile (0-100) of `values`, by linear interpolation (NaN when empty)."""
    if not values:
        return math.nan
    data = sorted(values)
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * p / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (pos - low)


def distribution(values: Sequence[float], scale: float = 1.0) -> dict[str, float]:
    """p50, p99, max, min and count of `values` times `scale`."""
    scaled = [v * scale for v in values]
    return {
        "p50": percentile(scaled, 50),
        "p99": percentile(scaled, 99),
        "max": max(scaled) if scaled else math.nan,
        "min": min(scaled) if scaled else math.nan,
        "count": float(len(scaled)),
    }


@dataclass
class Stat:
    """One measurement over the repetitions: median and range."""

    median: float
    low: float
    high: float
    values: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.low, "max": self.high, "values": self.values}


def stat(values: Iterable[Any]) -> Stat:
    data = [float(v) for v in values if v is not None and not _isnan(v)]
    if not data:
        return Stat(math.nan, math.nan, math.nan, [])
    return Stat(percentile(data, 50), min(data), max(data), data)


def _isnan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def stats(measures: Sequence[Measure]) -> dict[str, Stat]:
    """Every numeric measurement of a case, over its repetitions."""
    keys: list[str] = []
    for measure in measures:
        for k, v in measure.items():
            if isinstance(v, int | float) and not isinstance(v, bool) and k not in keys:
                keys.append(k)
    return {k: stat(m.get(k) for m in measures) for k in keys}


def ratio(a: float, b: float) -> float:
    if b == 0 or math.isnan(a) or math.isnan(b):
        return math.nan
    return a / b


# -- formatting -----------------------------------------------------------------------------


def num(value: float, digits: int = 2) -> str:
    if value is None or _isnan(value):
        return "n/a"
    if digits == 0:
        return f"{value:,.0f}"
    if value != 0 and abs(value) >= 10 ** (digits + 3):
        return f"{value:,.0f}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


def span(s: Stat, digits: int = 2) -> str:
    """``median (min–max)``."""
    if math.isnan(s.median):
        return "n/a"
    if len(s.values) <= 1:
        return num(s.median, digits)
    return f"{num(s.median, digits)} ({num(s.low, digits)}–{num(s.high, digits)})"


def times(value: float) -> str:
    return "n/a" if _isnan(value) else f"{value:.2f}x"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = [
        "  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)) for row in rows]
    return "\n".join(lines)


# -- results --------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "commit": _commit(),
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "system": f"{platform.system()} {platform.release()}",
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def _commit() -> str:
    """The commit measured, with ``+changes`` when jobscheduler/ differs from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "jobscheduler"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (head or "unknown") + ("+changes" if dirty else "")


@dataclass
class Target:
    """One performance target: `value` compared with `limit` (`op` "<=" or ">=")."""

    name: str
    value: float
    op: str
    limit: float
    unit: str = ""
    note: str = ""

    @property
    def met(self) -> bool:
        if _isnan(self.value):
            return False
        return self.value <= self.limit if self.op == "<=" else self.value >= self.limit

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "op": self.op,
            "limit": self.limit,
            "unit": self.unit,
            "note": self.note,
            "digits": self.digits,
            "met": self.met,
        }

    @property
    def digits(self) -> int:
        """Decimals worth showing: none for counts."""
        return 0 if self.unit in ("runs", "wake-ups", "runs/s", "bytes") else 2

    def line(self) -> str:
        verdict = "met" if self.met else "MISSED"
        note = f" ({self.note})" if self.note else ""
        d = self.digits
        return (
            f"{verdict:6}  {self.name}: {num(self.value, d)} {self.unit} "
            f"(target {self.op} {num(self.limit, d)} {self.unit}){note}"
        )


def report(
    name: str,
    opts: Options,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    payload: Mapping[str, Any],
    targets: Sequence[Target] = (),
    notes: Sequence[str] = (),
    started: float | None = None,
) -> Path:
    """Print the table (and targets), write the JSON; returns the JSON's path."""
    print(f"\n== {title} ==")
    print(table(headers, rows))
    for note in notes:
        print(f"  note: {note}")
    if targets:
        print("targets:")
        for target in targets:
            print("  " + target.line())
    opts.results.mkdir(parents=True, exist_ok=True)
    path = opts.results / f"{name}{'-smoke' if opts.smoke else ''}.json"
    document = {
        "benchmark": name,
        "title": title,
        "smoke": opts.smoke,
        "reps": opts.reps,
        "machine": machine(),
        "command": f"python bench/{name}.py" + (" --smoke" if opts.smoke else ""),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "duration_s": None if started is None else time.perf_counter() - started,
        "table": {"headers": list(headers), "rows": [list(r) for r in rows]},
        "notes": list(notes),
        "targets": [t.to_json() for t in targets],
        **payload,
    }
    path.write_text(json.dumps(document, indent=2, default=_json_default) + "\n")
    print(f"results: {path}")
    return path


def _json_default(value: Any) -> Any:
    if isinstance(value, Stat):
        return value.to_json()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON: {value!r}")


def summary(measures: Mapping[str, Sequence[Measure]]) -> dict[str, dict[str, Stat]]:
    return {key: stats(ms) for key, ms in measures.items()}


def cases_payload(summary: Mapping[str, Mapping[str, Stat]]) -> dict[str, Any]:
    """The JSON payload's "cases": each case key's metrics (for `report`)."""
    return {"cases": {k: {"metrics": v} for k, v in summary.items()}}


# -- helpers for children -------------------------------------------------------------------


def rss_bytes() -> int:
    """This process's resident set size, in bytes."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:  # pragma: no cover - psutil is in the dev extra
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu_seconds() -> float:
    """CPU time (user + system) used by this process so far."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def quiet_logs() -> None:
    """Keep the libraries' loggers out of the measurements (warnings still show)."""
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("apscheduler").setLevel(logging.ERROR)
