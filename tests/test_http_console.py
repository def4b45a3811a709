"""The operator's console over HTTP, through a real server (uvicorn on loopback) and a real
HTTP client (httpx): the job page, the run page, a run's output (whole and streamed as
Server-Sent Events), times in the zone asked for, bad zones and unknown names refused."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from jobscheduler import Job, Scheduler
from jobscheduler.app.http.chart import duration_chart
from jobscheduler.app.http.console import percentile, run_stats
from jobscheduler.app.http.server import HttpServer, serve_http
from jobscheduler.state import RunRecord, RunState

FAR = datetime(2099, 1, 1, tzinfo=UTC)
PY = sys.executable


def wait_until(check: Callable[[], object], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def site() -> Iterator[tuple[Scheduler, HttpServer, httpx.Client]]:
    sched = Scheduler(node="web-node", max_workers=4)
    hourly = datetime(2024, 1, 1, tzinfo=UTC)
    sched.add_jobs(
        [
            Job("echo", command=[PY, "-c", "print('<script>alert(1)</script>')"], start=hourly,
                interval="1 hour"),
            Job("flaky", command=[PY, "-c", "raise SystemExit(3)"], start=FAR, interval="1 day"),
            Job("printer", command=[PY, "-u", "-c",
                "import time\nfor i in range(6):\n    print('line', i)\n    time.sleep(0.5)"],
                start=FAR, interval="1 day"),
            Job("off", command=["true"], start=FAR, interval="1 day", enabled=False),
        ]
    )  # fmt: skip
    sched.start()
    server = serve_http(sched, "127.0.0.1", 0)
    client = httpx.Client(base_url=server.url, timeout=20)
    yield sched, server, client
    client.close()
    server.close()
    sched.shutdown(wait=False)


def ended_runs(sched: Scheduler, job: str) -> list[RunRecord]:
    return [r for r in sched.history(job) if r.ended is not None]


def test_the_job_page_shows_definition_schedule_next_runs_figures_chart_history(
    site: tuple[Scheduler, HttpServer, httpx.Client],
) -> None:
    sched, _, client = site
    for _ in range(3):
        sched.run_now("echo")
        wait_until(lambda: not sched.executing)
    sched.run_now("flaky")
    wait_until(lambda: len(ended_runs(sched, "echo")) == 3 and ended_runs(sched, "flaky"))
    page = client.get("/jobs/echo")
    assert page.status_code == 200
    html = page.text
    # The schedule in words, with its zone, and its short form as tools read it.
    assert 'id="schedule">Every hour, from 2024-01-01 00:00 (' in html
    assert 'id="schedule-text">every 1 hour from 2024-01-01T00:00:00' in html
    assert "100.0 % of the last 3 run(s)" in html
    assert re.search(r"p50 [\d.]+ s · p95 [\d.]+ s", html)
    next_runs = re.findall(r"<li>(\d{4}-\d\d-\d\d \d\d:00:00 UTC)</li>", html)
    assert len(next_runs) == 10
    # The chart: one bar per run, each linking to its run's page.
    svg = re.search(r"<svg.*?</svg>", html, re.S)
    assert svg is not None and svg.group(0).count("<rect") == 3
    assert svg.group(0).count('data-state="succeeded"') == 3
    run_ids = [r.run_id for r in sched.history("echo")]
    for run_id in run_ids:
        assert f'href="../runs/{run_id}"' in html
    # The definition is escaped, never markup.
    assert "&lt;script&gt;" in html and "<script>alert" not in html
    failed = client.get("/jobs/flaky").text
    assert "0.0 % of the last 1 run(s)" in failed and 'data-state="failed"' in failed
    disabled = client.get("/jobs/off").text
    assert "disabled: enabled is false" in disabled and "None while paused." in disabled
    sched.pause_job("echo", note="deploy <b>")
    paused = client.get("/jobs/echo").text
    assert f"paused by {sched.node} since " in paused and "deploy &lt;b&gt;" in paused
    assert "None while paused." in paused
    sched.resume_job("echo")


def test_times_carry_the_zone_asked_for(
    site: tuple[Scheduler, HttpServer, httpx.Client],
) -> None:
    sched, _, client = site
    sched.run_now("echo")
    wait_until(lambda: ended_runs(sched, "echo"))
    [run] = sched.history("echo")
    berlin = client.get("/jobs/echo", params={"tz": "Europe/Berlin"}).text
    local = run.started.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Berlin"))
    assert f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}" in berlin
    assert re.findall(r"<li>[^<]*</li>", berlin)[0].endswith(("CET</li>", "CEST</li>"))
    assert f'href="../runs/{run.run_id}?tz=Europe%2FBerlin"' in berlin
    utc = client.get(f"/runs/{run.run_id}").text
    assert f"{run.started:%Y-%m-%d %H:%M:%S} UTC" in utc
    for path in ("/", "/jobs/echo", f"/runs/{run.run_id}"):
        refused = client.get(path, params={"tz": "Nowhere"})
        assert refused.status_code == 400, path
        assert "unknown time zone &#39;Nowhere&#39;" in refused.text
        assert "Europe/Berlin" in refused.text
    # The API writes UTC: a `tz` is refused there with a JSON reason, never ignored.
    api = ("/api/status", "/api/jobs", "/api/history", f"/api/runs/{run.run_id}",
           f"/api/runs/{run.run_id}/output")  # fmt: skip
    for path in api:
        unknown = client.get(path, params={"tz": "Nowhere"})
        assert unknown.status_code == 400, path
        assert "unknown time zone 'Nowhere'" in unknown.json()["error"], path
        known = client.get(path, params={"tz": "Europe/Berlin"})
        assert known.status_code == 400, path
        assert "the API writes every time in UTC" in known.json()["error"], path
        assert client.get(path, params={"tz": ""}).status_code == 200, path


def test_the_run_page_and_api_give_the_record_and_its_output_escaped(
    site: tuple[Scheduler, HttpServer, httpx.Client],
) -> None:
    sched, _, client = site
    sched.run_now("echo")
    wait_until(lambda: ended_runs(sched, "echo"))
    [run] = sched.history("echo")
    page = client.get(f"/runs/{run.run_id}")
    assert page.status_code == 200
    assert '<pre class="output" id="output">&lt;script&gt;alert(1)&lt;/script&gt;' in page.text
    assert "<script>alert" not in page.text and "EventSource" not in page.text  # ended
    answer = client.get(f"/api/runs/{run.run_id}").json()
    assert answer["output"] == "<script>alert(1)</script>\n" == answer["output_tail"]
    assert answer["state"] == "succeeded" and answer["duration"] == run.duration
    text = client.get(f"/api/runs/{run.run_id}/output")
    assert text.text == "<script>alert(1)</script>\n"
    assert text.headers["content-type"].startswith("text/plain")
    for path in ("/runs/nope", "/api/runs/nope", "/api/runs/nope/output", "/jobs/nope"):
        missing = client.get(path)
        assert missing.status_code == 404 and "nope" in missing.text, path
    assert client.get(f"/api/runs/{run.run_id}/output?follow=yes").status_code == 400


def _events(text: str) -> list[tuple[str, dict[str, object]]]:
    found = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        found.append((lines["event"], json.loads(lines["data"])))
    return found


def test_a_running_run_streams_its_output_until_it_ends(
    site: tuple[Scheduler, HttpServer, httpx.Client],
) -> None:
    sched, _, client = site
    sched.run_now("printer")
    wait_until(lambda: sched.history("printer"))
    [run] = sched.history("printer")
    page = client.get(f"/runs/{run.run_id}").text
    assert "(live)" in page and "EventSource" in page
    with client.stream("GET", f"/api/runs/{run.run_id}/output", params={"follow": 1}) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        body = "".join(stream.iter_text())
    events = _events(body)
    assert events[-1] == ("end", {"state": "succeeded"})
    shown = ""
    for name, data in events[:-1]:
        assert name == "output"
        shown = str(data["output"]) if "output" in data else shown + str(data["append"])
    assert shown == "".join(f"line {i}\n" for i in range(6))
    # While it ran (3 s), the output reached the store, and the stream, in several pieces.
    pieces = [data for _, data in events[:-1] if data.get("output") or data.get("append")]
    assert len(pieces) >= 2, events


def test_the_jobs_list_is_searched_and_paged(
    site: tuple[Scheduler, HttpServer, httpx.Client],
) -> None:
    sched, _, client = site
    sched.add_jobs(Job(f"bulk-{i:04d}", command=["true"], start=FAR, interval="1 day")
                   for i in range(450))  # fmt: skip
    first = client.get("/", params={"q": "bulk-"}).text
    assert "450 job(s) matching “bulk-”" in first and "page 1 of 3" in first
    assert 'href="jobs/bulk-0000"' in first and "bulk-0200" not in first
    third = client.get("/", params={"q": "bulk-", "page": 3, "tz": "Asia/Tokyo"}).text
    assert "bulk-0449" in third and "bulk-0399" not in third and "JST" in third
    assert client.get("/api/jobs", params={"q": "bulk-04"}).json()["total"] == 50


# -- the figures and the chart, without a server ---------------------------------------------


T0 = datetime(2024, 1, 1, tzinfo=UTC)


def record(n: int, state: str, seconds: float | None) -> RunRecord:
    ended = None if state == "running" else T0 + timedelta(seconds=seconds or 0)
    return RunRecord(
        run_id=f"r{n}", job="j", slot=None, trigger="run_now", attempt=1, node="n",
        state=RunState(state), started=T0, ended=ended,
    )  # fmt: skip


def test_run_stats_and_percentiles() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0 and percentile([1.0, 2.0], 95) == 2.0
    values = [float(n) for n in range(1, 101)]
    assert percentile(values, 50) == 50.0 and percentile(values, 95) == 95.0
    records = [
        record(1, "succeeded", 10),
        record(2, "failed", 20),
        record(3, "skipped", None),
        record(4, "not_started", None),
        record(5, "running", None),
        record(6, "succeeded", 30),
    ]
    stats = run_stats(records)
    assert stats == {"runs": 4, "success_rate": 0.5, "p50": 20.0, "p95": 30.0}
    assert run_stats([]) == {"runs": 0, "success_rate": None, "p50": None, "p95": None}


def test_the_chart_draws_a_bar_per_run_oldest_left_and_escapes() -> None:
    records = [record(2, "failed", 20), record(1, "succeeded", 10), record(3, "skipped", None)]
    records[0] = RunRecord(**{**records[0].__dict__, "run_id": "<evil>"})
    svg = duration_chart(records, UTC)
    bars = re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"', svg)
    assert len(bars) == 3
    xs = [float(x) for x, _, _ in bars]
    assert xs == sorted(xs)  # oldest (the last of history's newest-first list) on the left
    heights = [float(h) for _, _, h in bars]
    assert heights[2] == 2 * heights[1] and heights[0] == 3.0  # failed 20 s, succeeded 10 s
    assert "<evil>" not in svg and "%3Cevil%3E" in svg
    assert "no runs yet" in duration_chart([], UTC)


def test_next_runs_are_the_soonest_jobs_each_once() -> None:
    sched = Scheduler(node="n")
    first = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    sched.add_jobs(
        Job(f"j{i:02d}", command=["true"], start=first + timedelta(minutes=(i * 37) % 60),
            interval="1 hour", timezone="Asia/Tokyo" if i % 2 else "UTC")
        for i in range(60)
    )  # fmt: skip
    sched.add_job(Job("early-but-off", command=["true"], start=first, interval="1 hour",
                      enabled=False))  # fmt: skip
    try:
        before = sched.next_runs(10)  # from the definitions, before start
        sched.start()
        names = [name for name in sched.catalog.jobs]
        every = [(name, when) for name in names if (when := sched.next_run(name)) is not None]
        every.sort(key=lambda entry: entry[1])
        assert sched.next_runs(10) == every[:10] == before
        assert "early-but-off" not in dict(sched.next_runs(100))
        assert len(sched.next_runs(100)) == 60
    finally:
        sched.shutdown(wait=False)
