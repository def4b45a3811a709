"""The package's source files on one scheduled run's way, from its due slot to the process.

``python bench/run_path.py [--root PATH] [--store sqlite|memory|both] [--json]``: a real
`Scheduler` (the system clock) with one external job (``true``) whose first slot is a few
seconds after `start()`; its state store SQLite (the default with a configuration file) or
memory (``Scheduler(None)``), which claim differently. A profiler (``sys.setprofile`` and
``threading.setprofile``) is set before `start()` but records nothing until ``ARM`` seconds
before the slot, when the scheduler is idle and waits for it (the store's claims ahead are
made a fraction of a second before a slot); from then until the run's ``subprocess.Popen``
(or ``os.posix_spawn``) it notes, thread by thread, the package's file of every function
called, and at a thread's first call the files of the frames already on its stack (the loop
that was waiting). So start-up is left out; what remains is the scheduler thread's last wait
and dispatch, the claim (ahead, or at the start), the worker and the runner. The node's lease
is long, so no heartbeat falls in the window. Prints the files in the order first seen, with
their count, and the threads that ran them. Only public API is used: `Scheduler`, `Job`,
`Interval`, `Unit`, so it runs against any commit (``--root`` a checkout of it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LEAD = 3.0  # seconds from start() to the slot: start-up is over by then
ARM = 1.0  # seconds before the slot when recording begins
# Threads that wake on their own period (the on-demand queue's poll, the lease's heartbeat and
# fencing): what they do in the window is not this run's; shown apart, not counted.
PERIODIC = ("jobscheduler-queue", "jobscheduler-node", "jobscheduler-fence")


@dataclass
class Recorder:
    """Files of the package seen in each thread's calls while armed, up to the Popen."""

    package: str
    armed: bool = False
    done: bool = False
    # (thread, file): when first seen
    files: dict[tuple[str, str], float] = field(default_factory=dict)
    started: set[int] = field(default_factory=set)  # threads whose stack was read
    popen_thread: str = ""

    def profile(self, frame: FrameType, event: str, arg: object) -> None:
        if not self.armed or self.done:
            return
        thread = threading.current_thread()
        if thread.ident not in self.started:
            self.started.add(thread.ident or 0)
            self._note_stack(frame, thread.name)
        if event == "call":
            code = frame.f_code
            if code is subprocess.Popen.__init__.__code__:
                self._reached(frame, thread.name)
            else:
                self._note(code.co_filename, thread.name)
        elif event == "c_call" and arg is getattr(os, "posix_spawn", None):
            self._reached(frame, thread.name)

    def _reached(self, frame: FrameType, thread: str) -> None:
        self._note_stack(frame, thread)
        self.popen_thread = thread
        self.done = True

    def _note_stack(self, frame: FrameType | None, thread: str) -> None:
        stack: list[str] = []
        while frame is not None:
            stack.append(frame.f_code.co_filename)
            frame = frame.f_back
        for filename in reversed(stack):  # outermost first
            self._note(filename, thread)

    def _note(self, filename: str, thread: str) -> None:
        if filename.startswith(self.package) and (thread, filename) not in self.files:
            self.files[thread, filename] = time.perf_counter()


def measure(root: Path, store: str) -> dict[str, Any]:
    from jobscheduler import Interval, Job, Scheduler, Unit

    package = str(root / "jobscheduler") + os.sep
    import jobscheduler

    if not str(Path(jobscheduler.__file__).resolve()).startswith(package):
        raise SystemExit(f"jobscheduler imported from {jobscheduler.__file__}, not {package}")
    command = shutil.which("true") or f"{sys.executable} -c pass"
    recorder = Recorder(package)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "jobs.yaml" if store == "sqlite" else None
        scheduler = Scheduler(config, lease=timedelta(minutes=10))
        slot = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=LEAD + 1)
        job = Job("measured", command=command, start=slot, interval=Interval(1, Unit.HOUR))
        scheduler.add_job(job)
        threading.setprofile(recorder.profile)
        sys.setprofile(recorder.profile)
        try:
            scheduler.start()
            time.sleep(max(0.0, slot.timestamp() - ARM - time.time()))
            recorder.armed = True
            deadline = time.monotonic() + ARM + 10
            while not recorder.done and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
            recorder.armed = False
            scheduler.wait_idle(timeout=10)
            scheduler.shutdown()
        if not recorder.done:
            raise SystemExit(f"{store}: the run's process was not started within 10 s")
    way: dict[str, str] = {}  # file: the thread that ran it first
    apart: dict[str, list[str]] = {}
    for (thread, filename), _ in sorted(recorder.files.items(), key=lambda kv: kv[1]):
        path = str(Path(filename).relative_to(root))
        if thread in PERIODIC:
            apart.setdefault(thread, []).append(path)
        else:
            way.setdefault(path, thread)
    return {
        "store": store,
        "files": list(way),
        "threads": way,
        "count": len(way),
        "popen_thread": recorder.popen_thread,
        "not_counted": apart,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="a checkout (default this one)")
    parser.add_argument("--store", choices=("sqlite", "memory", "both"), default="both")
    parser.add_argument("--json", action="store_true", help="a JSON line at the end")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / "jobscheduler" / "__init__.py").is_file():
        parser.error(f"--root {root}: no jobscheduler/__init__.py there")
    sys.path.insert(0, str(root))
    os.environ.pop("JOBSCHEDULER_STATE", None)  # the default store is the one measured
    stores = ["sqlite", "memory"] if args.store == "both" else [args.store]
    results = {store: measure(root, store) for store in stores}
    for store, result in results.items():
        where = result["popen_thread"]
        print(f"{store}: {result['count']} files on the run's way (Popen in {where})")
        for path in result["files"]:
            print(f"  {path}  [{result['threads'][path]}]")
        for thread, paths in result["not_counted"].items():
            print(f"  not counted, {thread} woke on its own period: {', '.join(paths)}")
    if args.json:
        counts = {f"files_{store}": r["count"] for store, r in results.items()}
        print(json.dumps({**counts, "runs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
