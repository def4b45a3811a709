"""A file edit's time to reach every node, and what an idle daemon costs its store.

**Reach**: 2 ``jobscheduler run`` daemons (real processes, default lease) on one config file
and one store (SQLite file; PostgreSQL: a throwaway server, tests/pg_server.py, fsync on).
Each try rewrites the file as an editor saves it (a temporary file renamed over it; one job's
``description`` changes), then polls the store every 5 ms until both nodes have published the
new file's definitions digest (`cluster.digest`): the time from the rename to that moment is
the edit's reach (the file seen changed by the daemon's look every 0.5 s, confirmed by a
look 0.1 s later, reloaded, published). A pause of 0–0.5 s (random) between tries keeps them from
falling in step with the looks. Targets: p99 ≤ 2 s on SQLite, ≤ 1 s on PostgreSQL.

**Idle**: one daemon (`Daemon` in this process, its file watched, 1,000 daily jobs due
tomorrow) left alone for `window` seconds after a 6 s settling pause (past its first
heartbeat and the prune that comes with it, once an hour): the statements its
store sent (`SqlStateStore.statements`), per second. The file watch sends none; docs/state.md
gives 0.70 a second on SQLite (a heartbeat every 5 s and the queue's look every 2 s) and
0.23 on PostgreSQL (the queue is notified, looked at every 30 s).

``python bench/edit_reach.py [--tries 50] [--window 20] [--no-postgres] [--smoke]``
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import argparse
import os
import random
import tempfile
import threading
import time
from typing import Any

from daemons import start_daemon

from bench import _common as common

NAME = "edit_reach"
POLL = 0.005
SETTLE = 6.0
"""Seconds an idle daemon is left before its statements are counted: past its first
heartbeat, which also prunes the history (4 statements once an hour, not an idle cost)."""


def config_text(jobs: int, description: str) -> str:
    """`jobs` daily jobs due tomorrow (nothing runs while measured); the first one's
    description is what an edit changes."""
    tomorrow = time.strftime("%Y-%m-%d 00:00:00", time.gmtime(time.time() + 2 * 86_400))
    lines = ["jobs:"]
    for n in range(jobs):
        lines += [
            f"  job{n:04d}:",
            '    command: ["true"]',
            f"    start: {tomorrow}",
            "    timezone: UTC",
            "    interval: 1 day",
        ]
        if n == 0:
            lines.append(f"    description: {description}")
    return "\n".join(lines) + "\n"


def save(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    temporary.replace(path)


def digest_of(path: Path) -> str:
    from jobscheduler.cluster.digest import definitions_digest
    from jobscheduler.config.store import ConfigStore

    return definitions_digest(ConfigStore(path).read().jobs)


def reach(url: str, tries: int, jobs: int) -> dict[str, Any]:
    """The reach of `tries` edits to 2 daemons on store `url` (seconds each)."""
    from jobscheduler.state import open_store

    directory = Path(tempfile.mkdtemp(prefix="edit-reach-"))
    config = directory / "jobs.yaml"
    config.write_text(config_text(jobs, "try -1"))
    procs = [start_daemon(config, url, f"reach-{n}", directory / f"node{n}.log") for n in range(2)]
    store = open_store(url)[0]
    names = {"reach-0", "reach-1"}
    times: list[float] = []
    try:

        def published(digest: str) -> bool:
            found = {n.name: n.definitions_digest for n in store.nodes() if n.state == "up"}
            return all(found.get(name) == digest for name in names)

        expected = digest_of(config)
        deadline = time.monotonic() + 60
        while not published(expected):
            if time.monotonic() > deadline:
                raise RuntimeError("the daemons did not start within 60 s")
            time.sleep(0.05)
        for n in range(tries):
            time.sleep(random.uniform(0, 0.5))
            text = config_text(jobs, f"try {n}")
            staged = directory / "next.yaml"
            staged.write_text(text)
            expected = digest_of(staged)
            began = time.perf_counter()
            save(config, text)
            deadline = time.monotonic() + 30
            while not published(expected):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"try {n}: the edit did not reach both nodes in 30 s")
                time.sleep(POLL)
            times.append(time.perf_counter() - began)
    finally:
        store.close()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
    return {"times": times}


def idle(url: str, window: float, jobs: int) -> float:
    """Statements per second an idle daemon's store sends (see the module notes)."""
    from jobscheduler.app.daemon import Daemon
    from jobscheduler.scheduler import Scheduler

    directory = Path(tempfile.mkdtemp(prefix="edit-idle-"))
    config = directory / "jobs.yaml"
    config.write_text(config_text(jobs, "idle"))
    scheduler = Scheduler(config, state=url, node=f"idle-{os.getpid()}")
    store: Any = scheduler.state_store
    daemon = Daemon(scheduler)
    result: list[float] = []

    def measure() -> None:
        time.sleep(SETTLE)
        before = store.statements
        time.sleep(window)
        result.append((store.statements - before) / window)
        daemon.request_stop()

    threading.Thread(target=measure, daemon=True).start()
    restore = daemon.install_signal_handlers()
    try:
        daemon.run()
    finally:
        restore()
    return result[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--tries", type=int, default=50)
    parser.add_argument("--window", type=float, default=20.0, help="idle seconds measured")
    parser.add_argument("--jobs", type=int, default=20, help="jobs in the edited file")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="5 tries, 3 s idle, SQLite only")
    parser.add_argument("--results", type=Path, default=common.RESULTS)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.tries, args.window, args.no_postgres = 5, 3.0, True
    opts = common.Options(args.smoke, 1, None, args.results, args.quiet)
    common.quiet_logs()
    started = time.perf_counter()
    stores: dict[str, str] = {
        "SQLite": f"sqlite:///{Path(tempfile.mkdtemp(prefix='edit-db-')) / 'state.db'}"
    }
    server = None
    if not args.no_postgres:
        import pg_server

        server = pg_server.start(fsync=True)
        stores["PostgreSQL"] = server.url()
    rows, targets, payload = [], [], {}
    try:
        for label, url in stores.items():
            if not args.quiet:
                print(f"{label}: {args.tries} edits ...", file=sys.stderr)
            times = reach(url, args.tries, args.jobs)["times"]
            idle_url = url
            if label == "SQLite":  # a store of its own: the reach's nodes are gone
                idle_url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='edit-idle-db-')) / 's.db'}"
            rate = idle(idle_url, args.window, 1_000)
            p50, p99 = common.percentile(times, 50), common.percentile(times, 99)
            rows.append(
                [
                    label,
                    str(len(times)),
                    f"{p50:.3f}",
                    f"{p99:.3f}",
                    f"{max(times):.3f}",
                    f"{rate:.2f}",
                ]
            )
            limit = 2.0 if label == "SQLite" else 1.0
            targets.append(common.Target(f"edit reach p99, {label}", p99, "<=", limit, "s"))
            payload[label] = {"reach_s": times, "idle_statements_per_s": rate}
    finally:
        if server is not None:
            server.stop()
    common.report(
        NAME,
        opts,
        "a file edit's time to reach both nodes; an idle daemon's store statements",
        ["store", "edits", "reach p50 s", "reach p99 s", "max s", "idle statements/s"],
        rows,
        payload,
        targets,
        notes=[f"{args.jobs} jobs in the edited file; idle: 1,000 jobs, {args.window:g} s"],
        started=started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
