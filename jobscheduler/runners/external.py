"""Running an EXTERNAL job: one operating-system process group, its output, its end.

The command runs as the leader of a new session and process group (``start_new_session``), so
a stop reaches every process it started: SIGTERM to the whole group, then SIGKILL after the
job's ``kill_grace``. Standard input is /dev/null; standard output and standard error share one
pipe (their lines stay in order) that the worker thread reads itself, with poll(2), so a
chatty command never blocks on a full pipe and memory stays bounded: only the last
``output_limit`` bytes are kept, plus the count of all bytes.

The end of the process is noticed through a pidfd (Linux 5.3+); elsewhere the runner checks
every 50 ms. The leader is reaped only when the run is over: until then its pid cannot be
reused, so signalling its group never reaches a stranger.

Once the leader has exited, output still arriving is read for as long as it keeps coming
(pauses of at most 0.2 s, 256 reads at most). A background process that still holds the pipe
after that (``sleep 100 &``) would keep the run open forever: its process group gets SIGKILL
and the pipe is closed. A background process that let go of the pipe (``cmd >log 2>&1 &``)
is left alone. These pauses are real time, not the `Clock`'s: they bound an operating-system
wait, and a FakeClock that never moves must not stall them. The ``timeout`` and the
``kill_grace`` are the Clock's.

The environment is the scheduler's own with the job's ``env`` over it and the run's identity
(``JOBSCHEDULER_*``, see `jobscheduler.runners.identity`) over both (see `command_env`);
the working directory is ``cwd``, else the scheduler's; file descriptors other than 0, 1 and
2 are closed. The exit code is the process's (negative: the signal that killed it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..model.event import Event
from ..model.execution import SchedulerResult
from .context import Outcome
from .identity import run_environment

if TYPE_CHECKING:
    from ..model.job import Job
    from .context import RunContext
    from .watchdog import Timer

__all__ = ["OutputTail", "run_external"]

log = logging.getLogger("jobscheduler.runners")

Schedule = Callable[[timedelta, Callable[[], None]], "Timer"]

SHELL = "/bin/sh"
_READ_SIZE = 64 * 1024
_POLL = 0.05  # seconds between exit checks where there is no pidfd
_DRAIN_IDLE = 0.2  # after the leader exited: how long a pause in the output may be
_DRAIN_READS = 256  # ... and how many more reads at most
_FINAL_IDLE = 0.5  # after killing what held the pipe: the last wait for end of file


class OutputTail:
    """The last `limit` bytes of a stream and the count of all of them. Thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._buffer = bytearray()
        self._lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self.total += len(chunk)
            if self.limit == 0:
                return
            self._buffer += chunk
            # Trim only when twice the limit: amortised O(1) per byte.
            if len(self._buffer) > 2 * self.limit:
                del self._buffer[: len(self._buffer) - self.limit]

    def text(self) -> str:
        """The tail decoded as UTF-8 (bad bytes replaced).

        A tail cut inside a multi-byte character starts after it, not with a replacement mark.
        """
        with self._lock:
            tail = bytes(self._buffer[-self.limit :]) if self.limit else b""
            total = self.total
        if total > len(tail):
            skip = 0
            while skip < min(3, len(tail)) and tail[skip] & 0xC0 == 0x80:
                skip += 1
            tail = tail[skip:]
        return tail.decode("utf-8", errors="replace")

    def state(self) -> dict[str, Any]:
        return {"output_tail": self.text(), "output_bytes": self.total}


def command_argv(job: Job) -> list[str]:
    """The argv a job runs: its argv list, or ``/bin/sh -c <command>`` when ``shell`` is set.

    With ``shell`` and a list command, the words are joined with single spaces and the shell
    reads them (no quoting is added: shell syntax in them works).
    """
    if job.shell:
        text = " ".join(job.argv) if isinstance(job.command, tuple) else str(job.command)
        return [SHELL, "-c", text]
    return job.argv


# The scheduler's environment as the operating system holds it (bytes to bytes): copied
# in one C call, where walking `os.environ` decodes every entry (16 µs for 35 of them). It is
# the live mapping `os.environ` writes through, so a change the program makes is seen by the
# next run. Elsewhere (no such dict), `os.environ` is encoded entry by entry.
_RAW_ENVIRON: dict[bytes, bytes] | None = getattr(os.environ, "_data", None)
if not isinstance(_RAW_ENVIRON, dict) or not all(isinstance(k, bytes) for k in _RAW_ENVIRON):
    _RAW_ENVIRON = None
_ARGS = b"JOBSCHEDULER_ARGS"


def command_env(job: Job, ctx: RunContext) -> dict[bytes, bytes]:
    """A run's environment: the scheduler's own, the job's ``env`` entries over it, then the
    run's ``JOBSCHEDULER_*`` variables (`run_environment`) over both.

    A variable cannot be removed, only set (to an empty text if need be). The run's variables
    are the run's own: the job's ``env`` cannot set them, and ``JOBSCHEDULER_ARGS`` inherited
    from the scheduler's environment (a scheduler started by another one) is left out of a
    run that has no arguments.
    """
    raw = _RAW_ENVIRON
    if raw is not None:
        env = raw.copy()
    else:
        env = {os.fsencode(key): os.fsencode(value) for key, value in os.environ.items()}
    encode = os.fsencode
    if job.env:
        for key, value in job.env.items():
            env[encode(key)] = encode(value)
    for key, value in run_environment(ctx).items():
        env[encode(key)] = encode(value)
    if ctx.args is None:
        env.pop(_ARGS, None)
    return env


class _ProcessGroup:
    """Signals the run's process group until the run is closed; owns the SIGKILL step."""

    def __init__(self, pid: int, kill_grace: timedelta, schedule: Schedule) -> None:
        self.pid = pid
        self._kill_grace = kill_grace
        self._schedule = schedule
        self._lock = threading.Lock()
        self._closed = False
        self._timer: Timer | None = None

    def signal(self, signum: int) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                os.killpg(self.pid, signum)
            except ProcessLookupError:
                pass  # every process of the group has ended
            except OSError as exc:  # macOS: EPERM for a group of zombies
                log.debug("killpg(%d, %d): %s", self.pid, signum, exc)

    def stop(self, reason: str) -> None:
        """SIGTERM to the group now, SIGKILL after the kill grace (at once if it is 0)."""
        log.info("stopping process group %d (%s)", self.pid, reason)
        self.signal(signal.SIGTERM)
        if self._kill_grace <= timedelta(0):
            self.kill()
            return
        with self._lock:
            if self._closed or self._timer is not None:
                return
            self._timer = self._schedule(self._kill_grace, self.kill)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def close(self) -> None:
        """No more signals: the leader is about to be reaped and its pid freed."""
        with self._lock:
            self._closed = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()


def _launch_failure(exc: BaseException, argv: list[str], cwd: str | None) -> Outcome:
    error = describe(exc)
    program = argv[0]
    if isinstance(exc, OSError):
        if cwd is not None and exc.filename == cwd:
            detail = exc.strerror or error
            return Outcome.not_started(f"cannot use working directory {cwd}: {detail}", error)
        if isinstance(exc, FileNotFoundError):
            return Outcome.not_started(f"command not found: {program}", error)
        if isinstance(exc, PermissionError):
            return Outcome.not_started(f"command not executable: {program}", error)
        detail = exc.strerror or error
        return Outcome.not_started(f"cannot launch {program}: {detail}", error)
    return Outcome.not_started(f"cannot launch {program}: {error}", error)


def describe(exc: BaseException) -> str:
    """``"ExceptionType: message"``, or just the type when there is no message."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def exit_reason(returncode: int) -> str | None:
    """None for 0; ``"exit code N"``; ``"killed by signal SIGX"`` for a negative code."""
    if returncode == 0:
        return None
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by signal {name}"
    return f"exit code {returncode}"


def run_external(job: Job, ctx: RunContext, schedule: Schedule) -> Outcome:
    """Run `job`'s command to its end in this thread; `schedule` arms the SIGKILL step."""
    argv = command_argv(job)
    # The pipe is made here and read as a bare descriptor: Popen's own would come wrapped in
    # a buffered file object, unused (15-20 µs of CPU a run). Both ends are non-inheritable;
    # the child gets the write end as its standard output and error.
    try:
        out, write_end = os.pipe()
    except OSError as exc:  # out of descriptors: as Popen would have failed
        return _launch_failure(exc, argv, job.cwd)
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.STDOUT,
            cwd=job.cwd,
            env=command_env(job, ctx),
            start_new_session=True,
            close_fds=True,
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        os.close(out)
        return _launch_failure(exc, argv, job.cwd)
    finally:
        os.close(write_end)  # the child's copy is the only one left: its end of file is ours
    tail = OutputTail(job.output_limit)
    group = _ProcessGroup(process.pid, job.kill_grace, schedule)
    pid = process.pid
    if ctx.on_launch is not None:
        try:
            ctx.on_launch(ctx, pid)
        except Exception:
            log.exception(
                "run %s of %r: recording its process %d failed", ctx.run_id, job.name, pid
            )

    def probe() -> Mapping[str, Any]:
        return {"pid": pid, **tail.state()}

    ctx._attach(group.stop, probe)
    try:
        _pump(pid, out, tail, group)
    except BaseException:
        group.kill()  # never leave a process behind, whatever went wrong here
        raise
    finally:
        stop_reason = ctx._settle()
        group.close()
        os.close(out)
        returncode = process.wait()  # reaps the leader: after close(), no signal can follow
    common: dict[str, Any] = {"exit_code": returncode, "pid": pid, **tail.state()}
    if stop_reason is not None:
        return Outcome(Event.FAILED, SchedulerResult.ABNORMAL, reason=stop_reason, **common)
    reason = exit_reason(returncode)
    event = Event.SUCCESSFUL if reason is None else Event.FAILED
    return Outcome(event, SchedulerResult.NORMAL, reason=reason, **common)


def _pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd


def _has_exited(pid: int) -> bool:
    # WNOWAIT: look without reaping, so the pid stays ours until the run is over.
    result = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    return result is not None and result.si_pid == pid


def _pump(pid: int, out: int, tail: OutputTail, group: _ProcessGroup) -> None:
    """Read the output (`out`, the pipe's read end) until end of file and the exit of the
    leader `pid` (see the module notes).

    `select.poll` on the pipe and the pidfd: no selector object to set up and tear down per
    run (an epoll selector costs four more system calls and 30-40 µs). Once the output is
    over, the leader's exit is awaited with ``waitid`` (it does not reap).
    """
    pidfd = _pidfd(pid)
    poller = select.poll()
    poller.register(out, select.POLLIN)
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    try:
        eof = exited = killed = False
        reads_after_exit = 0
        while not (eof and exited):
            if not exited:
                if eof and pidfd is not None:
                    _wait_exit(pid)  # a stop or a timeout still ends it: they signal the group
                    exited = True
                    continue
                timeout = None if pidfd is not None else _POLL * 1000
            else:
                timeout = (_FINAL_IDLE if killed else _DRAIN_IDLE) * 1000
            events = poller.poll(timeout)
            for fd, _ in events:
                if fd == pidfd:
                    exited = True
                    poller.unregister(fd)
                    continue
                chunk = os.read(out, _READ_SIZE)
                if not chunk:
                    eof = True
                    poller.unregister(out)
                    continue
                tail.add(chunk)
                if exited:
                    reads_after_exit += 1
            if not exited and pidfd is None:
                exited = _has_exited(pid)
                continue
            if not exited or eof:
                continue
            if not events or reads_after_exit > _DRAIN_READS:
                if killed:
                    log.warning(
                        "process group %d: output still open after SIGKILL; closing it", group.pid
                    )
                    return
                log.info("process group %d: leader exited, output still open: SIGKILL", group.pid)
                group.kill()
                killed = True
                reads_after_exit = 0
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _wait_exit(pid: int) -> None:
    """Block until the leader `pid` has exited, without reaping it."""
    # ChildProcessError: reaped by someone else (a SIGCHLD handler of the program): exited.
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
