"""The job of the cluster benchmark (bench/cluster.py): a no-op that notes its start.

Both schedulers run the same work: jobscheduler as the internal job
``"bench._cluster_jobs:js_record"`` with ``args={"key": i}``, APScheduler 4 as the task
``bench._cluster_jobs:aps_record`` with ``args=[i]``. The first thing each call does is read
``time.time()`` (the clock both schedulers compare slots with); it then asks its scheduler
which slot it runs (jobscheduler: `current_run()`, APScheduler 4: ``current_job``'s
``scheduled_fire_time``) and appends one line ``key slot_us started_us`` to this node
process's file with a single ``os.write`` on an ``O_APPEND`` descriptor: the line is in the
kernel's page cache as soon as the call returns, so a node killed with ``kill -9`` keeps
every run it started (the duplicates after a kill are only visible that way).

This module imports neither scheduler at its top: the APScheduler 4 nodes run in another
virtual environment (``bench/.venv-aps4``) that has no jobscheduler, and the jobscheduler
nodes' environment has APScheduler 3.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from typing import Any

__all__ = [
    "aps_record",
    "js_record",
    "js_span",
    "open_log",
    "parse_line",
    "parse_span",
    "pool_record",
]

_fd = [-1]


def open_log(path: str) -> None:
    """Append this process's records to `path` from now on."""
    _fd[0] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def _write(key: int, slot: datetime | None, started: float) -> None:
    slot_us = -1 if slot is None else round(slot.timestamp() * 1_000_000)
    os.write(_fd[0], f"{key} {slot_us} {round(started * 1_000_000)}\n".encode())


def js_record(key: int) -> None:
    """jobscheduler's job: its start, then its slot from `current_run()`."""
    started = time.time()
    from jobscheduler import current_run

    run = current_run()
    _write(key, None if run is None else run.slot, started)


async def js_span(key: int, seconds: float) -> None:
    """jobscheduler's job of the limits cases: a run lasting `seconds` (an ``async def``,
    holding no worker, so that a thousand runs go on at once), which appends one line ``key
    slot_us started_us ended_us`` when it ends: concurrency is measured from the runs' own
    start and end."""
    started = time.time()
    import asyncio

    from jobscheduler import current_run

    run = current_run()
    slot = None if run is None else run.slot
    await asyncio.sleep(seconds)
    ended = time.time()
    slot_us = -1 if slot is None else round(slot.timestamp() * 1_000_000)
    line = f"{key} {slot_us} {round(started * 1_000_000)} {round(ended * 1_000_000)}\n"
    os.write(_fd[0], line.encode())


def pool_record(key: int, slot: datetime) -> None:
    """The bare floor's call (a `ThreadPoolExecutor` given the slot it was submitted for):
    its start, then its line, as `js_record` writes it."""
    started = time.time()
    _write(key, slot, started)


def aps_record(key: int) -> None:
    """APScheduler 4's task: its start, then its slot from ``current_job``."""
    started = time.time()
    from apscheduler import current_job

    job: Any = current_job.get()
    _write(key, job.scheduled_fire_time, started)


def parse_line(line: str) -> tuple[int, int, int] | None:
    """(key, slot_us, started_us) of a line `_write` wrote; None for a torn last line (a
    node killed in the middle of its write)."""
    parts = line.split()
    if len(parts) != 3:
        return None
    try:
        key, slot, started = (int(p) for p in parts)
    except ValueError:
        return None
    return key, slot, started


def parse_span(line: str) -> tuple[int, int, int, int] | None:
    """(key, slot_us, started_us, ended_us) of a line `js_span` wrote; None for a torn one."""
    parts = line.split()
    if len(parts) != 4:
        return None
    try:
        key, slot, started, ended = (int(p) for p in parts)
    except ValueError:
        return None
    return key, slot, started, ended
