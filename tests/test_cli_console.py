"""The console's commands against a real daemon process, through its state store:
``--version``, ``logs`` (a run's output, ``--follow`` from another process while the job
prints)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cli_ops import cli, cli_json
from test_daemon import Daemon, wait_until

from jobscheduler.app.opsdata import new_output

# The printer prints three lines, waits for the test's `release` file (a bounded wait), then
# prints three more: the follower is seen printing while the run surely goes on.
CONFIG = """\
jobs:
  printer:
    command: [sh, -c, 'for i in 1 2 3; do echo "line $i <b>"; sleep 0.6; done;
      n=0; while [ ! -e release ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done;
      for i in 4 5 6; do echo "line $i <b>"; sleep 0.6; done']
    start: 2099-01-01 00:00:00
    interval: 1 day
  hello:
    command: [sh, -c, 'echo hello']
    start: 2099-01-01 00:00:00
    interval: 1 day
"""


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Path]:
    config = tmp_path / "jobs.yaml"
    config.write_text(CONFIG)
    daemon = Daemon(config, "--log-level", "INFO")
    try:
        daemon.wait_log("jobscheduler running")
        yield config
    finally:
        daemon.kill_everything()


def test_version() -> None:
    from jobscheduler import __version__

    done = subprocess.run(
        [sys.executable, "-m", "jobscheduler", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout == f"jobscheduler {__version__}\n"


def test_logs_follow_prints_the_output_as_the_job_prints_it(live: Path) -> None:
    cli_json(live, "submit", "printer")

    def running() -> list[dict[str, Any]]:
        return [r for r in cli_json(live, "history", "printer") if r["state"] == "running"]

    wait_until(running, "the printer running")
    [run] = running()
    follower = subprocess.Popen(
        [sys.executable, "-m", "jobscheduler", "logs", str(live), run["run_id"], "--follow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=live.parent,
    )
    assert follower.stdout is not None
    first = follower.stdout.readline()  # the follower prints while the run still goes on
    assert first.startswith("line ") and first.endswith(" <b>\n")
    assert cli_json(live, "history", "printer")[0]["state"] == "running"
    (live.parent / "release").touch()  # the job's cwd is the daemon's: the config's directory
    # Read through the same buffered reader (communicate() would skip what it buffered).
    rest = follower.stdout.read()
    assert follower.stderr is not None
    errors = follower.stderr.read()
    assert follower.wait(60) == 0, errors
    assert first + rest == "".join(f"line {i} <b>\n" for i in range(1, 7))
    assert f"[run {run['run_id']} succeeded]" in errors
    # Afterwards: by run id, by job (its latest run), as JSON.
    assert cli(live, "logs", run["run_id"]).stdout == first + rest
    assert cli(live, "logs", "printer").stdout == first + rest
    answer = json.loads(cli(live, "logs", "printer", "--json").stdout)
    assert answer["run_id"] == run["run_id"] and answer["output"] == first + rest


def test_logs_of_an_unknown_run_is_one_clear_line(live: Path) -> None:
    for extra in ((), ("--follow",)):
        done = cli(live, "logs", "no-such-run", *extra)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr == (
            "jobscheduler: no run has the id 'no-such-run', and no job of that name has runs\n"
        )


def test_new_output_finds_where_the_printed_part_ends() -> None:
    assert new_output("", "a\nb\n") == "a\nb\n"
    assert new_output("a\n", "a\nb\n") == "b\n"
    assert new_output("a\nb\n", "a\nb\n") == ""
    # The kept tail moved on: the part after the end of what was printed.
    assert new_output("line 1\nline 2\n", "ne 2\nline 3\n") == "line 3\n"
    assert new_output("old\n", "all new\n") == "\n[… output cut …]\nall new\n"
