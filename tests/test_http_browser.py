"""The status page in a real headless Chromium (Debian's ``chromium``, driven by Playwright;
``make test`` installs it when missing), used as a person would: sign in, click the buttons,
read what the page says. Screenshots go to the test's directory; with
``JOBSCHEDULER_SCREENSHOT=PATH`` the page is also saved there (docs/images/status-page.png).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from chromium import chromium
from playwright.sync_api import Browser, Page, expect

from jobscheduler import Job, Scheduler
from jobscheduler.app.http.server import HttpServer, serve_http

TOKEN = "browser-token-0123456789abcdef"
FAR = datetime(2099, 1, 1, tzinfo=UTC)
# One worker runs every test of this file: they share one Chromium (`browser`).
pytestmark = pytest.mark.xdist_group("http_browser")


def wait_until(check: Callable[[], object], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser


@pytest.fixture
def site() -> Iterator[tuple[Scheduler, HttpServer]]:
    sched = Scheduler(node="web-1", max_workers=4)
    soon = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    py = sys.executable
    sched.add_jobs(
        [
            Job("backup", command=[py, "-c", "print('copied 12 files')"], start=soon,
                interval="1 day"),
            Job("report", command=[py, "-c", "print('<b>not bold</b>'); raise SystemExit(3)"],
                start=soon + timedelta(minutes=30), interval="1 hour"),
            Job("long-task", command=[py, "-c", "import time; time.sleep(60)"], start=FAR,
                interval="1 day"),
            Job("cleanup", command=[py, "-c", "pass"], start=soon, interval="1 week",
                enabled=False),
        ]
    )  # fmt: skip
    sched.start()
    server = serve_http(sched, "127.0.0.1", 0, token=TOKEN)
    yield sched, server
    server.close()
    sched.shutdown(wait=False)


def sign_in(page: Page, url: str) -> None:
    page.goto(url)
    page.fill("#login input[name=token]", TOKEN)
    page.click("#login button")
    expect(page.locator(".message")).to_have_text("signed in")


def button(page: Page, action: str, target: str) -> None:
    page.click(f"button[data-action={action}][data-target='{target}']")


def test_the_page_signs_in_and_its_buttons_act(
    browser: Browser, site: tuple[Scheduler, HttpServer], tmp_path: Path
) -> None:
    sched, server = site
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(server.url)
    # Before signing in, the buttons are there but disabled.
    assert page.locator("button[data-action=run][data-target=backup]").is_disabled()
    sign_in(page, server.url)

    button(page, "run", "backup")
    expect(page.locator(".message")).to_have_text("run: backup")
    button(page, "run", "report")
    wait_until(lambda: len(sched.history()) == 2 and all(r.ended for r in sched.history()))
    page.goto(server.url)
    # The failure is highlighted, its output tail shown escaped.
    failures = page.locator("#failures tr.bad")
    expect(failures).to_have_count(1)
    expect(failures.first).to_contain_text("report")
    expect(page.locator("tr[data-job=report]")).to_have_class("bad")
    page.locator("#history details summary").first.click()
    expect(page.locator("#history pre").first).to_have_text("<b>not bold</b>\n")

    button(page, "pause", "backup")
    expect(page.locator("tr[data-job=backup]")).to_contain_text("(paused)")
    assert sched.pause_of("backup") is not None and sched.get_job("backup").enabled
    button(page, "resume", "backup")
    expect(page.locator(".message")).to_have_text("resume: backup")
    assert sched.pause_of("backup") is None

    button(page, "run", "long-task")
    wait_until(lambda: sched.executing)
    page.goto(server.url)
    expect(page.locator("#running tr")).to_have_count(2)  # the header and the run
    expect(page.locator("#running")).to_contain_text("long-task")
    page.screenshot(path=str(tmp_path / "running.png"), full_page=True)
    shot = os.environ.get("JOBSCHEDULER_SCREENSHOT")
    if shot:
        page.screenshot(path=shot, full_page=True)
    run_id = sched.executing[0].run_id
    button(page, "kill", run_id)
    expect(page.locator(".message")).to_have_text("kill: " + run_id + " (1 run(s))")
    wait_until(lambda: not sched.executing)
    page.goto(server.url)
    expect(page.locator("#running")).to_contain_text("Nothing runs.")
    page.screenshot(path=str(tmp_path / "after-kill.png"), full_page=True)
    page.close()


def test_a_wrong_token_and_a_forged_form_are_refused(
    browser: Browser, site: tuple[Scheduler, HttpServer]
) -> None:
    sched, server = site
    page = browser.new_page()
    page.goto(server.url)
    page.fill("#login input[name=token]", "not-the-token")
    page.click("#login button")
    expect(page.locator(".message.error")).to_have_text("wrong token")
    sign_in(page, server.url)
    # A form whose per-form check is not the page's (as another site would post it).
    page.evaluate(
        """() => { const check = document.querySelector(
              "button[data-action=pause][data-target=backup]").form.check;
              check.value = "0".repeat(64); }"""
    )
    button(page, "pause", "backup")
    expect(page.locator(".message.error")).to_contain_text("not one of this page's")
    assert sched.pause_of("backup") is None
    # Signing out drops the cookie: the buttons are disabled again.
    page.click("header form[action='/logout'] button")
    expect(page.locator(".message")).to_have_text("signed out")
    assert page.locator("button[data-action=run][data-target=backup]").is_disabled()
    page.close()
