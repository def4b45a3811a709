"""The HTTP API and its guard, through a real server (uvicorn on loopback) and a real HTTP
client (httpx); the API against its own OpenAPI description with schemathesis."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobscheduler import Job, Scheduler
from jobscheduler.app.http.actions import BODY_LIMIT
from jobscheduler.app.http.app import build_app
from jobscheduler.app.http.context import Context
from jobscheduler.app.http.openapi import openapi
from jobscheduler.app.http.security import COOKIE, Guard, http_settings, is_loopback
from jobscheduler.app.http.server import HttpServer, serve_http
from jobscheduler.errors import JobActionError
from jobscheduler.state import StateStore

TOKEN = "t0ken-for-the-tests-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FAR = datetime(2099, 1, 1, tzinfo=UTC)


def wait_until(check: Callable[[], object], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def make_scheduler(state: str | StateStore = "memory") -> Scheduler:
    sched = Scheduler(state=state, node="web-node", max_workers=4)
    echo = [
        sys.executable,
        "-c",
        "import os; print('<script>alert(1)</script>', os.environ.get('JOBSCHEDULER_ARGS'))",
    ]
    sched.add_job(Job("echo", command=echo, start=FAR, interval="1 day"))
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    sched.add_job(Job("sleeper", command=sleeper, start=FAR, interval="1 day"))
    sched.add_job(Job("off", command=["true"], start=FAR, interval="1 day", enabled=False))
    sched.start()
    return sched


@pytest.fixture
def served(store: StateStore) -> Iterator[tuple[Scheduler, HttpServer, httpx.Client]]:
    sched = make_scheduler(store)
    server = serve_http(sched, "127.0.0.1", 0, token=TOKEN)
    client = httpx.Client(base_url=server.url, timeout=10)
    yield sched, server, client
    client.close()
    server.close()
    sched.shutdown(wait=False)


def test_reads_on_loopback_need_no_token(
    served: tuple[Scheduler, HttpServer, httpx.Client],
) -> None:
    _, _, client = served
    status = client.get("/api/status").json()
    assert status["node"] == "web-node" and status["running"] == [] and status["failures"] == []
    jobs = client.get("/api/jobs").json()
    assert [j["name"] for j in jobs["jobs"]] == ["echo", "sleeper", "off"] and jobs["total"] == 3
    assert client.get("/api/jobs", params={"q": "slee"}).json()["total"] == 1
    assert client.get("/api/history").json() == []
    assert client.get("/api/queue").json() == []
    assert client.get("/api/openapi.json").json()["openapi"] == "3.1.0"
    metrics = client.get("/metrics")
    assert metrics.status_code == 200 and "jobscheduler_queue_depth 0.0" in metrics.text


def test_actions_run_submit_pause_resume_kill(
    served: tuple[Scheduler, HttpServer, httpx.Client],
) -> None:
    sched, _, client = served
    answer = client.post(
        "/api/jobs/echo/submit", json={"args": {"day": "mon"}, "priority": 2}, headers=AUTH
    )
    assert answer.status_code == 201
    queue_id = answer.json()["queue_id"]
    wait_until(lambda: client.get("/api/queue").json()[0]["state"] == "succeeded")
    [row] = client.get("/api/queue").json()
    assert row["id"] == queue_id and row["args"] == {"day": "mon"} and row["priority"] == 2
    [record] = client.get("/api/history", params={"job": "echo"}).json()
    assert record["trigger"] == "submit" and '{"day":"mon"}' in record["output_tail"]
    assert isinstance(record["duration"], float) and 0 < record["duration"] < 30
    assert client.post("/api/jobs/echo/run", headers=AUTH).json() == {"started": "echo"}
    wait_until(
        lambda: (
            [r["state"] for r in client.get("/api/history", params={"job": "echo"}).json()]
            == ["succeeded", "succeeded"]
        )
    )
    paused = client.post("/api/jobs/echo/pause", headers=AUTH, json={"note": "deploy", "for": "2h"})
    assert paused.status_code == 200, paused.text
    assert paused.json()["pause"]["note"] == "deploy" and paused.json()["pause"]["until"]
    assert sched.pause_of("echo") is not None and sched.get_job("echo").enabled
    [row] = [j for j in client.get("/api/jobs").json()["jobs"] if j["name"] == "echo"]
    assert row["paused"]["node"] == sched.node and row["paused"]["note"] == "deploy"
    for bad in ({"for": "2"}, {"for": 5}, {"note": 5}, {"until": "x"}):
        refused = client.post("/api/jobs/echo/pause", headers=AUTH, json=bad)
        assert refused.status_code == 400 and refused.json()["error"], bad
    assert client.post("/api/jobs/echo/resume", headers=AUTH).status_code == 200
    assert sched.pause_of("echo") is None
    assert client.post("/api/jobs/sleeper/run", headers=AUTH).status_code == 200
    wait_until(lambda: client.get("/api/status").json()["running"])
    [running] = client.get("/api/status").json()["running"]
    killed = client.post(f"/api/runs/{running['run_id']}/kill", headers=AUTH)
    assert killed.json() == {"requested": 1}
    wait_until(lambda: not client.get("/api/status").json()["running"])
    [failure] = client.get("/api/status").json()["failures"]
    assert failure["reason"] == "killed" and failure["job"] == "sleeper"
    metrics = client.get("/metrics").text
    assert 'jobscheduler_runs_total{job="echo",outcome="succeeded"} 2.0' in metrics
    assert 'jobscheduler_runs_total{job="sleeper",outcome="failed"} 1.0' in metrics
    assert 'jobscheduler_run_duration_seconds_count{job="echo"} 2.0' in metrics
    assert 'jobscheduler_run_duration_seconds_bucket{job="sleeper",le="+Inf"} 1.0' in metrics


def _nested(depth: int) -> bytes:
    """A submit whose args nest `depth` objects deep."""
    return b'{"args": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}"


def _refusals() -> list[tuple[str, str, dict[str, Any], int, str]]:
    big = b"{" + b" " * (BODY_LIMIT + 10) + b"}"
    return [
        ("/api/jobs/echo/run", "none", {}, 401, "need the token"),
        ("/api/jobs/echo/run", "wrong", {}, 403, "wrong token"),
        ("/api/jobs/nope/run", "ok", {}, 404, "no job"),
        ("/api/jobs/nope/submit", "ok", {}, 404, "no job"),
        ("/api/jobs/echo/explode", "ok", {}, 404, "no action"),
        ("/api/jobs/off/submit", "ok", {}, 409, "paused"),
        ("/api/jobs/echo/submit", "ok", {"content": b"{not json"}, 400, "not valid JSON"),
        ("/api/jobs/echo/submit", "ok", {"content": b"[1, 2]"}, 400, "JSON object"),
        ("/api/jobs/echo/submit", "ok", {"content": _nested(970)}, 400, "nested deeper than 64"),
        ("/api/jobs/echo/submit", "ok", {"content": _nested(5000)}, 400, "nested deeper"),
        ("/api/jobs/echo/submit", "ok", {"json": {"cmd": "rm -rf /"}}, 400, "unknown fields"),
        ("/api/jobs/echo/submit", "ok", {"json": {"args": "x"}}, 400, "args must be"),
        ("/api/jobs/echo/submit", "ok", {"json": {"priority": "high"}}, 400, "priority"),
        ("/api/jobs/echo/run", "ok", {"json": {"command": "id"}}, 400, "takes no body"),
        ("/api/jobs/echo/submit", "ok", {"content": big}, 413, "larger than"),
        ("/api/runs/no-such-run/kill", "ok", {}, 404, "no run has the id"),
    ]


@pytest.mark.parametrize(("path", "token", "body", "status", "reason"), _refusals())
def test_bad_requests_are_refused_with_a_reason_and_change_nothing(
    served: tuple[Scheduler, HttpServer, httpx.Client],
    path: str,
    token: str,
    body: dict[str, Any],
    status: int,
    reason: str,
) -> None:
    sched, _, client = served
    headers = {"ok": AUTH, "wrong": {"Authorization": "Bearer nope"}, "none": {}}[token]
    answer = client.post(path, headers=headers, **body)
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/json"
    assert reason in answer.json()["error"]
    time.sleep(0.1)
    assert client.get("/api/queue").json() == [] and client.get("/api/history").json() == []
    assert [j.enabled for j in sched.jobs] == [True, True, False]


def test_a_full_queue_is_429(served: tuple[Scheduler, HttpServer, httpx.Client]) -> None:
    sched, _, client = served
    sched.stop()  # nothing takes the rows
    sched.queue.max_pending = 1
    assert client.post("/api/jobs/echo/submit", headers=AUTH).status_code == 201
    answer = client.post("/api/jobs/echo/submit", headers=AUTH)
    assert answer.status_code == 429 and "full" in answer.json()["error"]
    assert len(client.get("/api/queue").json()) == 1


def test_output_tails_are_escaped_on_the_page(
    served: tuple[Scheduler, HttpServer, httpx.Client],
) -> None:
    _, _, client = served
    client.post("/api/jobs/echo/run", headers=AUTH)
    wait_until(lambda: [r["state"] for r in client.get("/api/history").json()] == ["succeeded"])
    page = client.get("/")
    assert page.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "<script>alert" not in page.text


def test_the_page_form_flow_needs_the_cookie_and_the_form_check(
    served: tuple[Scheduler, HttpServer, httpx.Client],
) -> None:
    sched, _, client = served
    form = {
        "action": "pause",
        "job": "echo",
        "check": Guard(TOKEN, loopback=True).form_check("pause"),
    }
    assert client.post("/action", data=form).status_code == 401  # no cookie yet
    assert client.post("/login", data={"token": "wrong"}).status_code == 403
    signed = client.post("/login", data={"token": TOKEN})
    assert signed.status_code == 303
    cookie = signed.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and TOKEN not in cookie
    forged = dict(form, check="0" * 64)
    assert client.post("/action", data=forged).status_code == 403  # cookie, no form check
    assert sched.pause_of("echo") is None
    done = client.post("/action", data=form)
    assert done.status_code == 303 and sched.pause_of("echo") is not None
    assert client.cookies.get(COOKIE)


def test_beyond_loopback_reads_need_the_token_too() -> None:
    sched = make_scheduler()
    ctx = Context(sched, Guard(TOKEN, loopback=False))

    async def statuses() -> list[int]:
        transport = httpx.ASGITransport(app=build_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://web") as client:
            return [
                (await client.get(path, headers=headers)).status_code
                for path in ("/api/status", "/metrics", "/")
                for headers in ({}, AUTH)
            ]

    try:
        # Without the token: 401 (the page shows its sign-in form); with it: 200.
        assert asyncio.run(statuses()) == [401, 200, 401, 200, 401, 200]
    finally:
        ctx.close()
        sched.shutdown(wait=False)


def test_on_loopback_a_foreign_host_header_is_refused(
    served: tuple[Scheduler, HttpServer, httpx.Client],
) -> None:
    _, _, client = served
    assert client.get("/api/status", headers={"Host": "evil.example"}).status_code == 400
    assert client.get("/api/status", headers={"Host": "localhost:1234"}).status_code == 200


def test_without_a_token_the_server_is_read_only() -> None:
    sched = make_scheduler()
    server = serve_http(sched, "127.0.0.1", 0)
    try:
        answer = httpx.post(f"{server.url}/api/jobs/echo/run", headers=AUTH)
        assert answer.status_code == 403 and "no token" in answer.json()["error"]
    finally:
        server.close()
        sched.shutdown(wait=False)


def test_http_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JS_TOKEN", TOKEN)
    monkeypatch.setenv("JS_SHORT", "abc")
    assert http_settings(None, None) is None
    assert http_settings("127.0.0.1:8080", None) == ("127.0.0.1", 8080, None)
    assert http_settings("0.0.0.0:80", "JS_TOKEN") == ("0.0.0.0", 80, TOKEN)
    for http, env, message in [
        ("0.0.0.0:8080", None, "beyond loopback needs a token"),
        ("127.0.0.1", None, "HOST:PORT"),
        ("127.0.0.1:99999", None, "HOST:PORT"),
        ("127.0.0.1:8080", "JS_MISSING", "not set"),
        ("127.0.0.1:8080", "JS_SHORT", "too short"),
        (None, "JS_TOKEN", "needs --http"),
    ]:
        with pytest.raises(JobActionError, match=message):
            http_settings(http, env)
    with pytest.raises(JobActionError, match="beyond loopback"):
        serve_http(Scheduler(), "0.0.0.0", 0)


# -- schemathesis: the API against its own description --------------------------------------

schema = schemathesis.openapi.from_dict(openapi())


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    sched = make_scheduler()
    sched.queue.max_pending = 50
    server = serve_http(sched, "127.0.0.1", 0, token=TOKEN)
    yield server.url
    server.close()
    sched.shutdown(wait=False)


# Every case on one worker: they share one server (`api`).
@pytest.mark.xdist_group("http_openapi")
@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_the_api_keeps_its_openapi_description(case: schemathesis.Case, api: str) -> None:
    case.call_and_validate(
        base_url=api,
        headers=AUTH,
        checks=[
            schemathesis.checks.not_a_server_error,
            schemathesis.checks.status_code_conformance,
            schemathesis.checks.content_type_conformance,
            schemathesis.checks.response_schema_conformance,
        ],
    )


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_http_settings_accept_or_refuse_clearly(text: str) -> None:
    """Whatever ``--http`` is given, a (host, port, token) or a `JobActionError`."""
    try:
        got = http_settings(text, None)
    except JobActionError:
        return
    assert got is not None
    host, port, token = got
    assert 0 <= port <= 65535 and token is None and is_loopback(host)


def test_a_job_whose_name_holds_a_slash_is_reached_by_every_route() -> None:
    """Names are free text: ``team/report`` is reached encoded (``team%2Freport``) by its
    page, its actions and its backfill, and the overview links to it that way."""
    sched = Scheduler(node="web-node", max_workers=2)
    sched.add_job(Job("team/report", command=["true"], start=FAR, interval="1 day"))
    sched.add_job(Job("team/report/run", command=["true"], on_demand=True))
    sched.start()
    server = serve_http(sched, "127.0.0.1", 0, token=TOKEN)
    try:
        with httpx.Client(base_url=server.url, timeout=10) as client:
            assert 'href="jobs/team%2Freport"' in client.get("/").text
            page = client.get("/jobs/team%2Freport")
            assert page.status_code == 200 and "team/report" in page.text
            pause = client.post("/api/jobs/team%2Freport/pause", headers=AUTH)
            assert pause.status_code < 300, pause.text
            assert sched.pause_of("team/report") is not None
            run = client.post("/api/jobs/team%2Freport%2Frun/run", headers=AUTH)
            assert run.status_code < 300, run.text
            wait_for = time.monotonic() + 60
            while not sched.history("team/report/run"):
                assert time.monotonic() < wait_for, "the run never came"
                time.sleep(0.05)
            dry = client.post(
                "/api/jobs/team%2Freport/backfill",
                headers=AUTH,
                json={
                    "from": "2099-01-01T00:00:00Z",
                    "to": "2099-01-03T00:00:00Z",
                    "dry_run": True,
                },
            )
            assert dry.status_code == 200, dry.text
            assert client.post("/api/jobs/team%2Fnope/run", headers=AUTH).status_code == 404
    finally:
        server.close()
        sched.shutdown(wait=False)
