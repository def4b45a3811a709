"""The benchmarks keep working: each runs at tiny sizes (``--smoke``) in fresh processes.

No timing is asserted (a shared machine makes any threshold flaky); what is checked is that
every script runs to its end, writes its JSON with a table and finite figures, and that
jobscheduler ran every run it was given. Plus the statistics helpers the tables rest on.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import _common as common  # noqa: E402
from bench import _systems as systems  # noqa: E402
from bench import adding, slow_burst  # noqa: E402
from bench.run_all import SCRIPTS  # noqa: E402

# A script's run is bounded only to catch a hang: on a loaded machine (CI shares its cores)
# even tiny sizes take minutes. The per-test timeout is above it, so a hang fails the test
# with the script's output rather than pytest-timeout's stack dump.
HANG = 900.0
pytestmark = pytest.mark.timeout(HANG + 120)


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=HANG
    )


@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_smoke_run(name: str, tmp_path: Path) -> None:
    proc = _run([f"bench/{name}.py", "--smoke", "--quiet", "--results", str(tmp_path)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / f"{name}-smoke.json").read_text())
    assert doc["smoke"] is True and doc["reps"] == 1
    assert doc["table"]["rows"], "the table is empty"
    assert doc["machine"]["python"]
    assert doc["targets"], "every benchmark checks at least one target"
    for target in doc["targets"]:
        assert math.isfinite(target["value"]), target
    for key, case in doc["cases"].items():
        metrics = case["metrics"]
        if key.startswith("jobscheduler/"):
            for missing in ("missed", "dropped", "failed"):
                if missing in metrics:
                    assert metrics[missing]["median"] == 0, (key, missing, metrics[missing])
    assert name in proc.stdout or doc["title"].split()[0] in proc.stdout


def test_the_async_jobs_benchmark_runs(tmp_path: Path) -> None:
    """A smoke run of bench/async_jobs.py (50 async jobs; APScheduler 4 only when its
    environment is there already)."""
    done = _run(["bench/async_jobs.py", "--smoke", "--quiet", "--results", str(tmp_path)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Async jobs" in done.stdout
    doc = json.loads((tmp_path / "async_jobs-smoke.json").read_text())
    for target in doc["targets"]:
        assert math.isfinite(target["value"]), target
    for key, case in doc["cases"].items():
        if key.startswith("jobscheduler/"):
            metrics = case["metrics"]
            assert metrics["failed"]["median"] == 0, key
            assert metrics["ran"]["median"] in (20, 50), key


def test_the_page_benchmark_runs(tmp_path: Path) -> None:
    """A smoke run of bench/page.py (500 jobs)."""
    done = _run(["bench/page.py", "--smoke", "--quiet", "--results", str(tmp_path)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "page response, p99" in done.stdout


def test_the_queue_benchmark_runs(tmp_path: Path) -> None:
    """A smoke run of bench/queue_runs.py (SQLite and a throwaway PostgreSQL server)."""
    done = _run(["bench/queue_runs.py", "--smoke", "--quiet", "--results", str(tmp_path)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "start within, p99, sqlite" in done.stdout
    assert (tmp_path / "queue_runs-smoke.json").is_file()


def test_run_all_writes_a_summary(tmp_path: Path) -> None:
    proc = _run(
        [
            "bench/run_all.py",
            "--smoke",
            "--quiet",
            "--only",
            "next_after",
            "--results",
            str(tmp_path),
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary-smoke.json").read_text())
    # two old jobs, six cron and calendar expressions, loading a cron file (issue 13)
    assert [t["benchmark"] for t in summary["targets"]] == ["next_after"] * 9
    markdown = (tmp_path / "summary-smoke.md").read_text()
    assert "### Targets" in markdown and "next_after" in markdown


def test_run_all_refuses_an_unknown_benchmark(tmp_path: Path) -> None:
    proc = _run(["bench/run_all.py", "--only", "nosuch", "--results", str(tmp_path)])
    assert proc.returncode != 0
    assert "nosuch" in proc.stderr


def test_percentile_interpolates() -> None:
    assert common.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert common.percentile([0.0, 10.0], 99) == pytest.approx(9.9)
    assert common.percentile([5.0], 99) == 5.0
    assert math.isnan(common.percentile([], 50))


def test_stat_is_median_and_range_ignoring_missing_values() -> None:
    s = common.stat([4, 1, None, float("nan"), 3])
    assert (s.median, s.low, s.high) == (3.0, 1.0, 4.0)


def test_target_directions() -> None:
    assert common.Target("low", 0.1, "<=", 0.2).met
    assert not common.Target("low", 0.3, "<=", 0.2).met
    assert common.Target("high", 5.0, ">=", 4.0).met
    assert not common.Target("nan", float("nan"), "<=", 1.0).met


def test_out_of_order_counts_runs_started_before_a_run_that_should_go_first() -> None:
    keys = list(range(40))
    expected = sorted(keys, key=lambda k: (-slow_burst.priority(k), k))
    in_order = [(k, i * 0.02) for i, k in enumerate(expected)]
    assert slow_burst.out_of_order(in_order) == 0
    fifo = [(k, k * 0.02) for k in keys]  # first come, first served: priorities ignored
    assert slow_burst.out_of_order(fifo) > 0
    # Within the tolerance, concurrent starts may interleave without counting.
    jitter = [(k, i * 0.02 + (0.001 if i % 2 else 0.0)) for i, k in enumerate(expected)]
    swapped = jitter[:]
    swapped[0], swapped[1] = (swapped[0][0], 0.0011), (swapped[1][0], 0.0)
    assert slow_burst.out_of_order(swapped) == 0


def test_the_loading_benchmark_writes_what_dump_config_writes(tmp_path: Path) -> None:
    from jobscheduler.config import dump_config, load_config
    from jobscheduler.model.catalog import Catalog

    jobs = [systems.js_future(f"j{i}", adding._start(i)) for i in range(3)]
    path = tmp_path / "jobs.yaml"
    adding.write_file(path, 3)
    assert path.read_text() == dump_config(Catalog.build(jobs))
    assert list(load_config(path).jobs.values()) == jobs


def test_memory_breakdown_runs_and_names_the_job_storage() -> None:
    proc = _run(["bench/memory.py", "--jobs", "300"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    total = next(line for line in lines if line.strip().endswith("total"))
    assert 100 < float(total.split()[0]) < 2000  # bytes per job: a figure, not an error
    assert any("Europe/Berlin" in line and "after one run" in line for line in lines)


def test_cluster_benchmark_smoke_run(tmp_path: Path) -> None:
    """bench/cluster.py --smoke on a real PostgreSQL it starts: jobscheduler's nodes ran
    every slot once (in memory, and 2 nodes sharing the database, one killed halfway: no slot
    twice, none lost before the kill); APScheduler 4 beside it when bench/.venv-aps4 exists,
    else the output says it was not measured."""
    proc = _run(["bench/cluster.py", "--smoke", "--quiet", "--results", str(tmp_path)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "cluster-smoke.json").read_text())
    cases = doc["cases"]
    expected = 50 * 5
    memory = cases["jobscheduler/memory/1"]["runs"][0]
    assert (memory["runs"], memory["duplicates"], memory["missed"]) == (expected, 0, 0)
    assert math.isfinite(memory["late_p99_ms"])
    killed = cases["jobscheduler/postgres/2+kill"]["runs"][0]
    assert killed["exit_codes"] == [0, -9], killed
    assert killed["duplicates"] == 0, killed
    # Only the killed node's claims in flight may be lost: every slot before the kill ran.
    assert killed["missed"] == killed["missed_after_kill"], killed
    assert killed["unique"] + killed["missed"] == expected
    assert killed["db_cpu_s"] > 0 and killed["node_cpu_s"] > 0
    idle = cases["idle"]["runs"][0]
    assert idle["jobscheduler_queries_per_s"] >= 0
    if "apscheduler4/postgres/2+kill" in cases:
        peer = cases["apscheduler4/postgres/2+kill"]["runs"][0]
        assert peer["runs"] > 0 and peer["exit_codes"] == [0, -9], peer
        assert "apscheduler4_queries_per_s" in idle
    else:
        assert "APScheduler 4 NOT measured" in proc.stdout
    assert "Several nodes on PostgreSQL" in proc.stdout


def test_cluster_limits_benchmark_smoke_run(tmp_path: Path) -> None:
    """bench/cluster.py --limits --smoke: 50 jobs of 1.5-s runs every second on 2 nodes,
    without a limit and with max_instances: 1 (overlap: skip). Measured from the runs' own
    spans: overlaps without the limit, none with it, its busy slots recorded skipped."""
    proc = _run(["bench/cluster.py", "--limits", "--smoke", "--quiet", "--results", str(tmp_path)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    cases = json.loads((tmp_path / "cluster_limits-smoke.json").read_text())["cases"]
    free = cases["jobscheduler/postgres/2/unlimited"]["runs"][0]
    limited = cases["jobscheduler/postgres/2/limited"]["runs"][0]
    assert free["overlapping"] > 0 and free["skipped"] == 0, free
    assert limited["overlapping"] == 0, limited
    assert limited["runs"] > 0 and limited["skipped"] > 0, limited
    assert limited["duplicates"] == 0, limited


def test_burst_on_postgresql_smoke_run(tmp_path: Path) -> None:
    """bench/burst.py --store postgres --smoke on a real PostgreSQL it starts, with this
    tree again as the other tree (--extra-src): every run ran and was recorded, CPU counted."""
    proc = _run(
        [
            "bench/burst.py",
            "--store",
            "postgres",
            "--extra-src",
            str(REPO),
            "--extra-label",
            "again",
            "--smoke",
            "--quiet",
            "--results",
            str(tmp_path),
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cases = json.loads((tmp_path / "burst_store-smoke.json").read_text())["cases"]
    for key in (
        "jobscheduler/memory/200",
        "jobscheduler/postgres/200",
        "jobscheduler[again]/postgres/200",
    ):
        metrics = cases[key]["metrics"]
        assert metrics["ran"]["min"] == metrics["recorded"]["min"] == 200, key
        assert math.isfinite(metrics["runs_per_s"]["median"]), key
        assert metrics["cpu_us_per_run"]["median"] > 0, key


def test_cluster_lateness_on_sqlite_smoke_run(tmp_path: Path) -> None:
    """bench/cluster.py --lateness --stores sqlite --smoke: one node on a SQLite file ran
    every slot once, its CPU counted in the node (no database process)."""
    proc = _run(
        [
            "bench/cluster.py",
            "--lateness",
            "--stores",
            "sqlite",
            "--smoke",
            "--quiet",
            "--results",
            str(tmp_path),
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cases = json.loads((tmp_path / "cluster_lateness-smoke.json").read_text())["cases"]
    run = cases["jobscheduler/sqlite/1"]["runs"][0]
    assert (run["runs"], run["duplicates"], run["missed"]) == (50 * 3, 0, 0), run
    assert run["node_cpu_s"] > 0 and run["db_cpu_s"] == 0, run
    assert math.isfinite(run["late_p99_ms"])


def test_cluster_lateness_in_memory_has_the_bare_pool_floor_smoke_run(tmp_path: Path) -> None:
    """bench/cluster.py --lateness --stores memory --smoke: the node in memory and, in the
    same run, the floor (a bare ThreadPoolExecutor given the same calls at each whole second)
    each started every slot once, with a finite lateness."""
    proc = _run(
        [
            "bench/cluster.py",
            "--lateness",
            "--stores",
            "memory",
            "--smoke",
            "--quiet",
            "--results",
            str(tmp_path),
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cases = json.loads((tmp_path / "cluster_lateness-smoke.json").read_text())["cases"]
    assert set(cases) == {"jobscheduler/memory/1", "pool/memory/1"}
    for key, case in cases.items():
        run = case["runs"][0]
        assert (run["runs"], run["duplicates"], run["missed"]) == (50 * 3, 0, 0), (key, run)
        assert math.isfinite(run["late_p99_ms"]) and run["late_p50_ms"] >= 0, (key, run)


def test_the_run_cost_benchmark_runs_one_burst_for_a_count_of_instructions() -> None:
    """``bench/run_cost.py --one N``: one burst of N runs in the process (what valgrind counts),
    and ``--set-up-only`` the same process without it (the count to take away)."""
    whole = _run(["bench/run_cost.py", "--one", "40"])
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert whole.stdout.strip().splitlines()[-1] == "ran 40"
    set_up = _run(["bench/run_cost.py", "--one", "40", "--set-up-only"])
    assert set_up.returncode == 0, set_up.stderr[-3000:]
    assert set_up.stdout.strip().splitlines()[-1] == "ran 0"
