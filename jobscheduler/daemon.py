"""The daemon: a `Scheduler` in the foreground, driven by signals (after the FOSSology
scheduler's commands).

- SIGINT / SIGTERM: finish running jobs, start nothing new, exit 0.
- A second SIGINT / SIGTERM, or SIGQUIT: stop running jobs (process groups killed), exit.
- SIGHUP: reload the configuration file; a bad file is reported and the old one kept.
- SIGUSR1: log a status summary (running, queued, next runs).

Signal handlers only put the signal number on a queue; the main thread acts on it, so no work
happens inside a signal handler.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import signal
import threading
from collections.abc import Callable
from datetime import datetime
from types import FrameType

from .errors import JobActionError
from .scheduler import Scheduler

__all__ = ["Daemon", "status_summary"]

log = logging.getLogger("jobscheduler.daemon")

_STOP = object()


def status_summary(scheduler: Scheduler, now: datetime, next_count: int = 10) -> list[str]:
    """Lines describing what runs now, what waits, and what runs next."""
    lines: list[str] = []
    executing = scheduler.executing
    lines.append(f"running: {len(executing)}")
    for execution in executing:
        lines.append(
            f"  {execution.job_name} (run {execution.run_id}, pid {execution.pid}, "
            f"since {execution.started.isoformat(timespec='seconds')})"
        )
    lines.append(f"queued: {scheduler.queued_count}")
    upcoming: list[tuple[datetime, str]] = []
    for job in scheduler.jobs:
        when = scheduler.next_run(job.name)
        if when is not None:
            upcoming.append((when, job.name))
    upcoming.sort()
    lines.append(f"next runs ({min(next_count, len(upcoming))} of {len(upcoming)} scheduled):")
    for when, name in upcoming[:next_count]:
        lines.append(f"  {when.isoformat(timespec='seconds')}  {name}")
    return lines


class Daemon:
    """Runs `scheduler` until told to stop by a signal (or `request_stop`)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._signals: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._stopping = False
        self._shutdown_done = threading.Event()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals.put(signum)  # SimpleQueue.put is safe in a signal handler

    def install_signal_handlers(self) -> Callable[[], None]:
        """Install the handlers; returns a function that restores the previous ones."""
        previous = {}
        for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGQUIT"):
            signum = getattr(signal, name, None)
            if signum is not None:
                previous[signum] = signal.signal(signum, self._on_signal)

        def restore() -> None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

        return restore

    def request_stop(self) -> None:
        self._signals.put(signal.SIGTERM)

    def run(self) -> int:
        """Start the scheduler and serve signals until it has shut down. Returns 0."""
        self.scheduler.start()
        log.info(
            "jobscheduler running: %d jobs from %s",
            len(self.scheduler.jobs),
            self.scheduler.config_path or "memory",
        )
        while True:
            item = self._signals.get()
            if item is _STOP:
                break
            assert isinstance(item, int)
            self._handle(item)
        log.info("jobscheduler stopped")
        return 0

    def _handle(self, signum: int) -> None:
        if signum in (signal.SIGINT, signal.SIGTERM) and not self._stopping:
            self._stopping = True
            log.info(
                "%s: finishing %d running jobs, starting nothing new (send it again to kill them)",
                signal.Signals(signum).name,
                len(self.scheduler.executing),
            )
            threading.Thread(
                target=self._graceful, name="jobscheduler-shutdown", daemon=True
            ).start()
        elif signum in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGQUIT", -1)):
            self._kill(signal.Signals(signum).name)
        elif signum == getattr(signal, "SIGHUP", -1):
            self._reload()
        elif signum == getattr(signal, "SIGUSR1", -1):
            for line in status_summary(self.scheduler, self.scheduler.clock.now()):
                log.info("status: %s", line)

    def _graceful(self) -> None:
        try:
            self.scheduler.shutdown(wait=True)
        except Exception:
            log.exception("shutdown failed")
        finally:
            self._signals.put(_STOP)

    def _kill(self, why: str) -> None:
        log.warning("%s: stopping every running job now", why)
        if not self._stopping:
            self._stopping = True
            threading.Thread(
                target=self._graceful, name="jobscheduler-shutdown", daemon=True
            ).start()
        for name in {execution.job_name for execution in self.scheduler.executing}:
            with contextlib.suppress(JobActionError):  # removed meanwhile
                self.scheduler.stop_job(name)

    def _reload(self) -> None:
        if self._stopping:
            log.warning("SIGHUP ignored: shutting down")
            return
        try:
            self.scheduler.reload()
        except JobActionError as exc:
            log.error("reload refused, keeping the previous configuration:\n%s", exc)
        except Exception:
            log.exception("reload failed, keeping the previous configuration")
        else:
            log.info("configuration reloaded: %d jobs", len(self.scheduler.jobs))
