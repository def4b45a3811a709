"""Job functions for the benchmarks, and what they record.

Both schedulers call the same functions: jobscheduler as the internal job
``"bench._jobs:record"`` with ``args={"key": i}``, APScheduler as ``add_job(record,
args=[i])``. Each call notes the wall-clock time (``time.time``, the clock both schedulers
compare slots with) at which the job function began, first thing, before any other work.
`DONE` is set when the expected number of calls has been recorded, so the benchmark waits on
an Event instead of polling.
"""

from __future__ import annotations

import threading
import time

__all__ = ["DONE", "ENDS", "STARTS", "expect", "noop", "record", "record_sleep"]

STARTS: list[tuple[int, float]] = []
"""(key, time.time() at the start of the call), in the order the calls began."""
ENDS: list[tuple[int, float]] = []
"""(key, time.time() at the end of the call), for the jobs that take time."""
DONE = threading.Event()
_expected = [0]


def expect(count: int) -> None:
    """Forget what was recorded; `DONE` is set once `count` calls have ended."""
    STARTS.clear()
    ENDS.clear()
    DONE.clear()
    _expected[0] = count


def record(key: int) -> None:
    """A trivial job: note when it started."""
    STARTS.append((key, time.time()))
    if len(STARTS) >= _expected[0]:
        DONE.set()


def record_sleep(key: int, seconds: float) -> None:
    """A job that takes `seconds`: note when it started and when it ended."""
    STARTS.append((key, time.time()))
    time.sleep(seconds)
    ENDS.append((key, time.time()))
    if len(ENDS) >= _expected[0]:
        DONE.set()


def noop() -> None:
    """A job that does nothing (for jobs that are never meant to run in the benchmark)."""
