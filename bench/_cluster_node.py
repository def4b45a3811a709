"""One node process of the cluster benchmark (bench/cluster.py): ``python
bench/_cluster_node.py '<json>'``.

The JSON says: ``system`` (``"jobscheduler"`` or ``"apscheduler4"``), ``role`` (``"node"``, or
``"setup"`` for the one process that writes APScheduler 4's schedules into its store before
the nodes start), ``name`` (the node's name), ``url`` (``postgresql://…`` of the database the
nodes share; None: jobscheduler in memory, no store), ``jobs``, ``t0`` (the first slot, Unix
seconds, a whole second), ``slots`` (how many one-second slots each job has), ``daily``
(true: daily jobs whose first slot is ``t0``, for an idle node), ``run_s`` and ``limit`` (the
limits cases: each run lasts ``run_s`` seconds, `bench._cluster_jobs.js_span`; ``limit``
true: every job has ``max_instances: 1`` and ``overlap: skip``), ``until`` (when to stop,
Unix seconds) and ``out`` (the file this node's runs are appended to, see
`bench._cluster_jobs`).

A node prints ``ready`` on its stdout once it is running with every job defined, then runs
until ``until`` and shuts down. The jobscheduler node is ``Scheduler(state=url, node=name)``
given the jobs with ``add_jobs`` (definitions in memory, the same in every node; the store
holds the claims). The APScheduler 4 node is an ``AsyncScheduler`` with a
``SQLAlchemyDataStore`` on an asyncpg engine and an ``AsyncpgEventBroker`` on the same
database (the broker is how several of its schedulers hear of each other's jobs), each
scheduler with its defaults (``max_concurrent_jobs`` 100, lease 30 s, the thread pool
executor for a plain function, ``coalesce`` latest, no misfire grace limit).

This file runs under two interpreters (the project's and ``bench/.venv-aps4``'s), so it
imports each scheduler only inside the function that uses it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import json
import logging
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import _cluster_jobs

Config = dict[str, Any]

SRC = "BENCH_JOBSCHEDULER_SRC"
"""The environment variable naming another tree whose ``jobscheduler/`` a node imports."""


def use_src() -> None:
    """Import jobscheduler from the tree `SRC` names, if any (``--extra-src``): first on the
    path, and without the editable install's finder, which answers for ``jobscheduler``
    before the path is looked at."""
    src = os.environ.get(SRC)
    if not src:
        return
    sys.meta_path[:] = [
        f for f in sys.meta_path if not str(getattr(f, "__module__", "")).startswith("__editable__")
    ]
    sys.path.insert(0, src)


def _ready(where: str = "") -> None:
    sys.stdout.write(f"ready {where}\n")
    sys.stdout.flush()


def _sleep_until(when: float) -> None:
    while (left := when - time.time()) > 0:
        time.sleep(min(left, 1.0))


def run_jobscheduler(cfg: Config) -> None:
    from jobscheduler import Interval, Job, JobType, Scheduler, Unit

    t0 = datetime.fromtimestamp(cfg["t0"], UTC)
    daily = bool(cfg.get("daily"))
    interval = Interval(1, Unit.DAY if daily else Unit.SECOND)
    step = timedelta(days=1) if daily else timedelta(seconds=1)
    last = t0 + step * (cfg["slots"] - 1)  # a job's stop is its last slot
    # The limits cases: each run lasts `run_s` (longer than the interval); `limit`: with
    # ``max_instances: 1`` and ``overlap: skip``.
    run_s = cfg.get("run_s")
    command = "bench._cluster_jobs:js_record" if run_s is None else "bench._cluster_jobs:js_span"
    limits: dict[str, Any] = {"max_instances": 1, "overlap": "skip"} if cfg.get("limit") else {}
    jobs = [
        Job(
            f"j{i}",
            type=JobType.INTERNAL,
            command=command,
            args={"key": i} if run_s is None else {"key": i, "seconds": run_s},
            start=t0,
            stop=last,
            interval=interval,
            timezone="UTC",
            **limits,
        )
        for i in range(cfg["jobs"])
    ]
    scheduler = Scheduler(state=cfg["url"], node=cfg["name"])
    scheduler.start()
    scheduler.add_jobs(jobs)
    _ready(str(Path(sys.modules["jobscheduler"].__file__ or "").parent))
    _sleep_until(cfg["until"])
    scheduler.shutdown(wait=True)


def run_pool(cfg: Config) -> None:
    """The bare floor: no scheduler, a `ThreadPoolExecutor(10)` (its threads started) given
    the `jobs` calls of each slot at that whole second, for `slots` seconds. The wait for a
    slot ends as jobscheduler's does: a timed sleep to 2 ms before it, then a spin."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(10)
    for _ in range(10):  # every thread started, as a running scheduler's workers are
        pool.submit(time.sleep, 0.001)
    _ready()
    keys = range(cfg["jobs"])
    record = _cluster_jobs.pool_record
    for n in range(cfg["slots"]):
        when = cfg["t0"] + n
        _sleep_until(when - 0.002)
        while time.time() < when:
            pass
        slot = datetime.fromtimestamp(when, UTC)
        for key in keys:
            pool.submit(record, key, slot)
    pool.shutdown(wait=True)
    _sleep_until(cfg["until"])


async def _aps_main(cfg: Config) -> None:
    import importlib

    import anyio

    # importlib: the project's type checker sees APScheduler 3, which has none of these.
    aps: Any = importlib.import_module("apscheduler")
    sqla_store: Any = importlib.import_module("apscheduler.datastores.sqlalchemy")
    brokers: Any = importlib.import_module("apscheduler.eventbrokers.asyncpg")
    triggers: Any = importlib.import_module("apscheduler.triggers.interval")
    sqla: Any = importlib.import_module("sqlalchemy.ext.asyncio")

    url = str(cfg["url"]).replace("postgresql://", "postgresql+asyncpg://", 1)
    engine = sqla.create_async_engine(url)
    store = sqla_store.SQLAlchemyDataStore(engine)
    broker = brokers.AsyncpgEventBroker.from_async_sqla_engine(engine)
    try:
        async with aps.AsyncScheduler(store, broker, identity=cfg["name"]) as scheduler:
            if cfg["role"] == "setup":
                t0 = datetime.fromtimestamp(cfg["t0"], UTC)
                daily = bool(cfg.get("daily"))
                step = timedelta(days=1) if daily else timedelta(seconds=1)
                end = t0 + step * (cfg["slots"] - 1)
                for i in range(cfg["jobs"]):
                    trigger = triggers.IntervalTrigger(
                        days=1 if daily else 0,
                        seconds=0 if daily else 1,
                        start_time=t0,
                        end_time=end,
                    )
                    await scheduler.add_schedule(
                        _cluster_jobs.aps_record, trigger, id=f"j{i}", args=[i]
                    )
                _ready()
                return
            await scheduler.start_in_background()
            _ready()
            await anyio.sleep(max(0.0, cfg["until"] - time.time()))
            await scheduler.stop()
            await scheduler.wait_until_stopped()
    finally:
        await engine.dispose()


def run_apscheduler4(cfg: Config) -> None:
    import anyio

    anyio.run(_aps_main, cfg)


def main(argv: list[str]) -> int:
    cfg: Config = json.loads(argv[1])
    use_src()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    if cfg.get("out"):
        _cluster_jobs.open_log(cfg["out"])
    if cfg["system"] == "jobscheduler":
        run_jobscheduler(cfg)
    elif cfg["system"] == "pool":
        run_pool(cfg)
    else:
        run_apscheduler4(cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
