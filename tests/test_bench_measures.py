"""The measuring scripts: code metrics (floors, cycles, upward imports), a run's way, and the
figures compare_commits reads from a benchmark's output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import code_metrics, compare_commits  # noqa: E402


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"__init__.py": "", **files}.items():
        path = root / "jobscheduler" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_floors_count_a_cycle_once() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"b", "d"}, "d": set()}
    floor, cycles = code_metrics.floors(graph)
    assert floor == {"d": 0, "b": 1, "c": 1, "a": 2}
    assert cycles == [["b", "c"]]


def test_import_graph_of_a_package(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/base.py": "import os\n",
            "low/guarded.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from ..high.top import Top\n"
            ),
            "high/__init__.py": "",
            "high/top.py": "from ..low import guarded\nfrom jobscheduler.low.base import x\n",
            "state/__init__.py": "",
            "state/base.py": (
                "from typing import Protocol\n"
                "class Store(Protocol):\n"
                "    def claim(self) -> None: ...\n"
                "    # -- nodes ---\n"
                "    def join(self) -> None: ...\n"
                "    def leave(self) -> None: ...\n"
            ),
        },
    )
    result = code_metrics.measure(root)
    graph = result["imports"]
    assert result["modules"] == 8
    assert graph["module_cycles"] == [["jobscheduler.high.top", "jobscheduler.low.guarded"]]
    assert graph["unit_cycles"] == [["high", "low"]]
    assert graph["type_checking_imports"] == 1
    upward = {(u["from"], u["to"], u["type_checking"]) for u in graph["upward_imports"]}
    assert ("jobscheduler.low.guarded", "jobscheduler.high.top", True) in upward
    store = result["state_protocols"]["state.base.Store"]
    assert store["methods"] == 3
    assert store["by_section"]["nodes"]["names"] == ["join", "leave"]
    assert result["complexity"]["blocks"] == 4  # the class and its three methods


def test_this_package_measures() -> None:
    result = code_metrics.measure(REPO)
    units = result["imports"]["units"]
    assert result["complexity"]["mean"] > 1
    assert units["clock"]["floor"] == 0
    assert units["__init__"]["floor"] > units["scheduler"]["floor"]


@pytest.mark.timeout(700)
def test_run_path_reaches_the_runner_in_memory() -> None:
    proc = subprocess.run(
        [sys.executable, "bench/run_path.py", "--store", "memory", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,  # only for a hang: a loaded machine makes even this short run slow
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])["runs"]["memory"]
    assert result["count"] == len(result["files"]) > 3
    assert "jobscheduler/scheduler.py" not in result["files"][:1]  # no start-up first
    assert any(f.startswith("jobscheduler/runners/") for f in result["files"])


def test_compare_reads_targets_cases_and_a_json_line() -> None:
    doc = {
        "benchmark": "burst",
        "targets": [{"name": "p99", "value": 2.5}],
        "cases": {"js/1": {"metrics": {"late_ms": {"median": 1.5}, "n": {"median": None}}}},
    }
    assert compare_commits.document_figures(doc) == {
        "burst: target p99": 2.5,
        "burst: js/1 late_ms": 1.5,
    }
    assert compare_commits.document_figures({"targets": []}) == {}
    out = 'text\n{"files": 3, "runs": {"memory": {"count": 2, "files": ["a"]}}}\n'
    assert compare_commits.output_figures(out) == {"files": 3.0, "runs.memory.count": 2.0}
    assert compare_commits.output_figures("no json here\n") == {}


def test_overlapping_runs_are_counted_per_job_from_their_own_spans() -> None:
    from bench import _cluster_jobs, _cluster_run

    spans = [
        (1, 0, 0, 1_500),  # job 1: 0-1.5 ms
        (1, 1, 1_000, 2_000),  # starts before the first ended: 1
        (1, 2, 2_500, 3_000),  # after both
        (1, 3, 2_900, 3_100),  # before the third ended: 1
        (2, 0, 500, 900),  # another job at the same time: not an overlap
    ]
    assert _cluster_run.overlapping_runs(spans) == 2
    assert _cluster_run.overlapping_runs([s for s in spans if s[0] == 2]) == 0
    assert _cluster_jobs.parse_span("3 10 20 30") == (3, 10, 20, 30)
    assert _cluster_jobs.parse_span("3 10 20") is None
