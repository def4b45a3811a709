"""How tests wait: for a condition, never for a fixed time.

The suite runs on machines busy with other work (CI shares its cores): a thread, a process or
a daemon may take seconds to get going. So a test polls the condition it needs with a deadline
that is reached only when the test fails (`DEADLINE`), and proves that something did *not*
happen by waiting for an event that shows it had its chance (a later poll, a later line), not
by sleeping. See docs/testing.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["DEADLINE", "wait_until"]

DEADLINE = 60.0  # seconds: reached only when the test fails, even on a loaded machine


def wait_until(
    check: Callable[[], object], what: str = "the condition", within: float = DEADLINE
) -> None:
    """Return as soon as `check()` is true; AssertionError naming `what` after `within` s."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:g} s waiting for {what}")
        time.sleep(0.02)
