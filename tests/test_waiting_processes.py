"""The cluster's waiting slot seen and ended, with real ``jobscheduler run`` daemons on one
SQLite file and on a real PostgreSQL server: node a runs a long run of an ``overlap:
queue`` job; node b's slot of it finds it busy and waits. ``status --json`` (the command
line, reading the store) and node a's ``/api/status``, ``/api/jobs/NAME`` and page show the
slot waiting on b, since when and why (busy on a); removing the job from b's file (a hand
edit, taken up without a signal) ends the wait at once, NOT_STARTED "job removed".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from pg_server import PgServer
from test_reload_cluster import Node, cli_json, nodes, replace_file, wait_until

from jobscheduler.cluster.limits import REMOVED
from jobscheduler.state import RunState, open_store

__all__ = ["nodes"]  # the fixture, used by name

ON_A = """\
jobs:
  long:
    command: [sleep, "120"]
    on_demand: true
    overlap: queue
"""

ON_B = """\
jobs:
  long:
    command: [sleep, "120"]
    start: 2024-01-01 00:00:00
    timezone: UTC
    interval: 2 seconds
    overlap: queue
  other:
    command: ["true"]
    on_demand: true
"""

WITHOUT_LONG = """\
jobs:
  other:
    command: ["true"]
    on_demand: true
"""


def waiting_slot(config: Path, url: str) -> dict[str, Any] | None:
    """The waiting entry of job ``long`` in ``status --json`` (None: none waits)."""
    found = [w for w in cli_json(config, url, "status")["waiting"] if w["job"] == "long"]
    assert len(found) <= 1, found  # one waiting slot for the cluster
    return found[0] if found else None


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    server: PgServer = request.getfixturevalue("pg_server")
    return server.fresh_schema_url()


def test_the_waiting_slot_is_shown_on_every_node_and_ends_when_its_job_is_removed(
    tmp_path: Path, nodes: list[Node], url: str
) -> None:
    on_a, on_b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    on_a.write_text(ON_A)
    on_b.write_text(ON_B)
    store = open_store(url)[0]
    try:
        nodes.append(Node(tmp_path, on_a, url, "a", "--http", "127.0.0.1:0"))
        page = nodes[0].wait_log(r"status page at (http://\S+)").group(1)
        store.submit("long", host="a")
        wait_until(
            lambda: [r.node for r in store.history("long", state=RunState.RUNNING)] == ["a"],
            "a's run of long running",
        )
        [running] = store.history("long", state=RunState.RUNNING)
        nodes.append(Node(tmp_path, on_b, url, "b"))
        wait_until(lambda: waiting_slot(on_b, url), f"b's slot waiting\n{nodes[1].log}")
        wait = waiting_slot(on_b, url)
        assert wait is not None
        assert (wait["node"], wait["trigger"], wait["busy_on"]) == ("b", "schedule", ["a"])
        assert wait["slot"] is not None and wait["since"] is not None
        assert wait["awaiting_takeover"] is False and "busy on a" in wait["reason"]
        # Node a (where it does not wait) shows it in its API and its pages.
        api = httpx.get(f"{page}/api/status", timeout=30).json()
        assert [(w["job"], w["run_id"], w["node"]) for w in api["waiting"]] == [
            ("long", wait["run_id"], "b")
        ]
        job = httpx.get(f"{page}/api/jobs/long", timeout=30).json()
        assert [r["run_id"] for r in job["running"]] == [running.run_id]
        assert [(w["run_id"], w["node"], w["busy_on"]) for w in job["waiting"]] == [
            (wait["run_id"], "b", ["a"])
        ]
        assert httpx.get(f"{page}/api/jobs/nothing", timeout=30).status_code == 404
        assert "Waiting for a busy job" in httpx.get(page, timeout=30).text
        job_page = httpx.get(f"{page}/jobs/long", timeout=30).text
        assert 'id="waiting"' in job_page and "busy on a" in job_page, job_page
        # The command line's text says it too.
        text = cli_text(on_b, url)
        assert "waiting (1):" in text and "on b" in text, text

        # The job removed from b's file: the wait ends at once, recorded on b.
        replace_file(on_b, WITHOUT_LONG)
        wait_until(
            lambda: (store.run(wait["run_id"]) or running).state is RunState.NOT_STARTED,
            f"the waiting slot ended\n{nodes[1].log}",
        )
        ended = store.run(wait["run_id"])
        assert ended is not None and (ended.reason, ended.node) == (REMOVED, "b")
        assert waiting_slot(on_b, url) is None
        assert httpx.get(f"{page}/api/status", timeout=30).json()["waiting"] == []
        assert [r.run_id for r in store.history("long", state=RunState.RUNNING)] == [
            running.run_id
        ]  # a's run goes on
    finally:
        for node in nodes:
            node.kill()
        store.close()


def test_the_waiting_slot_of_a_node_killed_ends_at_its_take_over(
    tmp_path: Path, nodes: list[Node], url: str
) -> None:
    """Node b, whose slot waits, is killed (kill -9): node a takes it over, which records the
    slot ``abandoned`` "node lost: b" (it never started) and deletes its row: nothing waits
    any more, and the job's next slot is free to wait."""
    on_a, on_b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    on_a.write_text(ON_A)
    on_b.write_text(ON_B)
    store = open_store(url)[0]
    try:
        nodes.append(Node(tmp_path, on_a, url, "a"))
        nodes[0].wait_log(r"jobscheduler running")
        store.submit("long", host="a")
        wait_until(
            lambda: [r.node for r in store.history("long", state=RunState.RUNNING)] == ["a"],
            "a's run of long running",
        )
        nodes.append(Node(tmp_path, on_b, url, "b"))
        wait_until(lambda: store.waiting_runs("long"), f"b's slot waiting\n{nodes[1].log}")
        [wait] = store.waiting_runs("long")
        nodes[1].kill()
        wait_until(
            lambda: store.run(wait.run_id) is not None,
            f"b taken over\n{nodes[0].log}",
        )
        ended = store.run(wait.run_id)
        assert ended is not None
        assert (ended.state, ended.reason, ended.slot) == (
            RunState.ABANDONED,
            "node lost: b",
            wait.slot,
        )
        assert store.waiting_runs() == []
        assert waiting_slot(on_a, url) is None
        nodes[0].wait_log(r"took over node b")
    finally:
        for node in nodes:
            node.kill()
        store.close()


def cli_text(config: Path, url: str) -> str:
    """``status`` as text."""
    done = subprocess.run(
        [sys.executable, "-m", "jobscheduler", "status", str(config), "--state", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
