"""`LiveOutput`: a running run's output reaches the state store while it runs, only when it
changed, and not after the run's end."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from jobscheduler import Job, SystemClock
from jobscheduler.cluster.liveoutput import LiveOutput
from jobscheduler.model.execution import Execution
from jobscheduler.runners.runner import RunContext, Runner
from jobscheduler.state import MemoryStateStore, RunState

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def wait_until(check: Callable[[], object], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_output_is_written_while_the_run_goes_on_and_only_when_it_changed(
    tmp_path: Path,
) -> None:
    go_on = tmp_path / "go-on"
    script = (
        "import os, time\n"
        "print('first', flush=True)\n"
        f"while not os.path.exists({str(go_on)!r}):\n"
        "    time.sleep(0.02)\n"
        "print('second', flush=True)\n"
        f"while os.path.exists({str(go_on)!r}):\n"
        "    time.sleep(0.02)\n"
    )
    job = Job("printer", command=[sys.executable, "-c", script], start=T0, interval="1 day")
    store = MemoryStateStore()
    clock = SystemClock()
    runner = Runner(clock)
    live = LiveOutput(runner.execute, lambda: store, clock, period=3600)  # flushed by hand
    context = RunContext(job, "run-1", None, "run_now")
    assert store.claim("printer", None, "run_now", "run-1", node="n", started=clock.now())
    done: list[Execution] = []
    worker = threading.Thread(target=lambda: done.append(live.execute(job, context)))
    worker.start()
    try:

        def flushed_output() -> str:
            live.flush()
            record = store.run("run-1")
            assert record is not None
            return record.output_tail

        wait_until(lambda: flushed_output() == "first\n")
        writes = live.writes
        assert live.flush() == 0 and live.writes == writes  # unchanged: nothing written
        go_on.touch()
        wait_until(lambda: flushed_output() == "first\nsecond\n")
        assert live.writes == writes + 1
        assert store.run("run-1").state is RunState.RUNNING  # type: ignore[union-attr]
    finally:
        go_on.unlink(missing_ok=True)
        worker.join(20)
        live.close()
        runner.close()
    assert done and done[0].output_tail == "first\nsecond\n"
    assert live.flush() == 0  # the run is out of view once it ended


def test_the_thread_writes_once_a_period_not_once_a_line() -> None:
    script = "import time\nfor i in range(40):\n    print(i, flush=True)\n    time.sleep(0.05)\n"
    job = Job("ticker", command=[sys.executable, "-c", script], start=T0, interval="1 day")
    store = MemoryStateStore()
    clock = SystemClock()
    runner = Runner(clock)
    live = LiveOutput(runner.execute, lambda: store, clock, period=0.5)
    context = RunContext(job, "run-2", None, "run_now")
    assert store.claim("ticker", None, "run_now", "run-2", node="n", started=clock.now())
    try:
        seen: list[str] = []

        def watch() -> None:
            while not seen or not seen[-1].endswith("39\n"):
                record = store.run("run-2")
                if (
                    record is not None
                    and record.output_tail
                    and (not seen or seen[-1] != record.output_tail)
                ):
                    seen.append(record.output_tail)
                time.sleep(0.01)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        execution = live.execute(job, context)
        store.finish("run-2", state=RunState.SUCCEEDED, ended=clock.now(),
                     output_tail=execution.output_tail)  # fmt: skip
        watcher.join(10)
        # A 2 s run printing every 50 ms: its output reached the store a few times while it
        # ran (once a period, not once a line), then whole at its end.
        assert 2 <= live.writes <= 6, live.writes
        assert seen[-1] == "".join(f"{i}\n" for i in range(40))
        assert len(seen) >= 3
        assert live.flush() == 0  # nothing runs: nothing to write
    finally:
        live.close()
        runner.close()
