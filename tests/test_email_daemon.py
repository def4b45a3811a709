"""The daemon and a mail server that never answers (issue 15, case 2): ``jobscheduler run`` as
a real process, alerts to a real socket on 127.0.0.1 that accepts and stays silent.

Before: SIGTERM (and a second one, and SIGQUIT) waited for every queued alert, each up to
``(retries + 1) × timeout`` (here 4 × 30 s): the daemon did not exit within 15 s. Now the wait
for alerts is bounded (10 s after SIGTERM, 1 s after SIGQUIT) and each alert not delivered has
its own log line.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from smtp_server import silent_server
from test_daemon import Daemon, daemon, every_second

__all__ = ["daemon"]  # the fixture, shared with test_daemon


def config(port: int) -> str:
    return (
        "email:\n"
        "  from_address: scheduler@example.com\n"
        '  subject: "{{ JobName }} {{ JobStatus }}"\n'
        f"  smtp: {{host: 127.0.0.1, port: {port}, timeout: 30s, retries: 3}}\n"
        "jobs:\n"
        + every_second("fails", "exit 1")
        + "    messages:\n      failed: {recipients: [ops@example.com]}\n"
    )


def outcomes(log: str) -> tuple[int, int]:
    """(alerts queued, alerts with a final line: sent, not sent, or not delivered)."""
    queued = len(re.findall(r"alert for job 'fails' \(FAILED\) to \S+ queued for", log))
    final = len(
        re.findall(r"alert for job 'fails' \(FAILED\) to \S+ (?:\(subject .*\) )?not deliv", log)
    ) + len(re.findall(r"alert for job 'fails' \(FAILED\) (?:to \S+ not sent|sent to)", log))
    return queued, final


@pytest.mark.parametrize(("signum", "bound"), [(signal.SIGTERM, 14.0), (signal.SIGQUIT, 5.0)])
def test_a_dead_mail_server_does_not_hold_the_daemon(
    daemon: Callable[..., Daemon], tmp_path: Path, signum: int, bound: float
) -> None:
    with silent_server() as port:
        proc = daemon(config(port))
        proc.wait_log(r"jobscheduler running: 1 jobs")
        proc.wait_log(r"(?s)(queued for 127\.0\.0\.1:\d+.*){3}")
        began = time.monotonic()
        proc.signal(signum)
        assert proc.wait_exit(bound + 5) == 0
        took = time.monotonic() - began
        log = proc.log
    assert took < bound, f"the daemon took {took:.1f} s to exit after {signum!r}:\n{log}"
    queued, final = outcomes(log)
    assert queued >= 3
    assert final == queued, log  # every alert queued has its last word in the log
    assert "at shutdown" in log
    assert log.rstrip().endswith("jobscheduler stopped")
