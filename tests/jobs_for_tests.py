"""Internal job classes and functions for the tests (any test module may use them).

Refer to them as ``f"{jobs_for_tests.__name__}:Name"``. Each instance registers itself in
`INSTANCES` under its ``key`` argument, so a test can reach the instance a runner created.
Blocking jobs wait on `threading.Event`s with a generous real bound (`SAFETY`), so a broken
stop makes a test fail instead of hanging it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, ClassVar

SAFETY = 30.0  # seconds: the most any job here blocks

INSTANCES: dict[str, Any] = {}
CALLS: dict[str, list[dict[str, Any]]] = {}
_lock = threading.Lock()


def instance(key: str) -> Any:
    with _lock:
        return INSTANCES[key]


def calls(key: str) -> list[dict[str, Any]]:
    with _lock:
        return list(CALLS.get(key, []))


def _register(key: str | None, obj: object) -> None:
    if key is not None:
        with _lock:
            INSTANCES[key] = obj


def _record(key: str | None, **values: Any) -> None:
    if key is not None:
        with _lock:
            CALLS.setdefault(key, []).append(values)


class Succeeds:
    """A plain Schedulable that returns at once."""

    def __init__(self, key: str | None = None) -> None:
        self.key = key
        self.runs = 0
        self.stops = 0
        _register(key, self)

    def run(self) -> None:
        self.runs += 1
        _record(self.key, event="run")

    def stop(self) -> None:
        self.stops += 1


class Fails:
    """A plain Schedulable whose run() raises ValueError(message)."""

    def __init__(self, message: str = "boom") -> None:
        self.message = message

    def run(self) -> None:
        raise ValueError(self.message)

    def stop(self) -> None:
        pass


class Exits:
    """run() calls sys.exit(code)."""

    def __init__(self, code: int = 3) -> None:
        self.code = code

    def run(self) -> None:
        raise SystemExit(self.code)

    def stop(self) -> None:
        pass


class Blocks:
    """A Schedulable whose run() blocks until stop() or `release()` is called."""

    def __init__(self, key: str | None = None, stop_raises: bool = False) -> None:
        self.key = key
        self.stop_raises = stop_raises
        self.started = threading.Event()
        self.stopped = threading.Event()
        self._wake = threading.Event()
        self.stop_calls = 0
        self.stop_thread: str | None = None
        self.finished = False
        _register(key, self)

    def run(self) -> None:
        self.started.set()
        self._wake.wait(SAFETY)
        self.finished = True

    def release(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self.stop_calls += 1
        self.stop_thread = threading.current_thread().name
        self.stopped.set()
        self._wake.set()
        if self.stop_raises:
            raise RuntimeError("stop failed on purpose")


class IgnoresStop:
    """A Schedulable whose stop() does nothing: run() blocks until `release()` (or SAFETY).

    With `started_file`, run() first writes that file: a test in another process (a daemon's)
    can see the run is under way."""

    def __init__(self, key: str | None = None, started_file: str | None = None) -> None:
        self.started = threading.Event()
        self.stop_calls = 0
        self._wake = threading.Event()
        self.finished = threading.Event()
        self._started_file = started_file
        _register(key, self)

    def run(self) -> None:
        if self._started_file is not None:
            with open(self._started_file, "w") as note:
                note.write("started\n")
        self.started.set()
        self._wake.wait(SAFETY)
        self.finished.set()

    def release(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self.stop_calls += 1  # and nothing else: the run goes on


class Reports:
    """A ScheduledEnable reporting `status` and `data` once run() returns."""

    def __init__(
        self,
        status: str | None = "successful",
        data: Mapping[str, Any] | None = None,
        raise_in_run: bool = False,
        key: str | None = None,
    ) -> None:
        self._status = status
        self._data = data
        self._raise = raise_in_run
        self._done = False
        self._current: str | None = "running"
        self.stopped = threading.Event()
        _register(key, self)

    def run(self) -> None:
        try:
            if self._raise:
                raise RuntimeError("broken")
        finally:
            self._current = self._status
            self._done = True

    def stop(self) -> None:
        self.stopped.set()

    def is_done(self) -> bool:
        return self._done

    @property
    def running_status(self) -> str | None:
        return self._current

    @property
    def message_data(self) -> Mapping[str, Any] | None:
        return self._data


class ReportsLater:
    """A ScheduledEnable whose run() hands the work to a thread and returns at once.

    The work ends (is_done() turns true, status "successful") when `finish` is set, or when
    stop() is called (status "failed") unless `ignore_stop`.
    """

    def __init__(self, key: str | None = None, ignore_stop: bool = False) -> None:
        self.finish = threading.Event()
        self.ignore_stop = ignore_stop
        self._done = threading.Event()
        self._status = "running"
        self.stop_calls = 0
        self.returned = threading.Event()
        _register(key, self)

    def run(self) -> None:
        threading.Thread(target=self._work, daemon=True).start()
        self.returned.set()

    def _work(self) -> None:
        if self.finish.wait(SAFETY):
            self._status = "successful"
            self._done.set()

    def stop(self) -> None:
        self.stop_calls += 1
        if not self.ignore_stop:
            self._status = "failed"
            self._done.set()

    def is_done(self) -> bool:
        return self._done.is_set()

    @property
    def running_status(self) -> str:
        return self._status

    @property
    def message_data(self) -> Mapping[str, Any]:
        return {"phase": self._status}


class BrokenReport:
    """A ScheduledEnable whose properties raise."""

    def run(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def is_done(self) -> bool:
        raise RuntimeError("is_done broken")

    @property
    def running_status(self) -> str:
        raise RuntimeError("status broken")

    @property
    def message_data(self) -> Mapping[str, Any]:
        raise RuntimeError("data broken")


class OddData:
    """A ScheduledEnable whose message_data is not a mapping."""

    def run(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def is_done(self) -> bool:
        return True

    running_status: ClassVar[str] = "successful"
    message_data: ClassVar[list[str]] = ["not", "a", "mapping"]


class NeedsArgs:
    """A Schedulable that must be given `count` and may be given `label`."""

    def __init__(self, count: int, label: str = "none", key: str | None = None) -> None:
        self.count = count
        self.label = label
        self.key = key

    def run(self) -> None:
        _record(self.key, count=self.count, label=self.label)

    def stop(self) -> None:
        pass


class SlowConstructor:
    """Its constructor blocks until the test sets ``event(key)``; records run() and stop()."""

    def __init__(self, key: str) -> None:
        self.key = key
        event(key + ":constructing").set()
        event(key).wait(SAFETY)

    def run(self) -> None:
        _record(self.key, event="run")

    def stop(self) -> None:
        _record(self.key, event="stop")


class BadConstructor:
    def __init__(self) -> None:
        raise OSError("no database")

    def run(self) -> None:
        pass


class NoRun:
    def stop(self) -> None:
        pass


class Outer:
    class Inner:
        def __init__(self, key: str | None = None) -> None:
            self.key = key

        def run(self) -> None:
            _record(self.key, event="inner")

        def stop(self) -> None:
            pass


def add(a: int = 1, b: int = 2, key: str | None = None) -> int:
    _record(key, total=a + b)
    return a + b


def explode(message: str = "kaboom") -> None:
    raise KeyError(message)


def wait_for(key: str) -> None:
    """A function that blocks until the test sets ``EVENTS[key]``."""
    with _lock:
        event = EVENTS.setdefault(key, threading.Event())
        started = EVENTS.setdefault(key + ":started", threading.Event())
    started.set()
    event.wait(SAFETY)


def event(key: str) -> threading.Event:
    with _lock:
        return EVENTS.setdefault(key, threading.Event())


EVENTS: dict[str, threading.Event] = {}

NOT_CALLABLE = 42
