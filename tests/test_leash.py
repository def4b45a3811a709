"""The leash (runners/leash.py) with real processes: it stops a node's runs when the lease
runs out without renewal, and only then.

The leash counts real seconds (it must, while the node is frozen): these tests use short
leases and wait for conditions with generous deadlines, reached only on failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from jobscheduler.runners.leash import Leash
from jobscheduler.runners.procs import process_start_time

NODE = "leash-test-node"


def wait_for(check: Callable[[], bool], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


@pytest.fixture
def launched() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def launch(
    procs: list[subprocess.Popen[bytes]], script: str, *, node: str | None = NODE
) -> subprocess.Popen[bytes]:
    """A run as the external runner launches it: its own session and process group."""
    env = dict(os.environ)
    if node is not None:
        env["JOBSCHEDULER_NODE"] = node
    proc = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True, env=env)
    procs.append(proc)
    return proc


def test_a_run_is_stopped_when_the_lease_is_not_renewed(
    launched: list[subprocess.Popen[bytes]],
) -> None:
    leash = Leash(NODE, lease=2.0)
    try:
        proc = launch(launched, "sleep 60")
        renewed = time.monotonic()
        leash.renew(0.5)
        leash.watch(proc.pid, process_start_time(proc.pid))
        assert wait_for(lambda: proc.poll() is not None)
        assert proc.returncode == -signal.SIGTERM
        assert time.monotonic() - renewed >= 0.45  # not before the deadline
    finally:
        leash.close()


def test_renewals_keep_the_run_and_a_clean_close_leaves_it_alone(
    launched: list[subprocess.Popen[bytes]],
) -> None:
    leash = Leash(NODE, lease=2.0)
    proc = launch(launched, "sleep 60")
    leash.renew(3.0)
    leash.watch(proc.pid, process_start_time(proc.pid))
    for _ in range(5):
        time.sleep(0.2)
        leash.renew(3.0)
    assert proc.poll() is None
    pid = leash.pid
    assert pid is not None
    leash.close()  # "bye": the node leaves; nothing is stopped
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the leash exited (and was reaped)
    time.sleep(0.5)
    assert proc.poll() is None


def test_a_run_that_ignores_sigterm_gets_sigkill_after_the_grace(
    launched: list[subprocess.Popen[bytes]],
) -> None:
    leash = Leash(NODE, lease=2.0)  # grace: 5 % of the lease, 0.1 s
    try:
        proc = launch(launched, "trap '' TERM; sleep 60")
        time.sleep(0.2)  # the trap is set
        leash.renew(0.2)
        leash.watch(proc.pid, process_start_time(proc.pid))
        assert wait_for(lambda: proc.poll() is not None)
        assert proc.returncode == -signal.SIGKILL
    finally:
        leash.close()


def test_the_runs_of_a_dead_node_are_stopped_at_the_deadline_then_the_leash_exits(
    launched: list[subprocess.Popen[bytes]],
) -> None:
    """The pipe closed without "bye" (the node was killed): the runs still die."""
    proc = launch(launched, "sleep 60")
    me = os.getpid()
    node = [NODE, str(me), str(process_start_time(me))]
    leash = subprocess.Popen(
        [sys.executable, "-m", "jobscheduler.runners.leash", *node, "0.1"],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    assert leash.stdin is not None
    leash.stdin.write(f"lease 0.5\nrun {proc.pid} {process_start_time(proc.pid)}\n".encode())
    leash.stdin.close()
    assert wait_for(lambda: proc.poll() is not None)
    assert leash.wait(30) == 0


def test_a_run_not_told_of_yet_is_found_by_its_node_and_no_other_child_is(
    launched: list[subprocess.Popen[bytes]],
) -> None:
    """A run launched just before the node froze (not yet told to the leash) is stopped: a
    child of the node leading a session with the node's name in its environment; another
    child of the program is left alone."""
    leash = Leash(NODE, lease=2.0)
    try:
        told = launch(launched, "sleep 60")
        leash.renew(0.5)
        leash.watch(told.pid, process_start_time(told.pid))  # starts the leash
        untold = launch(launched, "sleep 60")
        stranger = launch(launched, "sleep 60", node=None)
        other_node = launch(launched, "sleep 60", node="another-node")
        assert wait_for(lambda: told.poll() is not None and untold.poll() is not None)
        assert untold.returncode == -signal.SIGTERM
        time.sleep(0.3)  # the SIGKILL step passed too
        assert stranger.poll() is None and other_node.poll() is None
    finally:
        leash.close()


def test_a_run_told_of_after_the_deadline_is_stopped_at_once_until_a_new_lease(
    launched: list[subprocess.Popen[bytes]],
) -> None:
    """A frozen node that wakes up and launches a run it had claimed: stopped at once; once
    it has renewed again (joined again), its runs live."""
    leash = Leash(NODE, lease=2.0)
    try:
        first = launch(launched, "sleep 60")
        leash.renew(0.2)
        leash.watch(first.pid, process_start_time(first.pid))
        assert wait_for(lambda: first.poll() is not None)
        late = launch(launched, "sleep 60", node=None)
        leash.watch(late.pid, process_start_time(late.pid))
        assert wait_for(lambda: late.poll() is not None)
        leash.renew(30.0)
        fresh = launch(launched, "sleep 60", node=None)
        leash.watch(fresh.pid, process_start_time(fresh.pid))
        time.sleep(0.5)
        assert fresh.poll() is None
    finally:
        leash.close()


def test_a_stopped_leash_never_stalls_the_node(
    launched: list[subprocess.Popen[bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    """Messages to a leash that does not read are dropped (warned once), never waited for."""
    leash = Leash(NODE, lease=60.0)
    proc = launch(launched, "sleep 60")
    started = process_start_time(proc.pid)
    leash.renew(50.0)
    leash.watch(proc.pid, started)
    pid = leash.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        begun = time.monotonic()
        for _ in range(20_000):  # far more than a pipe holds (64 KiB)
            leash.watch(proc.pid, started)
        assert time.monotonic() - begun < 20
        assert caplog.text.count("does not keep up") == 1
    finally:
        os.kill(pid, signal.SIGCONT)
        leash.close()
    assert proc.poll() is None


def test_without_an_interpreter_to_start_it_the_node_goes_on_without_a_leash(
    launched: list[subprocess.Popen[bytes]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A program embedding the scheduler whose `sys.executable` is empty: said once."""
    monkeypatch.setattr(sys, "executable", "")
    leash = Leash(NODE, lease=1.0)
    proc = launch(launched, "sleep 60")
    leash.renew(0.1)
    leash.watch(proc.pid, process_start_time(proc.pid))
    leash.watch(proc.pid, process_start_time(proc.pid))
    assert leash.pid is None
    assert caplog.text.count("no Python interpreter to start the leash") == 1
    leash.close()
    time.sleep(0.3)
    assert proc.poll() is None
