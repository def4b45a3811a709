"""Real ``jobscheduler run`` daemons on one SQLite file (and, for the edit, on a real
PostgreSQL server too): a hand edit of their file taken up by both without a signal, an
invalid edit refused (logged once, with the file, line, job and key) and the definitions in
force kept; nodes whose files differ shown by ``status --json`` and ``GET /api/nodes``; a
queue row of a job no node defines ending ``not_started``; a daemon killed with kill -9
shown ``lost`` with its run awaiting takeover.

Every wait polls a condition with a generous deadline (a loaded machine); the time an edit
takes to reach the nodes is measured by bench/edit_reach.py, not asserted here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from daemons import start_daemon
from pg_server import PgServer

from jobscheduler.runners.procs import stop_group
from jobscheduler.state import StateStore, open_store

DEADLINE = 60.0
LEASE = "3"

TICK = """\
jobs:
  tick:
    command: [sh, -c, "echo tick >> ticks.txt"]
    start: 2024-01-01 00:00:00
    interval: 1 second
"""


def wait_until(condition: Callable[[], object], what: str, timeout: float = DEADLINE) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class Node:
    """One daemon of the cluster, its log in its own file."""

    def __init__(self, directory: Path, config: Path, state: str, name: str, *extra: str):
        self.name = name
        self.log_path = directory / f"{name}.log"
        options = ("--lease", LEASE, "--log-level", "INFO", *extra)
        self.process = start_daemon(
            config, state, name, self.log_path, options=options, new_session=True
        )

    @property
    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def wait_log(self, pattern: str) -> re.Match[str]:
        found: list[re.Match[str]] = []

        def search() -> bool:
            match = re.search(pattern, self.log, re.MULTILINE)
            if match:
                found.append(match)
            return match is not None

        wait_until(search, f"{pattern!r} in {self.name}'s log:\n{self.log}")
        return found[0]

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)


@pytest.fixture
def nodes() -> Iterator[list[Node]]:
    started: list[Node] = []
    yield started
    for node in started:
        node.kill()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[str, StateStore]]:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    opened = open_store(url)[0]
    yield url, opened
    opened.close()


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, StateStore]]:
    """The SQLite file, or a fresh schema of the session's PostgreSQL server."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.db'}"
    else:
        server: PgServer = request.getfixturevalue("pg_server")
        url = server.fresh_schema_url()
    opened = open_store(url)[0]
    yield url, opened
    opened.close()


def cli_json(config: Path, state: str, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "jobscheduler", *args, str(config), "--state", state, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def replace_file(path: Path, text: str) -> None:
    """An editor's save: a temporary file beside the target, renamed over it."""
    target = path.resolve()
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.write_text(text)
    temporary.replace(target)


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_two_daemons_take_up_a_hand_edit_and_refuse_an_invalid_one_once(
    tmp_path: Path, nodes: list[Node], any_store: tuple[str, StateStore]
) -> None:
    url, opened = any_store
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "jobs.yaml").write_text(TICK)
    config = tmp_path / "jobs.yaml"  # a link to the file, as configuration managers make
    config.symlink_to(tmp_path / "conf" / "jobs.yaml")
    nodes += [Node(tmp_path, config, url, name) for name in ("n1", "n2")]
    for node in nodes:
        node.wait_log(r"jobscheduler running: 1 jobs")
    ticks = tmp_path / "ticks.txt"
    wait_until(lambda: lines(ticks) >= 1, "a tick")

    edited = TICK + '  tock:\n    command: [sh, -c, "echo tock >> tocks.txt"]\n'
    edited += "    start: 2024-01-01 00:00:00\n    interval: 1 second\n"
    began = time.monotonic()
    replace_file(config, edited)
    for node in nodes:
        node.wait_log(r"configuration reloaded: 2 jobs")
    wait_until(
        lambda: all(n.defined_jobs == ("tick", "tock") for n in opened.nodes()),
        "both nodes to publish the new job",
    )
    print(f"edit reached both nodes in {time.monotonic() - began:.2f} s")
    wait_until(lambda: lines(tmp_path / "tocks.txt") >= 1, "the added job to run")

    bad_line = len(edited.splitlines()) + 3  # the line of 'colour'
    broken = edited + '  broken:\n    command: ["true"]\n    colour: blue\n    on_demand: true\n'
    replace_file(config, broken)
    for node in nodes:
        problem = node.wait_log(r"ERROR jobscheduler\.daemon:   (.*)$").group(1)
        assert problem.startswith(f"{config}:{bad_line}, job 'broken', key 'colour': ")
    # The definitions in force are kept: both jobs run on.
    ticked, tocked = lines(ticks), lines(tmp_path / "tocks.txt")
    wait_until(
        lambda: lines(ticks) > ticked + 2 and lines(tmp_path / "tocks.txt") > tocked + 2,
        "both jobs to run on",
    )
    assert all(n.defined_jobs == ("tick", "tock") for n in opened.nodes())

    replace_file(config, broken.replace("    colour: blue\n", ""))
    for node in nodes:
        node.wait_log(r"configuration reloaded: 3 jobs")
        assert node.log.count("reload refused") == 1, node.log  # logged once, not each look
        assert "Traceback" not in node.log
    wait_until(
        lambda: all(n.defined_jobs == ("broken", "tick", "tock") for n in opened.nodes()),
        "the fixed file published",
    )


def test_nodes_whose_files_differ_show_in_status_and_api_nodes(
    tmp_path: Path, nodes: list[Node], store: tuple[str, StateStore]
) -> None:
    url, _ = store
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text(TICK)
    two.write_text(TICK + '  extra:\n    command: ["true"]\n    on_demand: true\n')
    nodes.append(Node(tmp_path, one, url, "n1", "--http", "127.0.0.1:0"))
    nodes.append(Node(tmp_path, two, url, "n2"))
    page = nodes[0].wait_log(r"status page at (http://\S+)").group(1)
    nodes[1].wait_log(r"jobscheduler running")

    def differ() -> Any:
        data = cli_json(one, url, "status")
        published = [n["definitions_digest"] for n in data["nodes"]]
        return data if len(published) == 2 and None not in published else None

    wait_until(differ, "both nodes' digests in the store")
    data = differ()
    assert [(n["name"], n["definitions_match"]) for n in data["nodes"]] == [
        ("n1", False),
        ("n2", False),
    ]
    assert data["definitions"]["same"] is False
    assert data["definitions"]["some_nodes_only"] == [
        {"job": "extra", "on": ["n2"], "not_on": ["n1"]}
    ]
    api = httpx.get(f"{page}/api/nodes", timeout=30).json()
    assert api["node"] == "n1"
    assert api["definitions"] == data["definitions"]
    assert [n["defined_jobs"] for n in api["nodes"]] == [1, 2]
    text = httpx.get(page, timeout=30).text
    assert "Definitions differ" in text and "extra" in text

    replace_file(one, two.read_text())  # taken up by itself: the nodes agree
    wait_until(lambda: cli_json(one, url, "status")["definitions"]["same"], "the nodes to agree")
    assert all(n["definitions_match"] for n in cli_json(one, url, "status")["nodes"])


def test_a_queue_row_of_a_job_no_node_defines_ends_not_started(
    tmp_path: Path, nodes: list[Node], store: tuple[str, StateStore]
) -> None:
    url, opened = store
    config = tmp_path / "jobs.yaml"
    config.write_text(TICK)
    nodes.append(Node(tmp_path, config, url, "n1"))
    nodes[0].wait_log(r"jobscheduler running")
    # Another program asks for a run with a plain insert (docs/operations.md).
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute("INSERT INTO jobscheduler_queue (job, args) VALUES ('ghost', '{}')")
    wait_until(
        lambda: [r.state for r in opened.queue()] == ["not_started"],
        "the row to end not_started",
    )
    [row] = opened.queue()
    # Settled first (whoever takes the row at the same time wins it), then recorded.
    wait_until(lambda: opened.history("ghost"), "the run record")
    [record] = opened.history("ghost")
    assert (record.run_id, record.reason, record.trigger) == (
        row.run_id,
        "unknown job ghost",
        "submit",
    )
    nodes[0].wait_log(r"queue row \d+ ended not_started: unknown job ghost")


def test_a_node_killed_shows_lost_with_its_run_awaiting_takeover(
    tmp_path: Path, nodes: list[Node], store: tuple[str, StateStore]
) -> None:
    url, opened = store
    config = tmp_path / "jobs.yaml"
    config.write_text("jobs:\n  slow:\n    command: [sleep, '60']\n    on_demand: true\n")
    nodes.append(Node(tmp_path, config, url, "n1"))
    nodes[0].wait_log(r"jobscheduler running")
    opened.submit("slow")
    wait_until(lambda: opened.processes("n1"), "the run to start")
    try:
        nodes[0].kill()  # kill -9: no goodbye, its run left running
        lost_and_taken_over(tmp_path, nodes, config, url, opened)
    finally:
        for _run_id, pid, started in opened.processes("n1"):
            stop_group(pid, started)  # its own process group: not killed with the node


def lost_and_taken_over(
    tmp_path: Path, nodes: list[Node], config: Path, url: str, opened: StateStore
) -> None:

    def lost() -> Any:
        data = cli_json(config, url, "status")
        return data if data["nodes"][0]["state"] == "lost" else None

    wait_until(lost, "the node shown lost")
    data = lost()
    [node] = data["nodes"]
    assert node["lost_since"] is not None and node["definitions_match"] is None
    [run] = data["running"]
    assert (run["job"], run["node"], run["awaiting_takeover"]) == ("slow", "n1", True)
    done = subprocess.run(
        [sys.executable, "-m", "jobscheduler", "status", str(config), "--state", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert re.search(r"^  n1  lost since \S+ \(lease expired", done.stdout, re.MULTILINE)
    assert "awaiting takeover (node lost)" in done.stdout
    # A node that comes up takes it over: dead, its run abandoned.
    nodes.append(Node(tmp_path, config, url, "n2"))
    wait_until(
        lambda: cli_json(config, url, "status")["nodes"][0]["state"] == "dead", "the takeover"
    )
    assert opened.history("slow")[0].state == "abandoned"
