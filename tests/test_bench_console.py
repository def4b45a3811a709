"""The console's benchmarks keep working: each runs at tiny sizes (``--smoke``) and writes
its JSON with a table and finite figures. No timing is asserted (a shared machine makes any
threshold flaky)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# A script's run is bounded only to catch a hang: on a loaded machine (CI shares its cores)
# even tiny sizes take minutes. The per-test timeout is above it, so a hang fails the test
# with the script's output rather than pytest-timeout's stack dump.
HANG = 900.0
pytestmark = pytest.mark.timeout(HANG + 120)


@pytest.mark.parametrize("name", ["cli_start", "console_pages", "live_output"])
def test_console_benchmark_smoke_run(name: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, f"bench/{name}.py", "--smoke", "--quiet", "--results", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=HANG, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    doc = json.loads((tmp_path / f"{name}-smoke.json").read_text())
    assert doc["smoke"] is True and doc["table"]["rows"]
    assert doc["targets"], "every benchmark checks at least one target"
    for target in doc["targets"]:
        assert math.isfinite(target["value"]), target
    if name == "live_output":
        for case in doc["cases"].values():
            assert case["metrics"]["failed"]["median"] == 0
