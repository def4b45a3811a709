"""Internal jobs for the run-policy tests: they record their run's context."""

from __future__ import annotations

import threading
from typing import Any

from jobscheduler import current_run

SAFETY = 30.0

CALLS: dict[str, list[dict[str, Any]]] = {}
GATES: dict[str, threading.Event] = {}
STARTED: dict[str, threading.Event] = {}
_lock = threading.Lock()


def calls(key: str) -> list[dict[str, Any]]:
    with _lock:
        return list(CALLS.get(key, []))


def _note(key: str) -> None:
    ctx = current_run()
    assert ctx is not None
    with _lock:
        CALLS.setdefault(key, []).append(
            {"trigger": ctx.trigger, "slot": ctx.slot, "attempt": ctx.attempt, "run_id": ctx.run_id}
        )


def gate(key: str) -> threading.Event:
    with _lock:
        return GATES.setdefault(key, threading.Event())


def started(key: str) -> threading.Event:
    with _lock:
        return STARTED.setdefault(key, threading.Event())


def ok(key: str) -> None:
    _note(key)


def flaky(key: str, failures: int = 1) -> None:
    """Fails its first `failures` calls, then succeeds."""
    _note(key)
    if len(calls(key)) <= failures:
        raise RuntimeError(f"failure {len(calls(key))}")


def fail(key: str) -> None:
    _note(key)
    raise RuntimeError("always fails")


class Holds:
    """Runs until `gate(key)` is set or it is stopped; `started(key)` is set on each start."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._stop = threading.Event()

    def run(self) -> None:
        _note(self.key)
        started(self.key).set()
        waiter = gate(self.key)
        for _ in range(int(SAFETY * 100)):
            if waiter.is_set() or self._stop.is_set():
                break
            self._stop.wait(0.01)
        if self._stop.is_set():
            raise RuntimeError("stopped")

    def stop(self) -> None:
        self._stop.set()


def wait_calls(key: str, count: int, timeout: float) -> None:
    """Wait (real time, bounded) until `key` has `count` runs; AssertionError if not."""
    pause = threading.Event()
    for _ in range(int(timeout * 100)):
        if len(calls(key)) >= count:
            return
        pause.wait(0.01)
    raise AssertionError(f"{key}: {len(calls(key))} runs, not {count}")
