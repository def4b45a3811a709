"""External commands: ``/bin/true`` runs per second at 1, 2, 4 and 8 workers.

- jobscheduler: one external job ``/bin/true`` (no shell), ``Scheduler(max_workers=w)``,
  ``run_now`` called 1,000 times at once; from the first call until ``wait_idle`` returns
  (every run reaped and reported). Each run is a process group with its output captured.
- bare spawn-and-reap, the machine's ceiling: w threads, each ``os.posix_spawn`` then
  ``os.waitpid`` in a loop, 1,000 processes in all.
- Python's subprocess: the same with ``subprocess.Popen`` and the runner's options (new
  session, stdin from /dev/null, stdout and stderr to one pipe read to its end).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import os
import subprocess
import threading
import time
from collections.abc import Callable

from bench import _common as common

NAME = "external"
TRUE = "/bin/true"
BARE = "spawn-and-reap"
POPEN = "subprocess"
OURS = "jobscheduler"


def cases(smoke: bool) -> list[common.Case]:
    count, workers = (20, (1, 2)) if smoke else (1_000, (1, 2, 4, 8))
    return [
        {"key": f"{system}/{w}", "system": system, "workers": w, "count": count}
        for w in workers
        for system in (OURS, BARE, POPEN)
    ]


def _threads(workers: int, count: int, one: Callable[[], None]) -> float:
    """Run `one` `count` times over `workers` threads; the seconds it took."""
    left = [count]
    lock = threading.Lock()

    def loop() -> None:
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            one()

    threads = [threading.Thread(target=loop) for _ in range(workers)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began


def _spawn_and_reap() -> None:
    pid = os.posix_spawn(TRUE, [TRUE], os.environ)
    os.waitpid(pid, 0)


def _popen() -> None:
    proc = subprocess.Popen(
        [TRUE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    proc.stdout.read()
    proc.stdout.close()
    proc.wait()


def run_case(case: common.Case) -> common.Measure:
    common.quiet_logs()
    system, workers, count = case["system"], case["workers"], case["count"]
    failed = 0
    if system == BARE:
        seconds = _threads(workers, count, _spawn_and_reap)
    elif system == POPEN:
        seconds = _threads(workers, count, _popen)
    else:
        from datetime import UTC, datetime, timedelta

        from jobscheduler import Interval, Job, Unit
        from jobscheduler.scheduler import Scheduler
        from jobscheduler.state import RunState

        scheduler = Scheduler(max_workers=workers, history_limit=count)
        scheduler.add_job(
            Job(
                "true",
                command=(TRUE,),
                start=datetime.now(UTC) + timedelta(days=1),
                interval=Interval(1, Unit.DAY),
                timezone="UTC",
            )
        )
        scheduler.start()
        time.sleep(0.2)
        began = time.perf_counter()
        for _ in range(count):
            scheduler.run_now("true")
        scheduler.wait_idle(120)
        seconds = time.perf_counter() - began
        history = scheduler.history("true", limit=count)
        failed = count - sum(1 for r in history if r.state is RunState.SUCCEEDED)
        scheduler.shutdown(wait=True)
    return {"runs_per_s": count / seconds, "seconds": seconds, "failed": failed}


def main(argv: list[str] | None = None) -> int:
    parent = common.parent(__file__, __doc__ or NAME, run_case, cases, argv, timeout=180)
    if parent is None:
        return 0
    opts, all_cases, _measures, summary, started = parent
    rows = []
    targets = []
    comparisons = {}
    for w in sorted({c["workers"] for c in all_cases}):
        ours = summary[f"{OURS}/{w}"]
        bare = summary[f"{BARE}/{w}"]
        popen = summary[f"{POPEN}/{w}"]
        vs_bare = common.ratio(ours["runs_per_s"].median, bare["runs_per_s"].median)
        vs_popen = common.ratio(ours["runs_per_s"].median, popen["runs_per_s"].median)
        comparisons[str(w)] = {"vs_bare": vs_bare, "vs_subprocess": vs_popen}
        rows.append(
            [
                str(w),
                common.span(ours["runs_per_s"], 0),
                common.span(bare["runs_per_s"], 0),
                common.span(popen["runs_per_s"], 0),
                common.times(vs_bare),
                common.times(vs_popen),
                common.num(ours["failed"].high, 0),
            ]
        )
        targets.append(
            common.Target(
                f"external /bin/true at {w} worker(s) vs spawn-and-reap", vs_bare, ">=", 0.8, "x"
            )
        )
    count = all_cases[0]["count"]
    common.report(
        NAME,
        opts,
        f"External commands: {count:,} runs of /bin/true (runs per second)",
        [
            "workers",
            "jobscheduler",
            "bare spawn-and-reap",
            "subprocess.Popen",
            "vs bare",
            "vs Popen",
            "failed",
        ],
        rows,
        {"cases": {k: {"metrics": v} for k, v in summary.items()}, "comparisons": comparisons},
        targets,
        [],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
