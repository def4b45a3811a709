"""What a queue row waiting for its busy job costs an idle node's store (SQLite).

One scheduler (real clock) on a SQLite file defines an on-demand job with ``max_instances:
1``; the job's one live run is held by another node (a ``running`` record of node "ghost"),
and a row of it is submitted: the row waits ``pending``. Counted at the store's own read and
write transactions (`SqlStateStore._read`, `_write`) over `--window` seconds after 5 s of
settling; and the same with an empty queue, for reference. Each checkout given (`--code`,
default: this one) is measured in a fresh process, alternating, `--rounds` times.

``python bench/idle_waiting_row.py [--window 20] [--rounds 2] [--code DIR]...``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, tempfile, time
from datetime import UTC, datetime
from pathlib import Path
from jobscheduler import Job
from jobscheduler.scheduler import Scheduler
from jobscheduler.state.sqlite import SqliteStateStore

window, waiting = float(sys.argv[1]), sys.argv[2] == "1"
folder = Path(tempfile.mkdtemp())
store = SqliteStateStore(folder / "state.db")
counts = {"read": 0, "write": 0}
for kind in ("read", "write"):
    method = getattr(store, f"_{kind}")
    def counted(*a, _m=method, _k=kind, **k):
        counts[_k] += 1
        return _m(*a, **k)
    setattr(store, f"_{kind}", counted)
s = Scheduler(state=store, node="idle", max_workers=4)
s.add_job(Job("solo", command=["true"], on_demand=True, max_instances=1))
s.start()
other = SqliteStateStore(folder / "state.db")
if waiting:
    assert other.claim("solo", None, "run_now", "ghost", node="ghost", started=datetime.now(UTC))
    other.submit("solo")
time.sleep(5.0)
c0 = dict(counts)
time.sleep(window)
c1 = dict(counts)
rows = [r.state for r in other.queue()]
s.shutdown(wait=False)
import jobscheduler
code = str(Path(jobscheduler.__file__).parent.parent)
print(json.dumps({k: (c1[k] - c0[k]) / window for k in c0} | {"rows": rows, "code": code}))
"""


def measure(code: Path, window: float, waiting: bool) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(window), "1" if waiting else "0"],
        env={**os.environ, "PYTHONPATH": str(code)},
        cwd=tempfile.gettempdir(),  # not a checkout: `-c` puts the cwd first on the path
        capture_output=True,
        text=True,
        timeout=window + 120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--code", type=Path, action="append", default=None)
    args = parser.parse_args()
    codes: list[Path] = args.code or [REPO]
    print(f"load average {os.getloadavg()[0]:.2f}")
    for round_ in range(1, args.rounds + 1):
        for code in codes:
            for waiting in (True, False):
                got = measure(code, args.window, waiting)
                what = "a row waiting" if waiting else "empty queue "
                print(
                    f"round {round_}  {code}  {what}: reads {got['read']:.2f}/s, "
                    f"writes {got['write']:.2f}/s  (rows {got['rows']}, code {got['code']})"
                )
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
