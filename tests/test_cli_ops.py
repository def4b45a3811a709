"""``status``, ``history``, ``kill`` and ``submit`` against a real daemon process, through
its state store (the SQLite file beside the configuration), as an operator would."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from test_daemon import Daemon, wait_until

CONFIG = """\
jobs:
  hello:
    command: [sh, -c, 'echo "args=$JOBSCHEDULER_ARGS trigger=$JOBSCHEDULER_TRIGGER"']
    start: 2099-01-01 00:00:00
    interval: 1 day
  sleeper:
    command: [sh, -c, 'exec sleep 30']
    start: 2099-01-01 00:00:00
    interval: 1 day
  off:
    command: [sh, -c, 'true']
    start: 2099-01-01 00:00:00
    interval: 1 day
    enabled: false
"""


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobscheduler", args[0], str(config), *args[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=config.parent,
    )


def cli_json(config: Path, *args: str) -> Any:
    done = cli(config, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


UNCHANGED = pytest.mark.xdist_group("cli_ops_unchanged")


@contextmanager
def running_daemon(directory: Path) -> Iterator[Path]:
    """A daemon on `CONFIG` in `directory`, up; its config file's path."""
    config = directory / "jobs.yaml"
    config.write_text(CONFIG)
    daemon = Daemon(config, "--log-level", "INFO")
    try:
        daemon.wait_log("jobscheduler running")
        assert (directory / "jobs.state.db").is_file()
        yield config
    finally:
        daemon.kill_everything()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Path]:
    with running_daemon(tmp_path) as config:
        yield config


@pytest.fixture(scope="module")
def live_unchanged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One daemon for the tests that leave it as they found it (the tests of `UNCHANGED`,
    run by one worker: docs/testing.md)."""
    with running_daemon(tmp_path_factory.mktemp("live")) as config:
        yield config


def test_submit_then_history_shows_the_run_with_its_args(live: Path) -> None:
    answer = cli_json(live, "submit", "hello", "--arg", "day=mon", "--priority", "4")
    assert isinstance(answer["queue_id"], int)

    def ran() -> list[dict[str, Any]]:
        return [r for r in cli_json(live, "history", "hello") if r["state"] == "succeeded"]

    wait_until(ran, "the submitted run")
    [record] = ran()
    assert record["trigger"] == "submit" and record["slot"] is None
    assert record["output_tail"].strip() == 'args={"day":"mon"} trigger=submit'
    assert record["started"].endswith("+00:00") and record["ended"].endswith("+00:00")
    assert set(record) == {
        "run_id", "job", "slot", "trigger", "attempt", "node", "state", "started", "ended",
        "duration", "exit_code", "reason", "output_tail",
    }  # fmt: skip
    took = datetime.fromisoformat(record["ended"]) - datetime.fromisoformat(record["started"])
    assert record["duration"] == pytest.approx(took.total_seconds())
    assert 0 < record["duration"] < 30
    text = cli(live, "history", "hello", "-n", "5")
    assert text.returncode == 0 and "succeeded" in text.stdout and "submit" in text.stdout
    assert "DURATION" in text.stdout and f"{record['duration']:.3f}s" in text.stdout


def test_status_shows_the_running_run_and_kill_stops_it(live: Path) -> None:
    cli_json(live, "submit", "sleeper")
    wait_until(lambda: cli_json(live, "status")["running"], "the sleeper running")
    status = cli(live, "status")
    assert status.returncode == 0, status.stderr
    assert "running (1):" in status.stdout and "sleeper" in status.stdout
    [running] = cli_json(live, "status")["running"]
    assert cli_json(live, "kill", "--run", running["run_id"]) == {"requested": 1}

    def killed() -> bool:
        [record] = cli_json(live, "history", "sleeper")
        return bool(record["state"] == "failed" and record["reason"] == "killed")

    wait_until(killed, "the run stopped by the daemon")
    assert cli_json(live, "status")["failures"][0]["reason"] == "killed"
    # A second run, killed by job name this time.
    cli_json(live, "submit", "sleeper")
    wait_until(lambda: cli_json(live, "status")["running"], "the second sleeper")
    done = cli(live, "kill", "sleeper")
    assert done.returncode == 0 and "1 run(s) of sleeper" in done.stdout
    wait_until(lambda: not cli_json(live, "status")["running"], "the second run stopped")


@UNCHANGED
def test_status_imports_only_its_reading_path(live_unchanged: Path) -> None:
    """``status`` reads the SQLite store and the definitions: it loads neither the memory
    store nor the scheduler, its engine and cluster layers, its runners, Jinja2 or cronsim."""
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['jobscheduler', 'status', sys.argv[1]]\n"
        "try:\n"
        "    runpy.run_module('jobscheduler', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith((\n"
        "    'jobscheduler.state.memory', 'jobscheduler.scheduler', 'jobscheduler.engine',\n"
        "    'jobscheduler.cluster', 'jobscheduler.runners', 'jinja2', 'cronsim',\n"
        "    'jobscheduler.state.sqlite'))), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(live_unchanged)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=live_unchanged.parent,
    )
    assert "nodes (1):" in done.stdout, done.stdout + done.stderr
    assert "LOADED ['jobscheduler.state.sqlite']" in done.stderr, done.stderr


@UNCHANGED
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("submit", "nope"), "no job"),
        (("submit", "off"), "paused"),
        (("kill", "nope"), "no job"),
        (("kill", "--run", "0190-not-a-run"), "no run has the id"),
        (("kill",), "give a JOB or --run ID"),
        (("submit", "hello", "--arg", "novalue"), "expected K=V"),
        (("status", "--state", "sqlite:////nonexistent/dir/x.db"), "no state store"),
        (("status", "--state", "postgresql://u:secret@127.0.0.1:1/db"), "127.0.0.1"),
        (("history", "--state", "ftp://x"), "not a store URL"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    live_unchanged: Path, args: tuple[str, ...], message: str
) -> None:
    live = live_unchanged
    before = cli_json(live, "status")["queue"]
    done = cli(live, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert "secret" not in done.stderr
    assert cli_json(live, "status")["queue"] == before


def test_without_a_store_beside_the_config_the_cli_says_so(tmp_path: Path) -> None:
    config = tmp_path / "jobs.yaml"
    config.write_text(CONFIG)
    done = cli(config, "status")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"jobscheduler: no state store at {tmp_path / 'jobs.state.db'}: start the daemon "
        "first, or give --state URL"
    )
    assert not (tmp_path / "jobs.state.db").exists()


def test_the_daemon_serves_http_with_its_token(tmp_path: Path) -> None:
    import os

    import httpx

    config = tmp_path / "jobs.yaml"
    config.write_text(CONFIG)
    token = "daemon-token-0123456789"
    os.environ["OPS_TEST_TOKEN"] = token
    try:
        daemon = Daemon(
            config, "--http", "127.0.0.1:0", "--token-env", "OPS_TEST_TOKEN", "--log-level", "INFO"
        )
    finally:
        del os.environ["OPS_TEST_TOKEN"]
    try:
        url = daemon.wait_log(r"status page at (http://\S+) \(actions on\)").group(1)
        assert token not in daemon.log
        auth = {"Authorization": f"Bearer {token}"}
        answer = httpx.post(f"{url}/api/jobs/hello/submit", json={"args": {"a": "1"}}, headers=auth)
        assert answer.status_code == 201
        wait_until(
            lambda: [r["state"] for r in httpx.get(f"{url}/api/history").json()] == ["succeeded"],
            "the run submitted over HTTP",
        )
        assert cli_json(config, "history")[0]["output_tail"].startswith('args={"a":"1"}')
        assert httpx.get(f"{url}/metrics").status_code == 200
    finally:
        daemon.kill_everything()


def test_run_refuses_http_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    config = tmp_path / "jobs.yaml"
    config.write_text(CONFIG)
    done = subprocess.run(
        [sys.executable, "-m", "jobscheduler", "run", str(config), "--http", "0.0.0.0:8080"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "beyond loopback needs a token" in done.stderr
