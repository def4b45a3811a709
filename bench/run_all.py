"""Run every benchmark, then print and save the targets of all of them in one table.

``python bench/run_all.py`` (what ``make bench`` runs) takes about a quarter of an hour on 2
cores; ``--smoke`` runs each at tiny sizes once, in well under a minute (the test suite does
that). ``--only lateness,burst`` runs a subset; ``--collect-only`` runs nothing and rebuilds
the summary from the JSON already there (after re-running one script alone). ``--reps`` and
``--results`` are passed on to each script. Writes ``summary.json`` and ``summary.md``
(``summary-smoke.*`` for a smoke run) beside the scripts' own JSON under ``bench/results/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import json
import subprocess
import time
from typing import Any

from bench import _common as common

BENCH = Path(__file__).resolve().parent
# Quick ones first, so a broken setup shows early; lateness last (the longest).
SCRIPTS = [
    "next_after",
    "idle",
    "external",
    "burst",
    "run_cost",
    "slow_burst",
    "adding",
    "alerting",
    "lateness",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition")
    parser.add_argument("--reps", type=int, default=None, help="repetitions for each script")
    parser.add_argument("--results", type=Path, default=common.RESULTS, help="where JSON goes")
    parser.add_argument("--only", default="", help="comma-separated script names")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--collect-only",
        action="store_true",
        help="run nothing: rebuild the summary from the JSON already in --results",
    )
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or SCRIPTS
    unknown = [n for n in names if n not in SCRIPTS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(SCRIPTS)}")
    extra = ["--results", str(args.results)]
    if args.smoke:
        extra.append("--smoke")
    if args.reps is not None:
        extra += ["--reps", str(args.reps)]
    if args.quiet:
        extra.append("--quiet")
    began = time.perf_counter()
    failed: list[str] = []
    took: dict[str, float] = {}
    for name in [] if args.collect_only else names:
        print(f"\n### {name}", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, str(BENCH / f"{name}.py"), *extra])
        took[name] = time.perf_counter() - started
        if code != 0:
            failed.append(name)
            print(f"!!! {name} failed with exit code {code}", flush=True)
    suffix = "-smoke" if args.smoke else ""
    documents = _load(args.results, names, suffix)
    total = time.perf_counter() - began
    if args.collect_only:  # the durations the benchmarks recorded themselves
        took = {name: doc.get("duration_s") or 0.0 for name, doc in documents.items()}
        total = sum(took.values())
    summary = _summary(documents, took, total, args.smoke)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"summary{suffix}.json").write_text(json.dumps(summary, indent=2) + "\n")
    markdown = _markdown(summary)
    (args.results / f"summary{suffix}.md").write_text(markdown)
    print("\n" + markdown)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _load(results: Path, names: list[str], suffix: str) -> dict[str, Any]:
    documents: dict[str, Any] = {}
    for name in names:
        path = results / f"{name}{suffix}.json"
        if path.exists():
            documents[name] = json.loads(path.read_text())
    return documents


def _summary(
    documents: dict[str, Any], took: dict[str, float], total: float, smoke: bool
) -> dict[str, Any]:
    targets = [
        {"benchmark": name, **target}
        for name, doc in documents.items()
        for target in doc.get("targets", [])
    ]
    return {
        "smoke": smoke,
        "machine": common.machine(),
        "total_s": total,
        "seconds_by_benchmark": took,
        "targets": targets,
        "met": sum(1 for t in targets if t["met"]),
        "missed": sum(1 for t in targets if not t["met"]),
        "tables": {name: doc.get("table") for name, doc in documents.items()},
        "titles": {name: doc.get("title") for name, doc in documents.items()},
        "notes": {name: doc.get("notes", []) for name, doc in documents.items()},
    }


def _markdown(summary: dict[str, Any]) -> str:
    m = summary["machine"]
    lines = [
        f"Commit {m.get('commit', 'unknown')}. "
        f"Machine: {m['nproc']} cores, {m['cpu']}, Python {m['python']}, {m['system']}; "
        f"load average at the end {', '.join(f'{x:.2f}' for x in m['loadavg'] or [])}. "
        f"Total {summary['total_s'] / 60:.1f} min.",
        "",
    ]
    for name, table in summary["tables"].items():
        if not table:
            continue
        lines += [f"### {summary['titles'][name]}", "", "`python bench/" + name + ".py`", ""]
        lines.append("| " + " | ".join(table["headers"]) + " |")
        lines.append("|" + "---|" * len(table["headers"]))
        lines += ["| " + " | ".join(row) + " |" for row in table["rows"]]
        lines += [f"- {note}" for note in summary["notes"].get(name, [])]
        lines.append("")
    lines += [
        "### Targets",
        "",
        "| benchmark | target | value | limit | |",
        "|---|---|---|---|---|",
    ]
    for t in summary["targets"]:
        verdict = "met" if t["met"] else "**missed**"
        note = f" ({t['note']})" if t.get("note") else ""
        d = t.get("digits", 2)
        lines.append(
            f"| {t['benchmark']} | {t['name']}{note} | {common.num(t['value'], d)} {t['unit']} | "
            f"{t['op']} {common.num(t['limit'], d)} {t['unit']} | {verdict} |"
        )
    lines.append("")
    lines.append(f"{summary['met']} met, {summary['missed']} missed.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
