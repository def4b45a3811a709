"""The daemon: a `Scheduler` in the foreground, driven by signals (after the FOSSology
scheduler's commands).

- SIGINT / SIGTERM: start nothing new (runs waiting for a worker and pending dependent starts
  end NOT_STARTED), let running jobs finish and their alerts go out, then `run` returns 0.
- A second SIGINT / SIGTERM, or SIGQUIT: stop the running jobs as ``stop_job`` does (SIGTERM
  to each process group, SIGKILL after the job's ``kill_grace``; ``stop()`` on internal jobs;
  each ends FAILED, abnormal), then `run` returns 0. Their alerts are still sent: the process
  ends once they are (bounded by the SMTP timeout and retries).
- SIGHUP: reload the configuration file (`Scheduler.reload`); a bad file is logged, one line
  per problem, and the old configuration stays in force; so does a missing file (not read as
  an empty one). Ignored once shutting down.
- Without a signal, the daemon takes up a change of its file by itself (`filewatch`: a
  ``stat`` every 0.5 s in the main thread, a change taken up within 0.6 s and the reload) as
  SIGHUP does; an edit that does not validate is refused and logged once, and taken up when
  the file is fixed.
- SIGUSR1: log a status summary (running, queued, next runs).
- SIGXCPU, SIGABRT, SIGSYS, SIGTRAP (`FATAL`): logged at ERROR; the running jobs are stopped
  as on SIGQUIT (their process groups included), then `run` returns 1. A CPU limit (SIGXCPU)
  is followed by SIGKILL at its hard limit: stopping the jobs first keeps them from outliving
  us as orphans.
- SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSTKFLT and the real-time signals
  (`IGNORED`): logged at WARNING and otherwise ignored. Their default action would end the
  process at once, without a log line, leaving its jobs running as orphans. They are caught
  by a handler rather than set to SIG_IGN, since an ignored disposition is inherited by the
  job processes and a handled one is not.
- Left at their default (see docs/operations.md, "Signals"): SIGSEGV, SIGBUS, SIGILL, SIGFPE
  (a fault in this process: a handler cannot resume it), SIGCHLD, SIGCONT, SIGURG, SIGWINCH
  (no effect), SIGTSTP, SIGTTIN, SIGTTOU (suspend, as any process; SIGCONT resumes), SIGPIPE
  and SIGXFSZ (ignored by Python itself: the write fails with an error instead).

Signal handlers only put the signal number on a queue; the main thread acts on it, so no work
happens inside a signal handler.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import select
import signal
import threading
from collections.abc import Callable
from datetime import datetime
from types import FrameType

from ..errors import JobActionError
from ..scheduler import Scheduler
from .filewatch import CONFIRM, WATCH_POLL, FileWatch, signature

__all__ = ["Daemon", "status_summary"]

log = logging.getLogger("jobscheduler.daemon")

_STOP = object()

FATAL = ("SIGXCPU", "SIGABRT", "SIGSYS", "SIGTRAP")
"""Signals that end the daemon, after a log line and after stopping the running jobs."""

IGNORED = ("SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGIO", "SIGPWR", "SIGSTKFLT")
"""Signals logged and ignored (with every real-time signal, SIGRTMIN … SIGRTMAX)."""


def signal_name(signum: int) -> str:
    """``SIGUSR2``, or ``SIGRTMIN+3`` for a real-time signal without a name of its own."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIGRTMIN+{signum - signal.SIGRTMIN}"


def _numbers(names: tuple[str, ...]) -> set[int]:
    return {int(getattr(signal, name)) for name in names if hasattr(signal, name)}


def _realtime() -> set[int]:
    low, high = getattr(signal, "SIGRTMIN", None), getattr(signal, "SIGRTMAX", None)
    return set() if low is None or high is None else set(range(low, high + 1))


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

    def __init__(self, scheduler: Scheduler, *, watch_poll: float | None = WATCH_POLL) -> None:
        """`watch_poll`: seconds between two looks at the configuration file (None: changes
        are taken up on SIGHUP only)."""
        self.scheduler = scheduler
        path = scheduler.config_path
        self._watch = None if path is None or watch_poll is None else FileWatch(path)
        self._watch_poll = watch_poll
        self._signals: queue.SimpleQueue[object] = queue.SimpleQueue()
        # The main thread sleeps on this pipe: a byte comes with every item of `_signals`.
        # CPython runs a signal's handler in the main thread, and a signal the kernel gave
        # another thread (the main one had another pending) would not wake a main thread
        # blocked on a lock; written by the interpreter's C handler (`signal.set_wakeup_fd`)
        # from whatever thread got the signal, the pipe wakes it.
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._stopping = False
        self._fatal = False
        self._fatal_signals = _numbers(FATAL)
        self._ignored_signals = _numbers(IGNORED) | _realtime()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._post(signum)  # a byte of its own: the C handler's may have been read before

    def install_signal_handlers(self) -> Callable[[], None]:
        """Install the handlers; returns a function that restores the previous ones."""
        previous = {}
        handled = _numbers(("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGQUIT"))
        for signum in sorted(handled | self._fatal_signals | self._ignored_signals):
            try:
                previous[signum] = signal.signal(signum, self._on_signal)
            except (OSError, ValueError):  # reserved on this platform: nobody can send it
                continue

        previous_fd = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)

        def restore() -> None:
            signal.set_wakeup_fd(previous_fd)
            for signum, handler in previous.items():
                signal.signal(signum, handler)

        return restore

    def request_stop(self) -> None:
        self._post(signal.SIGTERM)

    def _post(self, item: object) -> None:
        """Hand `item` to the main loop (waking it): from another thread, or a handler."""
        self._signals.put(item)
        with contextlib.suppress(BlockingIOError):  # full: it is awake already
            os.write(self._wake_w, b"\0")

    def _next(self) -> object:
        """The next item for the main loop: waits on the wake-up pipe, not on a lock; between
        two items, looks at the configuration file every `watch_poll` seconds."""
        while True:
            try:
                return self._signals.get_nowait()
            except queue.Empty:
                pass
            if self._watch is None:
                select.select([self._wake_r], [], [])
            elif not select.select([self._wake_r], [], [], self._look_in(self._watch))[0]:
                self._look_at_file()
                continue
            with contextlib.suppress(BlockingIOError):
                while os.read(self._wake_r, 512):
                    pass

    def run(self) -> int:
        """Start the scheduler and serve signals until it has shut down. Returns 0, or 1
        after a fatal signal (`FATAL`)."""
        self.scheduler.start()
        log.info(
            "jobscheduler running: %d jobs from %s",
            len(self.scheduler.jobs),
            self.scheduler.config_path or "memory",
        )
        while True:
            item = self._next()
            if item is _STOP:
                break
            assert isinstance(item, int)
            self._handle(item)
        log.info("jobscheduler stopped")
        return 1 if self._fatal else 0

    def _handle(self, signum: int) -> None:
        quit_signal = getattr(signal, "SIGQUIT", -1)
        if signum in self._ignored_signals:
            log.warning('%s ignored (docs/operations.md, "Signals")', signal_name(signum))
        elif signum in self._fatal_signals:
            if not self._fatal:
                self._fatal = True
                log.error(
                    "%s: fatal signal, stopping %d running jobs and exiting",
                    signal_name(signum),
                    len(self.scheduler.executing),
                )
                self._kill(signal_name(signum), quiet=True)
        elif signum in (signal.SIGINT, signal.SIGTERM) and not self._stopping:
            self._stopping = True
            log.info(
                "%s: finishing %d running jobs, starting nothing new (send it again to kill them)",
                signal.Signals(signum).name,
                len(self.scheduler.executing),
            )
            # Synchronous, so that no run can start after this point, even if a second signal
            # follows at once: the kill below then sees every run there is.
            self.scheduler.stop()
            self._shut_down(wait=True)
        elif signum in (signal.SIGINT, signal.SIGTERM, quit_signal):
            self._kill(signal.Signals(signum).name)
        elif signum == getattr(signal, "SIGHUP", -1):
            self._reload()
        elif signum == getattr(signal, "SIGUSR1", -1):
            for line in status_summary(self.scheduler, self.scheduler.clock.now()):
                log.info("status: %s", line)

    def _shut_down(self, wait: bool) -> None:
        """`Scheduler.shutdown` in a thread (it blocks), then tell the main loop."""

        def target() -> None:
            try:
                self.scheduler.shutdown(wait=wait)
            except Exception:
                log.exception("shutdown failed")
            finally:
                self._post(_STOP)

        threading.Thread(target=target, name="jobscheduler-shutdown", daemon=True).start()

    def _kill(self, why: str, *, quiet: bool = False) -> None:
        running = self.scheduler.executing
        if not quiet:
            log.warning("%s: stopping %d running jobs now", why, len(running))
        if not self._stopping:
            self._stopping = True
            self._shut_down(wait=False)  # stops every run itself, atomically
            return
        # A graceful shutdown is under way (scheduling already stopped): stop what runs.
        for name in dict.fromkeys(execution.job_name for execution in running):
            with contextlib.suppress(JobActionError):  # removed meanwhile
                self.scheduler.stop_job(name)

    def _look_in(self, watch: FileWatch) -> float:
        """Seconds to the next look at the file: sooner while a change awaits confirmation."""
        assert self._watch_poll is not None
        return min(CONFIRM, self._watch_poll) if watch.settling else self._watch_poll

    def _look_at_file(self) -> None:
        """Reload once the file changed (see `filewatch`): each state of it once."""
        watch = self._watch
        if watch is None or self._stopping:
            return
        changed, state = watch.poll()
        if not changed:
            return
        watch.taken(state)
        log.info("%s changed: reloading", watch.path)
        self._reload(why="file changed")

    def _reload(self, why: str = "SIGHUP") -> None:
        if self._stopping:
            log.warning("%s ignored: shutting down", why)
            return
        path = self.scheduler.config_path
        if self._watch is not None and why == "SIGHUP":
            self._watch.taken(signature(self._watch.path))  # this state is taken up now
        if path is not None and not path.is_file():
            # The store would read a missing file as an empty one and drop every job.
            log.error("reload refused, keeping the previous configuration: %s: no such file", path)
            return
        try:
            self.scheduler.reload()
        except JobActionError as exc:
            count = len(exc.problems)
            log.error(
                "reload refused, keeping the previous configuration (%d problem%s):",
                count,
                "" if count == 1 else "s",
            )
            for problem in exc.problems:
                log.error("  %s", problem)
        except Exception:
            log.exception("reload failed, keeping the previous configuration")
        else:
            log.info("configuration reloaded: %d jobs", len(self.scheduler.jobs))
