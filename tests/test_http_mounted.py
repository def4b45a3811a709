"""``scheduler.asgi_app()`` mounted under a prefix in a Starlette application, in process
(httpx's ASGI transport): redirects, forms and the cookie's path under the prefix, the token
rules of a mounted app, and ``scheduler.lifespan`` starting and stopping the scheduler."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from jobscheduler import Job, JobActionError, JobType
from jobscheduler.scheduler import Scheduler

TOKEN = "mounted-token-0123456789"


def noop() -> None:
    pass


@pytest.fixture
def sched() -> Iterator[Scheduler]:
    s = Scheduler(node="mounted")
    s.add_job(Job("tidy", type=JobType.INTERNAL, command=noop, on_demand=True))
    yield s
    s.shutdown(wait=False)


def client(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app")


def test_sign_in_and_act_under_the_prefix(
    sched: Scheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_TOKEN", TOKEN)
    app = Starlette(routes=[Mount("/ops/jobs", sched.asgi_app(token_env="OPS_TOKEN"))])

    async def scenario() -> None:
        async with client(app) as http:
            page = await http.get("/ops/jobs/")
            assert page.status_code == 200
            assert 'action="/ops/jobs/login"' in page.text
            assert 'action="/ops/jobs/"' in page.text
            signed = await http.post("/ops/jobs/login", data={"token": TOKEN})
            assert signed.status_code == 303
            assert signed.headers["location"] == "/ops/jobs/?msg=signed+in"
            assert "Path=/ops/jobs" in signed.headers["set-cookie"]
            page = await http.get("/ops/jobs/")
            assert 'action="/ops/jobs/action"' in page.text and "disabled title" not in page.text
            ran = await http.post(
                "/ops/jobs/api/jobs/tidy/run", headers={"Authorization": f"Bearer {TOKEN}"}
            )
            assert ran.status_code == 200
            out = await http.post("/ops/jobs/logout")
            assert out.headers["location"] == "/ops/jobs/?msg=signed+out"
            assert "Path=/ops/jobs" in out.headers["set-cookie"]

    asyncio.run(scenario())


def test_a_mounted_app_reads_freely_unless_private(
    sched: Scheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_TOKEN", TOKEN)
    open_app = Starlette(routes=[Mount("/jobs", sched.asgi_app())])
    private = Starlette(routes=[Mount("/jobs", sched.asgi_app("OPS_TOKEN", private=True))])

    async def scenario() -> None:
        async with client(open_app) as http:
            # Any Host: which hosts the application answers for is its own to decide.
            status = await http.get("/jobs/api/status", headers={"Host": "jobs.example.com"})
            assert status.status_code == 200
            refused = await http.post("/jobs/api/jobs/tidy/run", headers={"Authorization": "x"})
            assert refused.status_code == 403  # read-only: no token configured
        async with client(private) as http:
            assert (await http.get("/jobs/api/status")).status_code == 401
            assert (await http.get("/jobs/metrics")).status_code == 401
            auth = {"Authorization": f"Bearer {TOKEN}"}
            assert (await http.get("/jobs/api/status", headers=auth)).status_code == 200

    asyncio.run(scenario())


def test_bad_token_settings_are_clear_errors(
    sched: Scheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    with pytest.raises(JobActionError, match="NO_SUCH_TOKEN is not set"):
        sched.asgi_app(token_env="NO_SUCH_TOKEN")
    monkeypatch.setenv("SHORT_TOKEN", "short")
    with pytest.raises(JobActionError, match="too short"):
        sched.asgi_app(token_env="SHORT_TOKEN")
    with pytest.raises(JobActionError, match="private"):
        sched.asgi_app(private=True)


def test_the_lifespan_starts_and_shuts_the_scheduler_down(sched: Scheduler) -> None:
    seen: list[bool] = []

    async def scenario() -> None:
        async with sched.lifespan(None):
            seen.append(sched.running)
        seen.append(sched.running)

    asyncio.run(scenario())
    assert seen == [True, False]
    with pytest.raises(RuntimeError, match="shut down"):
        sched.start()  # shut down for good, as after `with Scheduler(...)`


def test_the_console_pages_work_under_the_prefix(
    sched: Scheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_TOKEN", TOKEN)
    app = Starlette(routes=[Mount("/ops/jobs", sched.asgi_app(token_env="OPS_TOKEN"))])
    sched.start()
    sched.run_now("tidy")
    deadline = time.monotonic() + 20
    while not sched.history("tidy"):
        assert time.monotonic() < deadline, "the run did not end"
        time.sleep(0.02)
    run_id = sched.history("tidy")[0].run_id

    async def scenario() -> None:
        async with client(app) as http:
            overview = await http.get("/ops/jobs/?tz=Europe/Berlin")
            assert overview.status_code == 200
            # Links between pages are relative: under the prefix they stay under it.
            assert 'href="jobs/tidy?tz=Europe%2FBerlin"' in overview.text
            assert 'action="/ops/jobs/action"' in overview.text  # the job rows' buttons
            job = await http.get("/ops/jobs/jobs/tidy")
            assert job.status_code == 200
            assert f'href="../runs/{run_id}"' in job.text
            assert 'action="/ops/jobs/login"' in job.text
            assert ":noop (defined in code)" in job.text  # a function: no YAML value
            run = await http.get(f"/ops/jobs/runs/{run_id}")
            assert run.status_code == 200 and 'href="../jobs/tidy"' in run.text
            bad = await http.get("/ops/jobs/jobs/tidy?tz=Mars/Olympus")
            assert bad.status_code == 400 and 'action="/ops/jobs/login"' not in bad.text

    asyncio.run(scenario())
