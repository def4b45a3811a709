"""External runs: real processes, real signals, real pipes (SystemClock: real time is the point)."""

from __future__ import annotations

import errno
import os
import signal
import stat
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from jobscheduler.clock import SystemClock
from jobscheduler.model.event import Event
from jobscheduler.model.execution import Execution, SchedulerResult
from jobscheduler.model.job import Job
from jobscheduler.runners import external as runners_external
from jobscheduler.runners.runner import RunContext, Runner
from jobscheduler.triggers.interval import Interval

START = datetime(2024, 1, 1, tzinfo=UTC)


def job(command: Any, **fields: Any) -> Job:
    return Job("ext", command=command, start=START, interval=Interval.parse("1 day"), **fields)


@pytest.fixture
def runner() -> Iterator[Runner]:
    with Runner(SystemClock()) as r:
        yield r


def run(runner: Runner, j: Job, run_id: str = "run-1") -> Execution:
    return runner.execute(j, RunContext(j, run_id, None, "run_now"))


def gone(pid: int, within: float = 5.0) -> bool:
    """Whether `pid` has ended (gone, or a zombie its new parent has not reaped yet)."""
    done = threading.Event()
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if within <= 0:
            return False
        done.wait(0.02)
        within -= 0.02


def start_in_thread(
    runner: Runner, j: Job, ctx: RunContext
) -> tuple[threading.Thread, list[Execution]]:
    results: list[Execution] = []
    thread = threading.Thread(target=lambda: results.append(runner.execute(j, ctx)))
    thread.start()
    return thread, results


def wait_for_output(ctx: RunContext, text: str, within: float = 10.0) -> Execution:
    pause = threading.Event()
    while within > 0:
        snap = ctx.snapshot()
        if text in snap.output_tail:
            return snap
        pause.wait(0.01)
        within -= 0.01
    raise AssertionError(f"{text!r} never appeared in the output of run {ctx.run_id}")


# -- outcomes -------------------------------------------------------------------------------


def test_success(runner: Runner) -> None:
    j = job(["sh", "-c", "echo hello"])
    slot = datetime(2024, 5, 1, 3, 0, tzinfo=UTC)
    e = runner.execute(j, RunContext(j, "run-7", slot))
    assert (e.event, e.result, e.reason, e.error) == (
        Event.SUCCESSFUL,
        SchedulerResult.NORMAL,
        None,
        None,
    )
    assert (e.job_name, e.run_id, e.slot, e.trigger) == ("ext", "run-7", slot, "schedule")
    assert e.exit_code == 0
    assert e.output_tail == "hello\n" and e.output_bytes == 6
    assert e.pid is not None and e.pid > 0
    assert e.ended is not None and e.started <= e.ended and e.finished


def test_failure_exit_code(runner: Runner) -> None:
    e = run(runner, job(["sh", "-c", "echo oops >&2; exit 3"]))
    assert (e.event, e.result, e.reason, e.exit_code) == (
        Event.FAILED,
        SchedulerResult.NORMAL,
        "exit code 3",
        3,
    )
    assert e.output_tail == "oops\n"  # stderr shares the pipe with stdout


def test_killed_by_a_signal_of_its_own(runner: Runner) -> None:
    e = run(runner, job(["sh", "-c", "kill -USR1 $$"]))
    assert (e.event, e.result) == (Event.FAILED, SchedulerResult.NORMAL)
    assert e.exit_code == -signal.SIGUSR1
    assert e.reason == "killed by signal SIGUSR1"


def test_command_not_found(runner: Runner) -> None:
    e = run(runner, job(["no-such-command-4f1c"]))
    assert (e.event, e.result) == (Event.NOT_STARTED, SchedulerResult.ABNORMAL)
    assert e.reason == "command not found: no-such-command-4f1c"
    assert e.error is not None and e.error.startswith("FileNotFoundError")
    assert e.exit_code is None and e.pid is None


def test_out_of_descriptors_is_a_launch_failure(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pipe() -> tuple[int, int]:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(runners_external.os, "pipe", no_pipe)
    e = run(runner, job(["true"]))
    assert (e.event, e.result) == (Event.NOT_STARTED, SchedulerResult.ABNORMAL)
    assert e.reason == "cannot launch true: Too many open files"


def test_command_not_executable(runner: Runner, tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    if os.access(script, os.X_OK):  # root may execute anything with some x bit; none is set
        pytest.fail("test setup: the script should not be executable")
    e = run(runner, job([str(script)]))
    assert (e.event, e.result) == (Event.NOT_STARTED, SchedulerResult.ABNORMAL)
    assert e.reason == f"command not executable: {script}"
    assert e.error is not None and e.error.startswith("PermissionError")


def test_bad_working_directory(runner: Runner, tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    e = run(runner, job(["true"], cwd=str(missing)))
    assert (e.event, e.result) == (Event.NOT_STARTED, SchedulerResult.ABNORMAL)
    assert e.reason == f"cannot use working directory {missing}: No such file or directory"
    a_file = tmp_path / "file"
    a_file.write_text("")
    e = run(runner, job(["true"], cwd=str(a_file)))
    assert e.event is Event.NOT_STARTED
    assert e.reason == f"cannot use working directory {a_file}: Not a directory"


def test_working_directory(runner: Runner, tmp_path: Path) -> None:
    e = run(runner, job(["pwd"], cwd=str(tmp_path)))
    assert e.event is Event.SUCCESSFUL
    assert Path(e.output_tail.strip()).resolve() == tmp_path.resolve()


def test_no_shell_unless_asked(runner: Runner) -> None:
    e = run(runner, job("echo 'a  b' $HOME | cat"))
    assert e.output_tail == "a  b $HOME | cat\n"


def test_shell_true(runner: Runner) -> None:
    e = run(runner, job("echo abc | tr a-c x-z && exit 4", shell=True))
    assert e.output_tail == "xyz\n"
    assert e.reason == "exit code 4"


def test_shell_with_a_list_joins_the_words(runner: Runner) -> None:
    e = run(runner, job(["echo", "$((1 + 2))"], shell=True))
    assert e.output_tail == "3\n"


def test_env_is_merged_over_the_environment(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JS_INHERITED", "from-parent")
    monkeypatch.setenv("JS_OVERRIDDEN", "parent")
    j = job(
        ["sh", "-c", 'echo "$JS_INHERITED $JS_OVERRIDDEN $JS_NEW"'],
        env={"JS_OVERRIDDEN": "job", "JS_NEW": "new"},
    )
    assert run(runner, j).output_tail == "from-parent job new\n"


def test_stdin_is_dev_null(runner: Runner) -> None:
    e = run(runner, job(["cat"], timeout=10))  # would block forever on an inherited stdin
    assert (e.event, e.output_tail) == (Event.SUCCESSFUL, "")


def test_new_session_and_no_inherited_fds(runner: Runner) -> None:
    read_end, write_end = os.pipe()  # not inheritable, but close_fds is asked on top
    try:
        e = run(runner, job(["sh", "-c", "echo $$; ps -o sid= -p $$; ls /proc/self/fd"]))
    finally:
        os.close(read_end)
        os.close(write_end)
    pid, sid, *fds = e.output_tail.split()
    assert pid == sid  # the command leads its own session (and process group)
    assert set(fds) <= {"0", "1", "2", "3"}  # 3: the directory ls reads


# -- output ---------------------------------------------------------------------------------


def test_output_larger_than_the_cap(runner: Runner) -> None:
    code = (
        "import sys\n"
        "for i in range(40000): sys.stdout.write(f'{i:07d}\\n')\n"
        "sys.stderr.write('the end\\n')\n"
    )
    e = run(runner, job([sys.executable, "-c", code], output_limit=1000))
    expected = "".join(f"{i:07d}\n" for i in range(40000)) + "the end\n"
    assert e.event is Event.SUCCESSFUL
    assert e.output_bytes == len(expected) == 320008
    assert e.output_tail == expected[-1000:]


def test_tail_cut_inside_a_character_starts_after_it(runner: Runner) -> None:
    e = run(runner, job(["printf", "ééé"], output_limit=3))  # 6 bytes, keep the last 3
    assert (e.output_tail, e.output_bytes) == ("é", 6)


def test_undecodable_bytes_are_replaced(runner: Runner) -> None:
    e = run(runner, job(["printf", "a\\377b"]))
    assert e.output_tail == "a\ufffdb"


def test_output_limit_zero_keeps_only_the_count(runner: Runner) -> None:
    e = run(runner, job(["printf", "12345"], output_limit=0))
    assert (e.output_tail, e.output_bytes) == ("", 5)


def test_much_output_does_not_deadlock(runner: Runner) -> None:
    e = run(runner, job(["sh", "-c", "head -c 3000000 /dev/zero; head -c 3000000 /dev/zero >&2"]))
    assert (e.event, e.output_bytes, len(e.output_tail)) == (Event.SUCCESSFUL, 6000000, 65536)


# -- timeouts and stopping ------------------------------------------------------------------


def test_timeout_kills_the_grandchild(runner: Runner) -> None:
    j = job(["sh", "-c", "sleep 100 & echo $!; wait"], timeout=0.2, kill_grace=0.2)
    e = run(runner, j)
    assert (e.event, e.result, e.reason) == (Event.FAILED, SchedulerResult.ABNORMAL, "timed out")
    assert e.exit_code == -signal.SIGTERM
    grandchild = int(e.output_tail)
    assert gone(grandchild)


def test_sigterm_ignored_then_sigkill_after_kill_grace(runner: Runner) -> None:
    j = job(["sh", "-c", "trap '' TERM; echo ready; sleep 100"], timeout=0.2, kill_grace=0.2)
    e = run(runner, j)
    assert (e.event, e.result, e.reason) == (Event.FAILED, SchedulerResult.ABNORMAL, "timed out")
    assert e.exit_code == -signal.SIGKILL
    assert e.duration is not None and e.duration >= 0.4  # SIGKILL waited for the grace
    assert e.output_tail == "ready\n"


def test_kill_grace_zero_kills_at_once(runner: Runner) -> None:
    j = job(["sh", "-c", "trap '' TERM; sleep 100"], timeout=0.2, kill_grace=0)
    e = run(runner, j)
    assert (e.exit_code, e.reason) == (-signal.SIGKILL, "timed out")


def test_stop_from_another_thread(runner: Runner) -> None:
    j = job(["sh", "-c", "echo ready; sleep 100"])
    ctx = RunContext(j, "run-1", None)
    thread, results = start_in_thread(runner, j, ctx)
    running = wait_for_output(ctx, "ready")
    assert running.event is None and running.ended is None and running.pid is not None
    assert psutil.pid_exists(running.pid)
    ctx.stop("stopped")
    ctx.stop("shutdown")  # idempotent: the first reason stays
    thread.join(10)
    assert not thread.is_alive()
    [e] = results
    assert (e.event, e.result, e.reason) == (Event.FAILED, SchedulerResult.ABNORMAL, "stopped")
    assert e.exit_code == -signal.SIGTERM
    assert ctx.snapshot() is e and ctx.stop_reason == "stopped" and ctx.finished
    assert gone(running.pid)


def test_closing_the_runner_keeps_the_sigkill_step() -> None:
    runner = Runner(SystemClock())
    j = job(["sh", "-c", "trap '' TERM; echo ready; sleep 100"], kill_grace=0.2)
    ctx = RunContext(j, "run-1", None)
    thread, results = start_in_thread(runner, j, ctx)
    wait_for_output(ctx, "ready")
    ctx.stop("shutdown")
    runner.close()  # as a shutdown(wait=False) might, before the run has ended
    thread.join(10)
    [e] = results
    assert (e.reason, e.exit_code) == ("shutdown", -signal.SIGKILL)
    watchdog_threads = [t for t in threading.enumerate() if t.name == "jobscheduler-watchdog"]
    for t in watchdog_threads:
        t.join(10)
    assert runner.watchdog is None


def test_stop_before_the_run_launches_nothing(runner: Runner, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    j = job(["touch", str(marker)])
    ctx = RunContext(j, "run-1", None)
    ctx.stop("shutdown")
    e = runner.execute(j, ctx)
    assert (e.event, e.result, e.reason) == (
        Event.NOT_STARTED,
        SchedulerResult.ABNORMAL,
        "shutdown",
    )
    assert not marker.exists()


def test_stop_after_the_run_changes_nothing(runner: Runner) -> None:
    j = job(["true"])
    ctx = RunContext(j, "run-1", None)
    e = runner.execute(j, ctx)
    ctx.stop("late")
    assert ctx.snapshot() is e and e.event is Event.SUCCESSFUL and ctx.stop_reason is None


def test_a_background_process_holding_the_output_is_killed(runner: Runner) -> None:
    e = run(runner, job(["sh", "-c", "sleep 100 & echo $!"]))
    assert (e.event, e.result, e.exit_code) == (Event.SUCCESSFUL, SchedulerResult.NORMAL, 0)
    assert gone(int(e.output_tail))


def test_a_background_process_with_its_own_output_is_left_alone(runner: Runner) -> None:
    e = run(runner, job(["sh", "-c", "sleep 5 >/dev/null 2>&1 & echo $!"]))
    assert e.event is Event.SUCCESSFUL
    background = psutil.Process(int(e.output_tail))
    try:
        assert background.is_running() and background.status() != psutil.STATUS_ZOMBIE
    finally:
        os.killpg(e.pid or 0, signal.SIGKILL)


# -- resources ------------------------------------------------------------------------------


def _resources() -> tuple[int, int, int]:
    me = psutil.Process()
    return me.num_fds(), threading.active_count(), len(me.children(recursive=True))


def test_a_thousand_runs_leak_nothing(runner: Runner) -> None:
    quick = job(["true"], timeout=30)  # a timeout, so every run also arms and cancels a timer
    failing = job(["no-such-command-4f1c"], timeout=30)
    for j in (quick, failing):  # warm up: the watchdog thread, imports, caches
        run(runner, j)
    before = _resources()
    for i in range(1000):
        e = run(runner, quick if i % 10 else failing, f"run-{i}")
        assert e.event is (Event.SUCCESSFUL if i % 10 else Event.NOT_STARTED)
    after = _resources()
    # No growth (a thread or fd of an earlier test may end meanwhile: <=, not ==).
    assert all(a <= b for a, b in zip(after, before, strict=True)), (before, after)
    watchdog = runner.watchdog
    assert watchdog is not None and watchdog.pending == 0 and len(watchdog._heap) <= 16


def test_concurrent_runs(runner: Runner) -> None:
    results: list[Execution] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        for k in range(10):
            j = job(["sh", "-c", f"echo {n}-{k}"], timeout=30)
            e = run(runner, j, f"run-{n * 100 + k}")
            with lock:
                results.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 60
    assert all(e.event is Event.SUCCESSFUL for e in results)
    assert {e.output_tail for e in results} == {f"{n}-{k}\n" for n in range(6) for k in range(10)}
    assert psutil.Process().children() == []


# -- without pidfd (macOS, old Linux): the runner checks for the exit every 50 ms -------------


@pytest.fixture
def no_pidfd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runners_external, "_pidfd", lambda pid: None)


@pytest.mark.usefixtures("no_pidfd")
def test_without_pidfd_success_and_output(runner: Runner) -> None:
    e = run(runner, job(["sh", "-c", "echo one; sleep 0.1; echo two; exit 2"]))
    assert (e.event, e.reason, e.output_tail) == (Event.FAILED, "exit code 2", "one\ntwo\n")


@pytest.mark.usefixtures("no_pidfd")
def test_without_pidfd_timeout_kills_the_grandchild(runner: Runner) -> None:
    j = job(["sh", "-c", "sleep 100 & echo $!; wait"], timeout=0.2, kill_grace=0.2)
    e = run(runner, j)
    assert (e.event, e.result, e.reason) == (Event.FAILED, SchedulerResult.ABNORMAL, "timed out")
    assert gone(int(e.output_tail))


@pytest.mark.usefixtures("no_pidfd")
def test_without_pidfd_a_background_process_holding_the_output_is_killed(runner: Runner) -> None:
    e = run(runner, job(["sh", "-c", "sleep 100 & echo $!"]))
    assert e.event is Event.SUCCESSFUL
    assert gone(int(e.output_tail))
