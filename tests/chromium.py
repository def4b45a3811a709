"""Headless Chromium for the page's tests: Debian's chromium, driven by Playwright through
`executable_path` (Playwright's own browser download is never used; `make chromium` installs
the package where it is missing)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Browser, expect, sync_playwright

# `expect(...)` retries until its condition holds: for up to 30 s (Playwright's default, 5 s,
# is too short for a page served by a loaded machine; a passing test waits only as needed).
expect.set_options(timeout=30_000)

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium, closed at the end of the block."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
