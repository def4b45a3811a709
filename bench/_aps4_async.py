"""APScheduler 4's side of bench/async_jobs.py, run with bench/.venv-aps4's interpreter.

``python bench/_aps4_async.py N WAIT_S [MAX_CONCURRENT_JOBS]``: an ``AsyncScheduler``
(memory data store, local event broker; defaults but for the concurrency when given) gets N
jobs of one coroutine that awaits ``asyncio.sleep(WAIT_S)`` (its task's ``max_running_jobs``
lifted, see below), added before it starts; the instant is its start. Prints one JSON line:
runs, wall time from the start until the last run ended, runs per second, peak threads
(sampled every 5 ms, the sampler not counted).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time

from apscheduler import AsyncScheduler

ENDS: list[float] = []
WAIT_S = float(sys.argv[2])


async def wait_async() -> None:
    await asyncio.sleep(WAIT_S)
    ENDS.append(time.time())


async def main(n: int, concurrency: int | None) -> dict[str, object]:
    peak = threading.active_count()
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.005):
            peak = max(peak, threading.active_count() - 1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    options = {} if concurrency is None else {"max_concurrent_jobs": concurrency}
    async with AsyncScheduler(**options) as scheduler:
        # One task, N jobs of it: its default max_running_jobs (1) would run them one at a
        # time, where jobscheduler's N separate jobs may all run at once. Unbounded, as theirs.
        task = await scheduler.configure_task(wait_async, max_running_jobs=None)
        for _ in range(n):
            await scheduler.add_job(task.id)  # by id: a callable would reset the task's options
        started = time.time()
        await scheduler.start_in_background()
        deadline = time.monotonic() + 600
        while len(ENDS) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await scheduler.stop()
    stop.set()
    sampler.join()
    wall = max(ENDS) - started if ENDS else float("nan")
    return {
        "ran": len(ENDS),
        "failed": n - len(ENDS),
        "wall_s": wall,
        "runs_per_s": len(ENDS) / wall if wall > 0 else float("nan"),
        "peak_threads": peak,
        "setup_ok": True,
    }


if __name__ == "__main__":
    count = int(sys.argv[1])
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else None
    print(json.dumps(asyncio.run(main(count, limit))))
