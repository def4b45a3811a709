"""One bench script run on two commits side by side, alternately, with the medians compared.

``python bench/compare_commits.py REV_A REV_B [--repeat N] [--worktrees DIR] -- SCRIPT [ARGS...]``

Each revision is checked out once with ``git worktree add --detach`` under DIR (default
``$TMPDIR/jobscheduler-compare``; an existing one for the same commit is reused). SCRIPT (a
path relative to the repository, say ``bench/run_all.py``) runs A, B, A, B, ... `N` times
each (default 3) with that worktree as its directory and first on ``PYTHONPATH``: the
revision's own copy of the script when it has one, else this checkout's copy, put at the same
place in the worktree (a bench script finds the package from its own location). ARGS go to
the script as they are, so a long benchmark runs with its own short options (``bench/cluster.py
--smoke``, or ``--aps4 skip``). This checkout's ``bench/.venv-aps4`` (APScheduler 4 for
bench/cluster.py) is lent to a worktree that has none.

Every run's output is printed under its label. The figures compared are those the script
leaves as JSON: each benchmark document it writes under the worktree's ``bench/results/``
(``bench/_common.report``: its targets, and every case's metric medians) and, when its last
line of output is a JSON object (``--json`` of bench/code_metrics.py and bench/run_path.py),
that object's numbers. The table gives each figure's median over A's runs and over B's, and
B/A.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

Figures = dict[str, float]


@dataclass
class Side:
    label: str  # "A" or "B"
    rev: str
    commit: str
    tree: Path
    script: Path
    own_script: bool
    figures: list[Figures] = field(default_factory=list)


def git(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def worktree(rev: str, base: Path) -> tuple[str, Path]:
    """The commit `rev` names, and a worktree of it under `base` (made or reused)."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    tree = base / commit[:12]
    if tree.exists() and git("rev-parse", "HEAD", cwd=tree) == commit:
        return commit, tree
    base.mkdir(parents=True, exist_ok=True)
    git("worktree", "add", "--detach", "--force", str(tree), commit)
    return commit, tree


def side(label: str, rev: str, base: Path, script: str) -> Side:
    commit, tree = worktree(rev, base)
    target = tree / script
    tracked = subprocess.run(["git", "cat-file", "-e", f"{commit}:{script}"], capture_output=True)
    own = tracked.returncode == 0
    if not own:  # (again at each use: this checkout's copy may have changed since)
        mine = REPO / script
        if not mine.is_file():
            raise SystemExit(f"{script}: neither {rev} nor this checkout has it")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(mine.read_bytes())
    aps4, lent = tree / "bench" / ".venv-aps4", REPO / "bench" / ".venv-aps4"
    if lent.is_dir() and not aps4.exists():
        aps4.symlink_to(lent)
    return Side(label, rev, commit, tree, target, own)


def run(side: Side, args: list[str], number: int) -> tuple[str, bool]:
    """Run the script once on `side`; its labelled output, and whether it succeeded."""
    results = side.tree / "bench" / "results"
    before = _mtimes(results)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(_path(side.tree))}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(side.script), *args],
        cwd=side.tree,
        env=env,
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - started
    figures: Figures = {}
    for path, mtime in _mtimes(results).items():
        if before.get(path) != mtime:
            figures.update(document_figures(json.loads(path.read_text())))
    figures.update(output_figures(done.stdout))
    side.figures.append(figures)
    copy = "" if side.own_script else ", this checkout's copy of the script"
    head = (
        f"===== {side.label}#{number}: {side.rev} ({side.commit[:10]}{copy}), "
        f"exit {done.returncode}, {took:.1f} s ====="
    )
    parts = [head, done.stdout.rstrip()]
    if done.returncode != 0 or not done.stdout.strip():
        parts.append("--- stderr ---\n" + done.stderr[-4000:].rstrip())
    return "\n".join(parts), done.returncode == 0


def _path(tree: Path) -> list[str]:
    return [str(tree), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]


def _mtimes(directory: Path) -> dict[Path, float]:
    if not directory.is_dir():
        return {}
    return {p: p.stat().st_mtime for p in directory.glob("*.json")}


def document_figures(doc: Mapping[str, Any]) -> Figures:
    """A benchmark document's targets and case medians (bench/_common.report's JSON)."""
    name = doc.get("benchmark")
    if not isinstance(name, str):
        return {}  # run_all's summary repeats the benchmarks' own documents
    out: Figures = {}
    for target in doc.get("targets", []):
        out[f"{name}: target {target['name']}"] = _number(target.get("value"))
    for key, case in (doc.get("cases") or {}).items():
        for metric, value in (case.get("metrics") or {}).items():
            median = value.get("median") if isinstance(value, Mapping) else value
            out[f"{name}: {key} {metric}"] = _number(median)
    return {k: v for k, v in out.items() if v == v}  # NaN: not measured


def output_figures(stdout: str) -> Figures:
    """The numbers of the output, or of its last line, when that is a JSON object."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    for text in (stdout, lines[-1] if lines else ""):
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        return dict(_leaves("", doc)) if isinstance(doc, dict) else {}
    return {}


def _leaves(prefix: str, value: Any) -> Iterator[tuple[str, float]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(f"{prefix}.{key}" if prefix else str(key), item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield prefix, float(value)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else float("nan")


def comparison(a: Side, b: Side) -> str:
    names = list(dict.fromkeys(k for figures in [*a.figures, *b.figures] for k in figures))
    if not names:
        return "no machine-readable figures in the output"
    rows = []
    for name in names:
        ma, mb = _median(a, name), _median(b, name)
        ratio = f"{mb / ma:.2f}" if ma == ma and mb == mb and ma != 0 else "n/a"
        rows.append([name, _show(ma), _show(mb), ratio])
    headers = ["figure", f"A {a.rev} median", f"B {b.rev} median", "B/A"]
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(4)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _median(side: Side, name: str) -> float:
    values = [f[name] for f in side.figures if name in f]
    return statistics.median(values) if values else float("nan")


def _show(value: float) -> str:
    return "n/a" if value != value else f"{value:.4g}"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        args.append("--")  # let argparse say what is missing
    cut = args.index("--")
    mine, script_args = args[:cut], args[cut + 1 :]
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").strip().splitlines()[0],
        usage="%(prog)s REV_A REV_B [--repeat N] [--worktrees DIR] -- SCRIPT [ARGS...]",
    )
    parser.add_argument("rev_a")
    parser.add_argument("rev_b")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each revision")
    default_base = Path(tempfile.gettempdir()) / "jobscheduler-compare"
    parser.add_argument("--worktrees", type=Path, default=default_base, help="where they go")
    opts = parser.parse_args(mine)
    if not script_args:
        parser.error("no script: give it after --, e.g. -- bench/next_after.py --smoke")
    if opts.repeat < 1:
        parser.error("--repeat must be at least 1")
    script, rest = script_args[0], script_args[1:]
    if Path(script).is_absolute():
        parser.error(f"{script}: give the script's path relative to the repository")
    a = side("A", opts.rev_a, opts.worktrees, script)
    b = side("B", opts.rev_b, opts.worktrees, script)
    ok = True
    for number in range(1, opts.repeat + 1):
        for current in (a, b):
            text, worked = run(current, rest, number)
            ok = ok and worked
            print(text + "\n", flush=True)
    print(f"===== medians over {opts.repeat} runs of each: {script} {' '.join(rest)} =====")
    print(comparison(a, b))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
