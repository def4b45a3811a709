"""The job page, the run page and the live output against real daemons: two ``jobscheduler
run --http`` processes on one SQLite file. A job printing lines (markup among them) runs on
node A; node B's ``/runs/ID`` in headless Chromium and B's ``GET /api/runs/ID/output?follow=1``
read by a real HTTP client (Server-Sent Events) show its output while it runs, as text, with
every time in its zone; B's ``/jobs/NAME`` shows the chart and the schedule in words.

The job prints its first lines, then waits for a file the test writes once it has seen them
live on B: nothing here depends on how fast the machine is."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from chromium import chromium
from daemons import start_daemon
from playwright.sync_api import Dialog, expect

from jobscheduler.state import RunState, StateStore, open_store

DEADLINE = 60.0
TOKEN_ENV = "CONSOLE_DAEMON_TOKEN"
TOKEN = "console-daemon-token-0123456789"


def wait_until(condition: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    end = time.monotonic() + timeout
    while not (found := condition()):
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
    return found


def config_text(flag: Path) -> str:
    script = (
        "import os, time\n"
        "print('<script>alert(1)</script> line 1 & more', flush=True)\n"
        "print('line 2', flush=True)\n"
        f"while not os.path.exists({str(flag)!r}):\n"
        "    time.sleep(0.05)\n"
        "print('line 3: the end', flush=True)\n"
    )
    return (
        "jobs:\n"
        "  printer:\n"
        f"    command: [{json.dumps(sys.executable)}, -u, -c, {json.dumps(script)}]\n"
        '    cron: "30 2 * * *"\n'
        "    timezone: Europe/Berlin\n"
    )


class Node:
    """One daemon with its HTTP server, its log in its own file."""

    def __init__(self, directory: Path, config: Path, url: str, name: str, *extra: str) -> None:
        self.name = name
        self.log_path = directory / f"{name}.log"
        options = ("--log-level", "INFO", "--http", "127.0.0.1:0", *extra)
        self.process = start_daemon(config, url, name, self.log_path, options=options,
                                    new_session=True)  # fmt: skip

    @property
    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def page_url(self) -> str:
        def found() -> str | None:
            match = re.search(r"status page at (http://\S+)", self.log)
            return match.group(1) if match else None

        return str(wait_until(found, f"{self.name}'s status page:\n{self.log}"))

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)


@pytest.fixture
def cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, str, Path, StateStore]]:
    """Nodes a (actions on: its token) and b (read-only) on one SQLite file: their page URLs,
    the file the job waits for, and the store."""
    flag = tmp_path / "finish"
    config = tmp_path / "jobs.yaml"
    config.write_text(config_text(flag))
    url = f"sqlite:///{tmp_path / 'state.db'}"
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    a = Node(tmp_path, config, url, "a", "--token-env", TOKEN_ENV)
    b = Node(tmp_path, config, url, "b")
    store = None
    try:
        a_url, b_url = a.page_url(), b.page_url()
        store = open_store(url)[0]
        yield a_url, b_url, flag, store
    finally:
        flag.touch()  # a job still waiting ends
        for node in (a, b):
            node.kill()
        if store is not None:
            store.close()


def read_events(url: str, events: list[tuple[str, dict[str, Any], float]]) -> None:
    """Read the Server-Sent Events of `url` into `events` (name, data, when) until ``end``."""
    with (
        httpx.Client(timeout=httpx.Timeout(DEADLINE, connect=30)) as client,
        client.stream("GET", url) as answer,
    ):
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        name = ""
        for line in answer.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((name, json.loads(line.removeprefix("data: ")), time.monotonic()))
                if name == "end":
                    return


def test_node_b_shows_a_run_of_node_a_live_escaped_and_zoned(
    cluster: tuple[str, str, Path, StateStore],
) -> None:
    a_url, b_url, flag, store = cluster
    started = httpx.post(
        f"{a_url}/api/jobs/printer/run",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30,
    )
    assert started.status_code == 200, started.text
    run = wait_until(
        lambda: next(iter(store.history("printer", state=RunState.RUNNING)), None),
        "the run on node a",
    )
    assert run.node == "a"
    run_id = run.run_id

    # B's live output, read by a real HTTP client as Server-Sent Events, in its own thread.
    events: list[tuple[str, dict[str, Any], float]] = []
    reader = threading.Thread(
        target=read_events, args=(f"{b_url}/api/runs/{run_id}/output?follow=1", events)
    )
    reader.start()

    def streamed() -> str:
        text = ""
        for name, data, _ in list(events):
            if name == "output":
                text = data["output"] if "output" in data else text + data["append"]
        return text

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        dialogs: list[str] = []

        def on_dialog(dialog: Dialog) -> None:
            dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.goto(f"{b_url}/runs/{run_id}?tz=Europe/Berlin")
        expect(page.locator("#live")).to_have_text("(live)")
        output = page.locator("#output")
        expect(output).to_contain_text("line 2")
        # Both while the run still waits on node a: shown live, from the other node.
        wait_until(lambda: "line 2" in streamed(), "line 2 in b's event stream")
        assert "line 3" not in output.inner_text() and "line 3" not in streamed()
        assert store.run(run_id).state is RunState.RUNNING  # type: ignore[union-attr]
        # The markup it printed is text: on the page and in the stream alike.
        expect(output).to_contain_text("<script>alert(1)</script> line 1 & more")
        assert page.locator("#output script").count() == 0
        assert streamed().startswith("<script>alert(1)</script> line 1 & more\nline 2\n")
        # Every time carries its zone: Berlin as asked, UTC by default.
        facts = page.locator("dl.facts").inner_text()
        assert re.search(r"\d\d:\d\d:\d\d CES?T", facts), facts

        flag.touch()  # the job ends
        expect(page.locator("#state")).to_have_text("succeeded")
        expect(output).to_contain_text("line 3: the end")
        assert page.locator("#output script").count() == 0
        reader.join(DEADLINE)
        assert not reader.is_alive(), "the event stream did not end with the run"
        utc = httpx.get(f"{b_url}/runs/{run_id}", timeout=30).text
        record = store.run(run_id)
        assert record is not None and record.node == "a"
        assert f"{record.started:%Y-%m-%d %H:%M:%S} UTC" in utc

        # B's job page: the chart of the job's runs, the schedule in words with its zone.
        page.goto(f"{b_url}/jobs/printer?tz=Europe/Berlin")
        expect(page.locator("#schedule")).to_contain_text("At 02:30 AM (Europe/Berlin)")
        expect(page.locator("#chart svg rect[data-state=succeeded]")).to_have_count(1)
        box = page.locator("#chart svg").bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 50
        expect(page.locator(f'#chart a[href*="{run_id}"]')).to_have_count(1)
        for text in page.locator("#next li").all_inner_texts():
            assert text.endswith((" 02:30:00 CET", " 02:30:00 CEST")), text
        assert dialogs == []  # no script the job printed ever ran
        page.close()

    names = [name for name, _, _ in events]
    assert names[-1] == "end" and events[-1][1] == {"state": "succeeded"}
    assert names.count("output") >= 2  # the first lines, then the rest: live, not at the end
    assert streamed() == "<script>alert(1)</script> line 1 & more\nline 2\nline 3: the end\n"
