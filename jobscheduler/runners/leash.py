"""The leash: a small process beside a node that stops the node's external runs when the
node's lease runs out without renewal, even when the node itself cannot (frozen).

A node's own threads stop its runs before its lease ends when heartbeats fail (fencing, in
`jobscheduler.cluster.node`). A node whose whole process is stopped — SIGSTOP, a long GC or
swap pause — runs none of its threads: its lease ends, another node reruns its runs, and its
own external commands, processes of their own, would go on beside the rerun. The leash is
another process (its own session: a signal to the node's process group does not reach it),
started by the node with its first external run, that the node tells through a pipe:

- ``lease SECONDS``: at each renewal, how long the node's runs may still live (the node
  sends ``RUN_SHARE`` of its lease after the renewal was sent, on its own clock);
- ``run PID STARTED``: an external run's process group (its leader's pid and start time,
  `procs.process_start_time`), right after it was launched;
- ``bye``: the node leaves cleanly (its runs have ended): nothing is stopped.

When the deadline passes without a new ``lease`` line, the leash sends SIGTERM to each
recorded group whose leader is still that very process (pid *and* start time), and to every
run the node's process launched and has not told of yet (its children leading a session,
with the node's ``JOBSCHEDULER_NODE`` in their environment), then SIGKILL
``grace`` seconds later; a group told of after that is stopped at once, until a new lease
comes (the node joined again). The end of the pipe (the node died: kill -9, OOM) changes
nothing: the runs are stopped at the deadline, then the leash exits.

Real time here (``time.monotonic``), not the `Clock`: the leash bounds what the operating
system does while the node, and so its clock, may be stopped.

What it cannot do: stop an internal (Python) run of a frozen node (it lives in the node's own
process; only killing that process would), or anything when the whole machine is frozen (the
leash is frozen with it). See docs/state.md, "Failures: what is promised and measured".
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time

from .procs import UNKNOWN, process_alive, process_start_time

__all__ = ["KILL_SHARE", "RUN_SHARE", "Leash", "main"]

log = logging.getLogger("jobscheduler.runners")

RUN_SHARE = 0.9
"""The part of the lease after its renewal at which the leash sends SIGTERM (after the node's
own fencing at 80 %: the leash is the backstop)."""
KILL_SHARE = 0.95
"""The part of the lease after its renewal at which the leash sends SIGKILL."""


class Leash:
    """The node's side: starts the leash process on the first `watch`, tells it each renewal.

    Thread-safe; never raises: a leash that cannot be started or has died is logged (once)
    and the node goes on without it (its own fencing remains).
    """

    def __init__(self, node: str, lease: float) -> None:
        self._node = node
        self._lease = lease
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._left: tuple[float, float] | None = None  # (seconds left, monotonic when told)
        self._broken = False
        self._closed = False
        self._dropping = False  # a message was dropped (the pipe full): warned once

    @property
    def pid(self) -> int | None:
        """The leash process's pid once started (tests)."""
        with self._lock:
            return None if self._process is None else self._process.pid

    def renew(self, left: float) -> None:
        """The lease was renewed: the node's runs may live `left` more seconds."""
        with self._lock:
            self._left = (left, time.monotonic())
            if self._process is not None:
                self._send(f"lease {left:.3f}\n")

    def watch(self, pid: int, started: float) -> None:
        """An external run's process group, led by `pid` (that started at `started`)."""
        if started == UNKNOWN:
            return  # no start time (not Linux): a recycled pid could be a stranger's
        with self._lock:
            if self._closed or self._broken:
                return
            if self._process is None and not self._start():
                return
            self._send(f"run {pid} {started}\n")

    def close(self) -> None:
        """The node leaves: nothing to stop; the leash exits."""
        with self._lock:
            self._closed = True
            process, self._process = self._process, None
            if process is None:
                return
            self._send_to(process, "bye\n")
            with contextlib.suppress(OSError):
                if process.stdin is not None:
                    process.stdin.close()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _start(self) -> bool:
        # Called with the lock held.
        grace = self._lease * (KILL_SHARE - RUN_SHARE)
        pid = os.getpid()
        if not sys.executable:  # an embedding program that does not say (uWSGI, say)
            self._broken = True
            log.error(
                "no Python interpreter to start the leash process with (sys.executable is "
                "empty): runs of a frozen node will not be stopped from outside"
            )
            return False
        try:
            self._process = subprocess.Popen(
                [
                    *(sys.executable, "-m", "jobscheduler.runners.leash", self._node),
                    *(str(pid), str(process_start_time(pid)), f"{grace:.3f}"),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
            assert self._process.stdin is not None
            os.set_blocking(self._process.stdin.fileno(), False)
        except OSError as exc:
            self._broken = True
            log.error("the leash process could not be started (%s): runs of a frozen node "
                      "will not be stopped from outside", exc)  # fmt: skip
            return False
        if self._left is not None:
            left, told = self._left
            self._send(f"lease {left - (time.monotonic() - told):.3f}\n")
        return True

    def _send(self, line: str) -> None:
        # Called with the lock held.
        process = self._process
        if process is not None and not self._send_to(process, line):
            self._broken = True
            self._process = None
            log.error("the leash process has gone: runs of a frozen node will not be stopped "
                      "from outside")  # fmt: skip

    def _send_to(self, process: subprocess.Popen[bytes], line: str) -> bool:
        """Write `line` (shorter than PIPE_BUF: all or nothing) without blocking: a leash
        that does not read (stopped itself) must never stall the node's workers; the line is
        then dropped (warned once). False when the leash has gone."""
        try:
            assert process.stdin is not None
            os.write(process.stdin.fileno(), line.encode("ascii"))
        except BlockingIOError:
            if not self._dropping:
                self._dropping = True
                log.warning("the leash process does not keep up: messages to it are dropped")
        except (OSError, ValueError):
            return False
        return True


# -- the leash process ----------------------------------------------------------------------


def _runs_launched_by(parent: int, node: str) -> list[tuple[int, float]]:
    """The runs node `node` (process `parent`) launched, as (pid, start time): its children
    that lead a session of their own (see `external`) with ``JOBSCHEDULER_NODE=node`` in
    their environment (not another child of a program that embeds the scheduler)."""
    marker = f"JOBSCHEDULER_NODE={node}".encode()
    found: list[tuple[int, float]] = []
    mine = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit() or int(name) == mine:
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as stat:
                text = stat.read()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        try:
            ppid, session = int(fields[1]), int(fields[3])
        except (IndexError, ValueError):
            continue
        pid = int(name)
        if ppid != parent or session != pid:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                variables = environ.read().split(b"\0")
        except OSError:
            continue
        if marker in variables:
            found.append((pid, process_start_time(pid)))
    return found


class _Keeper:
    """The leash process's state: the deadline, the groups, what was sent."""

    def __init__(self, node: str, node_pid: int, node_started: float, grace: float) -> None:
        self.node = node
        self.node_pid = node_pid
        self.node_started = node_started
        self.grace = grace
        self.deadline: float | None = None  # monotonic: SIGTERM then, SIGKILL `grace` later
        self.groups: dict[int, float] = {}
        self.stage = 0  # 0: the lease holds; 1: SIGTERM sent; 2: SIGKILL sent

    def line(self, text: str) -> bool:
        """Take one line; False for ``bye``."""
        words = text.split()
        if not words:
            return True
        if words[0] == "bye":
            return False
        if words[0] == "lease" and len(words) == 2:
            self.deadline = time.monotonic() + float(words[1])
            self.stage = 0
            self.groups = {p: s for p, s in self.groups.items() if process_alive(p, s)}
        elif words[0] == "run" and len(words) == 3:
            pid, started = int(words[1]), float(words[2])
            self.groups[pid] = started
            if self.stage:
                self._signal({pid: started}, signal.SIGTERM if self.stage == 1 else signal.SIGKILL)
        return True

    def due(self) -> float | None:
        """Seconds until the next step (None: nothing to wait for)."""
        if self.deadline is None or self.stage == 2:
            return None
        at = self.deadline + (self.grace if self.stage == 1 else 0.0)
        return max(0.0, at - time.monotonic())

    def step(self) -> None:
        left = self.due()
        if left is None or left > 0:
            return
        self.stage += 1
        targets = dict(self.groups)
        if process_alive(self.node_pid, self.node_started):  # frozen, not gone
            targets.update(_runs_launched_by(self.node_pid, self.node))
        self._signal(targets, signal.SIGTERM if self.stage == 1 else signal.SIGKILL)

    @staticmethod
    def _signal(groups: dict[int, float], signum: int) -> None:
        for pid, started in groups.items():
            if started == UNKNOWN or not process_alive(pid, started):
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signum)
                print(
                    f"jobscheduler leash: the node's lease ran out: signal {signum} to process "
                    f"group {pid}",
                    file=sys.stderr,
                    flush=True,
                )


def main(argv: list[str] | None = None) -> int:
    """``python -m jobscheduler.runners.leash NODE NODE_PID NODE_STARTED GRACE``: the node's
    name, its process (pid and start time), the seconds from SIGTERM to SIGKILL; then lines
    on standard input (see the module notes)."""
    args = sys.argv[1:] if argv is None else argv
    keeper = _Keeper(args[0], int(args[1]), float(args[2]), float(args[3]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the node
    buffer = b""
    open_pipe = True
    while True:
        wait = keeper.due()
        if not open_pipe and wait is None:
            return 0  # the node is gone and there is nothing left to do
        if open_pipe:
            ready, _, _ = select.select([0], [], [], wait)
        else:
            ready = []
            time.sleep(wait or 0.0)
        if ready:
            chunk = os.read(0, 4096)
            if not chunk:
                open_pipe = False
            buffer += chunk
            while b"\n" in buffer:
                text, buffer = buffer.split(b"\n", 1)
                try:
                    if not keeper.line(text.decode("ascii", errors="replace")):
                        return 0
                except ValueError:
                    continue  # a garbled line: ignored
        keeper.step()


if __name__ == "__main__":
    sys.exit(main())
