"""The web application set-ups of docs/applications.md, started for real as their docs say:
examples/fastapi_app.py under uvicorn, examples/flask_app.py under Flask's own server,
examples/django_app/ under Django's runserver (and ``manage.py runjobs`` beside it), each
driven over HTTP with httpx; the FastAPI one's mounted status page also in headless Chromium
(Playwright, Debian's chromium as in test_http_browser.py), its links and buttons under the
``/jobs`` prefix."""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from chromium import chromium
from playwright.sync_api import Page, expect

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TOKEN = "example-token-0123456789"
WAIT = 60.0  # seconds: reached only when a test fails, even on a loaded machine
# Requests get as long: a server on a loaded machine can take seconds to answer one.
get = functools.partial(httpx.get, timeout=WAIT)
post = functools.partial(httpx.post, timeout=WAIT)


def wait_until(check: Callable[[], object], within: float = WAIT) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """A process serving HTTP on `port`, stopped (SIGTERM, then killed) at `stop`."""

    def __init__(self, argv: list[str], port: int, cwd: Path, env: dict[str, str]) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = cwd / f"server-{port}.log"
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{cwd}", **env},
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        wait_until(self._up)

    def _up(self) -> bool:
        assert self.process.poll() is None, self.output()
        try:
            return get(self.url + "/", timeout=10).status_code == 200
        except httpx.HTTPError:
            return False

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def queue_state(url: str, queue_id: int) -> str | None:
    rows = get(url + "/jobs/api/queue").json()
    return next((row["state"] for row in rows if row["id"] == queue_id), None)


@pytest.fixture
def fastapi_site(tmp_path: Path) -> Iterator[Server]:
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "examples.fastapi_app:app", "--port", str(port)]
    server = Server(argv, port, tmp_path, {"JOBS_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)})
    yield server
    server.stop()


def test_fastapi_app_runs_its_jobs_and_serves_the_page_under_its_prefix(
    fastapi_site: Server,
) -> None:
    url = fastapi_site.url
    home = get(url + "/").json()
    assert home["jobs"] == ["heartbeat", "send_report"]
    wait_until(lambda: get(url + "/").json()["heartbeats"] >= 2)  # every second
    queue_id = post(url + "/reports/monday").json()["queue_id"]
    wait_until(lambda: queue_state(url, queue_id) == "succeeded")
    jobs = get(url + "/jobs/api/jobs").json()["jobs"]
    assert {job["name"] for job in jobs} == {"heartbeat", "send_report"}
    assert "jobscheduler_" in get(url + "/jobs/metrics").text
    refused = post(url + "/jobs/api/jobs/heartbeat/pause")
    assert refused.status_code == 401  # actions need the token
    ok = post(url + "/jobs/api/jobs/send_report/run", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    page = get(url + "/jobs/").text
    assert 'action="/jobs/login"' in page and 'action="/jobs/action"' in page
    assert 'action="/login"' not in page and 'action="/action"' not in page
    # uvicorn ends on SIGTERM after a graceful shutdown, lifespan included (and then
    # re-raises the signal, as its exit status).
    assert fastapi_site.stop() in (0, -signal.SIGTERM)
    output = fastapi_site.output()
    assert "Application shutdown complete." in output and "Traceback" not in output


def test_the_mounted_page_in_a_browser(fastapi_site: Server) -> None:
    url = fastapi_site.url + "/jobs/"
    with chromium() as browser:
        page: Page = browser.new_page()
        page.goto(url)
        assert page.locator("button[data-action=run][data-target=send_report]").is_disabled()
        page.fill("#login input[name=token]", TOKEN)
        page.click("#login button")
        expect(page.locator(".message")).to_have_text("signed in")
        assert page.url.startswith(url)
        page.click("button[data-action=run][data-target=send_report]")
        expect(page.locator(".message")).to_have_text("run: send_report")
        assert page.url.startswith(url)
        page.click("button[data-action=pause][data-target=heartbeat]")
        expect(page.locator("tr[data-job=heartbeat]")).to_contain_text("(paused)")
        page.fill("input[type=search]", "send")
        page.click("form[action='/jobs/'] button")
        expect(page.locator("tr[data-job]")).to_have_count(1)
        assert page.url.startswith(url)
        page.click("header form[action='/jobs/logout'] button")
        expect(page.locator(".message")).to_have_text("signed out")
        assert page.locator("button[data-action=run][data-target=send_report]").is_disabled()
    runs = get(fastapi_site.url + "/jobs/api/history?job=send_report").json()
    assert runs and runs[0]["trigger"] == "run_now"


def test_flask_app_under_its_own_server(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "flask", "--app", "examples.flask_app", "run"]
    server = Server([*argv, "--port", str(port)], port, tmp_path, {"PYTHONPATH": str(ROOT)})
    try:
        queue_id = post(server.url + "/export/users").json()["queue_id"]
        wait_until(lambda: queue_state(server.url, queue_id) == "succeeded")
        assert get(server.url + "/").json()["exported"] == ["users"]
        page = get(server.url + "/jobs/").text
        assert 'action="/jobs/"' in page and "export" in page
        assert get(server.url + "/jobs/api/status").status_code == 200
    finally:
        server.stop()


def test_django_web_process_submits_and_runjobs_runs(tmp_path: Path) -> None:
    project = tmp_path / "django_app"
    subprocess.run(["cp", "-r", str(EXAMPLES / "django_app"), str(project)], check=True)
    env = {"JOBS_STATE": f"sqlite:///{tmp_path / 'jobs.state.db'}", "PYTHONPATH": str(ROOT)}
    runner = subprocess.Popen(
        [sys.executable, "manage.py", "runjobs"],
        cwd=project,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert runner.stdout is not None
        assert "running jobs as node" in runner.stdout.readline()
        port = free_port()
        argv = [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
        web = Server(argv, port, project, env)
        try:
            queue_id = post(web.url + "/export/orders").json()["queue_id"]
            wait_until(lambda: queue_state(web.url, queue_id) == "succeeded")
            runs = get(web.url + "/").json()["runs"]
            [run] = [r for r in runs if r["job"] == "export"]
            assert run["state"] == "succeeded"
            assert run["node"] != f"{socket.gethostname()}-{web.process.pid}"  # not the web's
            page = get(web.url + "/jobs/").text
            assert 'action="/jobs/"' in page and "nightly_cleanup" in page
        finally:
            web.stop()
    finally:
        runner.send_signal(signal.SIGTERM)
        output, _ = runner.communicate(timeout=WAIT)
    assert runner.returncode == 0, output
    assert "exported orders in run" in output
