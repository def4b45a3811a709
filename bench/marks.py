"""What a node's heartbeat costs to write the marks of 1,000 jobs that ran since the last one.

    .venv/bin/python bench/marks.py

A node writes, at each heartbeat, the last slot handled of every job that ran since the
previous one (`cluster/nodemarks.py`, `PendingMarks`). With 1,000 jobs running every second
that is 1,000 marks a beat. Here: 1,000 `set_mark` calls (one statement and one transaction
each: what the node did before) against one `set_marks` (one multi-row ``INSERT … ON
CONFLICT`` per 500 jobs, one transaction), on SQLite (a new file, WAL, synchronous FULL) and
PostgreSQL (a throwaway server, tests/pg_server.py, fsync on, TCP on 127.0.0.1); 3 rounds,
each moving every mark forward. Printed per round: statements, transactions and wall time.
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from jobscheduler.state.postgres import PostgresStateStore
from jobscheduler.state.sqlite import SqliteStateStore
from jobscheduler.state.sqlstore import SqlStateStore

JOBS = 1000
ROUNDS = 3


def _measure(store: SqlStateStore, write: str, slot: datetime) -> tuple[int, int, float]:
    slots = {f"j{i}": slot for i in range(JOBS)}
    statements, batches, began = store.statements, store.batches, time.perf_counter()
    if write == "set_mark":
        for job, last in slots.items():
            store.set_mark(job, last_slot=last)
    else:
        store.set_marks(slots)
    elapsed = time.perf_counter() - began
    return store.statements - statements, store.batches - batches, elapsed


def main() -> None:
    import pg_server

    server = pg_server.start(fsync=True)
    try:
        with tempfile.TemporaryDirectory() as directory:
            stores: list[tuple[str, SqlStateStore]] = [
                ("SQLite", SqliteStateStore(Path(directory) / "marks.db")),
                ("PostgreSQL", PostgresStateStore(server.fresh_schema_url())),
            ]
            t0 = datetime.now(UTC)
            for name, store in stores:
                for n in range(ROUNDS):
                    for half, write in enumerate(("set_mark", "set_marks")):
                        slot = t0 + timedelta(seconds=2 * n + half)
                        count, batches, elapsed = _measure(store, write, slot)
                        label = f"{JOBS:,} x set_mark" if write == "set_mark" else "set_marks"
                        print(
                            f"{name}, round {n + 1}, {label}: {count} statements, "
                            f"{batches} transactions, {elapsed * 1e3:.1f} ms"
                        )
                store.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
