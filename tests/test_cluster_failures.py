"""What each failure does to a node, with real components: a store unreachable at start-up,
a node name taken, a store that goes away while jobs run (fencing), a mail server that is
down (alerts kept in the store's outbox across restarts)."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from smtp_server import SmtpServer, closed_port

from jobscheduler import Job
from jobscheduler.model.execution import Execution
from jobscheduler.scheduler import Scheduler
from jobscheduler.state import RunState
from jobscheduler.state.sqlite import SqliteStateStore

JOB = """\
jobs:
  tick:
    command: [sleep, "1"]
    start: 2024-01-01 00:00:00
    interval: 1 second
"""


def run_daemon(config: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "jobscheduler", "run", str(config), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_an_unreachable_store_at_start_up_is_one_line_and_exit_1(tmp_path: Path) -> None:
    config = tmp_path / "jobs.yaml"
    config.write_text(JOB)
    url = f"postgresql://app:secret@127.0.0.1:{closed_port()}/jobs"
    # What a start that fails without the network takes here (the interpreter, the imports):
    # on a loaded machine that alone is seconds, so the bound is on the time beyond it.
    began = time.monotonic()
    baseline = run_daemon(config, "--state", f"sqlite:///{tmp_path}/nowhere/state.db")
    baseline.communicate(timeout=120)
    start_up = time.monotonic() - began
    began = time.monotonic()
    proc = run_daemon(config, "--state", url)
    _, err = proc.communicate(timeout=120)
    took = time.monotonic() - began
    assert proc.returncode == 1
    assert took - start_up < 12, (took, start_up)  # refused at once: no retrying for long
    [line] = err.splitlines()
    assert line.startswith("jobscheduler: ") and "app:***@127.0.0.1" in line, line
    assert "secret" not in err and "Traceback" not in err


def test_a_missing_state_directory_is_one_line_and_exit_1(tmp_path: Path) -> None:
    config = tmp_path / "jobs.yaml"
    config.write_text(JOB)
    proc = run_daemon(config, "--state", f"sqlite:///{tmp_path}/nowhere/state.db")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    [line] = err.splitlines()
    assert "nowhere" in line and "Traceback" not in err


def test_a_second_node_under_a_live_nodes_name_refuses_to_start(tmp_path: Path) -> None:
    config = tmp_path / "jobs.yaml"
    config.write_text(JOB)
    first = run_daemon(config, "--node", "one", "--log-file", str(tmp_path / "one.log"))
    try:
        store = SqliteStateStore(tmp_path / "jobs.state.db")  # the default, beside the file
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(n.name == "one" for n in store.nodes()):
            time.sleep(0.1)
        second = run_daemon(config, "--node", "one")
        _, err = second.communicate(timeout=120)
        assert second.returncode == 1
        [line] = err.splitlines()
        assert "node name 'one' is taken by a live node" in line, err
        assert first.poll() is None  # the first one goes on
        store.close()
    finally:
        first.terminate()
        first.wait(60)


@pytest.fixture
def made() -> Iterator[list[Scheduler]]:
    schedulers: list[Scheduler] = []
    yield schedulers
    for s in schedulers:
        s.shutdown(wait=False)


def _running_then_locked(s: Scheduler, path: Path, command: list[str]) -> tuple[Execution, Any]:
    """Start a run of a job with `command` on `s`; once it runs, another program takes the
    SQLite file's write lock (every write of the node fails): the run and that connection."""
    s.add_job(Job("job", command=command, start=datetime(2030, 1, 1, tzinfo=UTC), interval="1 day"))
    s.start()
    s.run_now("job")
    deadline = time.monotonic() + 60
    while not s.executing and time.monotonic() < deadline:
        time.sleep(0.02)
    [running] = s.executing
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    return running, other


def test_a_node_cut_off_from_its_store_stops_its_runs_and_rejoins(
    tmp_path: Path, made: list[Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobscheduler")
    path = tmp_path / "state.db"
    store = SqliteStateStore(path, busy_timeout=0.3)
    lease = 1.5
    s = Scheduler(state=store, node="cut", lease=lease)
    made.append(s)
    running, other = _running_then_locked(s, path, ["sleep", "60"])
    cut = time.monotonic()
    while s.executing and time.monotonic() - cut < 10:
        time.sleep(0.02)
    stopped_after = time.monotonic() - cut
    assert not s.executing
    assert stopped_after < lease  # before the lease could end
    assert "state store unreachable" in caplog.text
    other.execute("ROLLBACK")
    other.close()
    deadline = time.monotonic() + 60
    while "joined the store again" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "joined the store again" in caplog.text
    [run] = store.history("job")
    assert (run.run_id, run.state, run.reason) == (
        running.run_id,
        RunState.ABANDONED,
        "node lost, may have run: cut",
    )
    assert [(n.name, n.state) for n in store.nodes()] == [("cut", "up")]
    s.shutdown()
    store.close()


def test_a_run_that_ends_while_the_store_is_away_is_recorded_once_it_is_back(
    tmp_path: Path, made: list[Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobscheduler")
    path = tmp_path / "state.db"
    store = SqliteStateStore(path, busy_timeout=0.2)
    s = Scheduler(state=store, node="brief", lease=60)  # no fencing in a short outage
    made.append(s)
    # The write lock is held while the run ends: its outcome cannot be written.
    running, other = _running_then_locked(s, path, ["sleep", "0.5"])
    deadline = time.monotonic() + 60
    while s.executing and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not s.executing
    while "state store away" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "state store away: 1 writes kept" in caplog.text
    other.execute("ROLLBACK")
    other.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        [run] = store.history("job")
        if run.state is not RunState.RUNNING:
            break
        time.sleep(0.05)
    assert (run.run_id, run.state) == (running.run_id, RunState.SUCCEEDED)
    s.shutdown()
    store.close()


EMAIL = """\
email:
  from_address: scheduler@example.com
  subject: "{{{{ JobName }}}} {{{{ JobStatus }}}}"
  smtp: {{host: 127.0.0.1, port: {port}, timeout: 2s, retries: 0}}
jobs:
  fails:
    command: [sh, -c, "exit 3"]
    start: 2030-01-01 00:00:00
    interval: 1 day
    messages:
      failed: {{recipients: [ops@example.com]}}
"""


def test_an_alert_the_mail_server_did_not_take_is_sent_after_a_restart(
    tmp_path: Path, made: list[Scheduler]
) -> None:
    config = tmp_path / "jobs.yaml"
    config.write_text(EMAIL.format(port=closed_port()))
    first = Scheduler(config)
    made.append(first)
    first.start()
    first.run_now("fails")
    deadline = time.monotonic() + 60
    db = sqlite3.connect(tmp_path / "jobs.state.db", isolation_level=None)
    held: list[tuple[object, ...]] = []
    while not held and time.monotonic() < deadline:
        held = db.execute("SELECT recipients, attempts FROM jobscheduler_outbox").fetchall()
        time.sleep(0.05)
    assert len(held) == 1, held
    began = time.monotonic()
    first.shutdown()
    assert time.monotonic() - began < 5  # nothing waits on the dead server
    db.execute("UPDATE jobscheduler_outbox SET next_attempt = 0")  # its back-off is over
    with SmtpServer() as server:
        config.write_text(EMAIL.format(port=server.port))
        second = Scheduler(config)
        made.append(second)
        second.start()
        second._keeper.beat()  # what its thread does every lease/3
        [mail] = server.wait_for(1)
        assert mail.subject == "fails FAILED"
        assert mail.rcpt_tos == ("ops@example.com",)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and db.execute(
            "SELECT count(*) FROM jobscheduler_outbox"
        ).fetchone() != (0,):
            time.sleep(0.05)
        assert db.execute("SELECT count(*) FROM jobscheduler_outbox").fetchone() == (0,)
    db.close()
