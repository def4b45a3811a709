"""bench/runner_start.py keeps working: a few runs of each job kind in a fresh process, every
run SUCCESSFUL (the script asserts it), a figure printed for each. No timing is asserted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HANG = 600.0  # only to catch a hang: a loaded machine makes even this run slow

pytestmark = pytest.mark.timeout(HANG + 60)


def test_the_runner_benchmark_runs_each_kind_of_job() -> None:
    done = subprocess.run(
        [sys.executable, "bench/runner_start.py", "--runs", "20", "--reps", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert done.returncode == 0, done.stderr
    assert f"jobscheduler from {REPO / 'jobscheduler'}" in done.stdout
    figures = re.findall(r"^(code|module:name): ([0-9.]+) us a run", done.stdout, re.M)
    assert [label for label, _ in figures] == ["code", "module:name"]
    assert all(float(cost) > 0 for _, cost in figures)
