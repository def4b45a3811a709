"""Processes by pid *and* start time: is a node's process alive, is a run's group left over.

A pid alone names a process only while it lives: once it exits, the system may hand the same
number to a stranger. So a process is identified here by (pid, start time), the start time
read from ``/proc/PID/stat`` (field 22, clock ticks after boot, turned into seconds since the
epoch with the boot time of ``/proc/stat``). Where there is no ``/proc`` (not Linux) the start
time is unknown (0.0): a process is then taken as alive if its pid exists, and a leftover
process group is never signalled (a stranger could have its pid).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal

__all__ = ["UNKNOWN", "process_alive", "process_start_time", "stop_group"]

log = logging.getLogger("jobscheduler.runners")

UNKNOWN = 0.0
"""The start time of a process where it cannot be read."""

_boot_time: float | None = None


def _boot() -> float | None:
    global _boot_time
    if _boot_time is None:
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                for line in stat:
                    if line.startswith("btime "):
                        _boot_time = float(line.split()[1])
                        break
        except OSError:
            return None
    return _boot_time


def process_start_time(pid: int) -> float:
    """When process `pid` started, in seconds since the epoch (to 1/CLK_TCK, usually 10 ms);
    `UNKNOWN` (0.0) if it does not exist or this system does not say."""
    boot = _boot()
    if boot is None or pid <= 0:
        return UNKNOWN
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return UNKNOWN
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        ticks = int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return UNKNOWN
    return round(boot + ticks / os.sysconf("SC_CLK_TCK"), 2)


def process_alive(pid: int, started: float) -> bool:
    """Whether the process `pid` that started at `started` still lives: the pid exists and,
    where start times are known, has that start time (a recycled pid has another)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    now_started = process_start_time(pid)
    if now_started == UNKNOWN or started == UNKNOWN:
        return now_started != UNKNOWN or _boot() is None
    return abs(now_started - started) < 0.05


def stop_group(pgid: int, started: float) -> bool:
    """SIGKILL the process group led by `pgid` if its leader is still the process that
    started at `started` (never a recycled pid; nothing without a known start time). True if
    a signal was sent. Its processes are not our children: nothing to reap."""
    if started == UNKNOWN or not process_alive(pgid, started):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
        log.warning("stopped the leftover process group %d of a lost run", pgid)
        return True
    return False
