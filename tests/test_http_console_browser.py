"""The job page and the run page in a real headless Chromium (Debian's ``chromium``, driven by
Playwright, as in ``test_http_browser.py``): the chart is drawn, output is escaped, times carry
their zone, a running run's output grows on its page as the run prints. With
``JOBSCHEDULER_SCREENSHOTS=DIR`` both pages are saved there (docs/images/job-page.png and
run-page.png are made so)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from chromium import chromium
from playwright.sync_api import Browser, expect
from test_http_browser import wait_until

from jobscheduler import Job, Scheduler
from jobscheduler.app.http.server import HttpServer, serve_http
from jobscheduler.state import RunState

PY = sys.executable
FAR = datetime(2099, 1, 1, tzinfo=UTC)
# One worker runs every test of this file: they share one Chromium (`browser`).
pytestmark = pytest.mark.xdist_group("http_console_browser")
PRINTER = (
    "import time\n"
    "print('<b>starting</b> the nightly export', flush=True)\n"
    "for i in range(1, 9):\n"
    "    time.sleep(0.6)\n"
    "    print(f'exported batch {i} of 8: {i * 1250} rows', flush=True)\n"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser


@pytest.fixture
def site() -> Iterator[tuple[Scheduler, HttpServer]]:
    sched = Scheduler(node="web-1", max_workers=4)
    sched.add_jobs(
        [
            Job("export", command=[PY, "-c", PRINTER], cron="30 2 * * *", timezone="Europe/Berlin"),
            Job("backup", command=[PY, "-c", "pass"], start=FAR, interval="1 day"),
        ]
    )
    # Forty nights of history: durations that drift, a few failures and one skipped slot.
    store = sched.state_store
    first = datetime.now(UTC).replace(hour=1, minute=30, second=0, microsecond=0)
    for n in range(40):
        started = first - timedelta(days=40 - n)
        state = RunState.FAILED if n % 9 == 4 else RunState.SUCCEEDED
        if n == 20:
            state = RunState.SKIPPED
        took = 0 if state is RunState.SKIPPED else 240 + 9 * n + (n % 5) * 30
        store.record(
            "export", started, "schedule", f"night-{n:02d}", node="web-1", state=state,
            started=started, ended=started + timedelta(seconds=took),
            exit_code=None if state is RunState.SKIPPED else (1 if state is RunState.FAILED else 0),
            reason={RunState.FAILED: "exit code 1", RunState.SKIPPED: "overlap: skip"}.get(state),
            output_tail="exported batch 8 of 8: 10000 rows\n",
        )  # fmt: skip
    sched.start()
    server = serve_http(sched, "127.0.0.1", 0)
    yield sched, server
    server.close()
    sched.shutdown(wait=False)


def test_the_job_page_and_the_live_run_page(
    browser: Browser, site: tuple[Scheduler, HttpServer], tmp_path: Path
) -> None:
    sched, server = site
    shots = Path(os.environ.get("JOBSCHEDULER_SCREENSHOTS", tmp_path))
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.goto(f"{server.url}/jobs/export?tz=Europe/Berlin")
    expect(page.locator("#schedule")).to_contain_text("30 2 * * *")
    bars = page.locator("#chart svg rect")
    expect(bars).to_have_count(40)
    expect(page.locator("#chart svg rect[data-state=failed]")).to_have_count(4)
    box = page.locator("#chart svg").bounding_box()
    assert box is not None and box["width"] > 700 and box["height"] > 100  # drawn, not empty
    expect(page.locator("#success-rate")).to_contain_text("89.7 % of the last 39 run(s)")
    next_runs = page.locator("#next li")
    expect(next_runs).to_have_count(10)
    for text in next_runs.all_inner_texts():  # 02:30 in Berlin, with the zone written
        assert text.endswith((" 02:30:00 CET", " 02:30:00 CEST")), text
    page.screenshot(path=str(shots / "job-page.png"), full_page=True)

    # A run started now: its page shows the output growing as the run prints it.
    sched.run_now("export")
    wait_until(lambda: sched.executing)
    run_id = sched.executing[0].run_id
    page.click("text=overview")
    page.goto(f"{server.url}/runs/{run_id}?tz=Europe/Berlin")
    expect(page.locator("#live")).to_have_text("(live)")
    output = page.locator("#output")
    expect(output).to_contain_text("exported batch 2 of 8", timeout=15_000)
    assert "exported batch 8 of 8" not in output.inner_text()  # still running: shown live
    # The markup the job printed is text on the page, not markup.
    expect(output).to_contain_text("<b>starting</b> the nightly export")
    assert page.locator("#output b").count() == 0
    page.screenshot(path=str(shots / "run-page.png"), full_page=True)
    # When the run ends, the page reloads with its final state.
    expect(page.locator("#state")).to_have_text("succeeded", timeout=20_000)
    expect(output).to_contain_text("exported batch 8 of 8: 10000 rows")
    started = page.locator("dl.facts dd").nth(1).inner_text()
    assert started.endswith(("CET", "CEST")), started
    page.close()
