"""The daemon: ``python -m jobscheduler run CONFIG`` as a real process, driven by signals.

Every test polls files with a deadline rather than sleeping a fixed time. The `daemon` fixture
kills whatever is left (the daemon's process group and every process it started, job
processes in their own groups included) when a test ends, passed or failed.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

DEADLINE = 60.0  # seconds: the most any wait here takes before the test fails (loaded machine)


def wait_until(condition: Callable[[], object], what: str, timeout: float = DEADLINE) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


class Daemon:
    """One ``jobscheduler run`` process; its stderr (the log) goes to ``log_path``."""

    def __init__(self, config: Path, *extra: str) -> None:
        self.config = config
        self.log_path = config.parent / "daemon.log"
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "jobscheduler", "run", str(config), *extra],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=config.parent,
                start_new_session=True,  # its own group: the finalizer can kill it whole
            )
        self.seen: dict[int, psutil.Process] = {}

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def wait_log(self, pattern: str, timeout: float = DEADLINE) -> re.Match[str]:
        found: list[re.Match[str]] = []

        def search() -> bool:
            match = re.search(pattern, self.log, re.MULTILINE)
            if match:
                found.append(match)
            self._remember_children()
            return match is not None

        wait_until(search, f"{pattern!r} in the log:\n{self.log}", timeout)
        return found[0]

    def signal(self, signum: int) -> None:
        self._remember_children()
        self.process.send_signal(signum)

    def wait_exit(self, timeout: float = DEADLINE) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the daemon did not exit in {timeout} s:\n{self.log}") from None

    def _remember_children(self) -> None:
        """Job processes live in their own groups and outlive a killed daemon: note them."""
        try:
            children = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            self.seen.setdefault(child.pid, child)

    def leftovers(self) -> list[psutil.Process]:
        """The processes it started that still run (zombies count as gone)."""
        self._remember_children()
        return [p for p in self.seen.values() if not gone(p.pid)]

    def kill_everything(self) -> None:
        self._remember_children()
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        for child in self.seen.values():
            with contextlib.suppress(psutil.Error):
                child.kill()  # psutil refuses if the pid now belongs to another process


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def start(text: str, *extra: str) -> Daemon:
        config = tmp_path / "jobs.yaml"
        config.write_text(text)
        process = Daemon(config, "--log-level", "INFO", *extra)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill_everything()


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def every_second(name: str, shell: str, **keys: str) -> str:
    extra = "".join(f"    {key}: {value}\n" for key, value in keys.items())
    return (
        f"  {name}:\n"
        f"    command: [sh, -c, {shell!r}]\n"
        "    start: 2024-01-01 00:00:00\n"
        "    interval: 1 second\n" + extra
    )


def test_runs_jobs_logs_status_and_stops_on_sigterm(
    daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    ticks = tmp_path / "ticks.txt"
    proc = daemon("jobs:\n" + every_second("tick", "echo tick >> ticks.txt"))
    proc.wait_log(r"jobscheduler running: 1 jobs from ")
    wait_until(lambda: len(lines(ticks)) >= 2, "two ticks")
    proc.wait_log(r"jobscheduler\.audit: tick : \S+ : \S+ : normal : SUCCESSFUL$")

    proc.signal(signal.SIGUSR1)
    proc.wait_log(r"status: next runs \(1 of 1 scheduled\):")
    log = proc.log
    assert re.search(r"status: running: [01]$", log, re.MULTILINE)
    assert re.search(r"status: queued: 0$", log, re.MULTILINE)
    assert re.search(r"status:   \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00  tick$", log, re.MULTILINE)

    proc.signal(signal.SIGTERM)
    assert proc.wait_exit() == 0
    assert "SIGTERM: finishing" in proc.log
    assert proc.log.rstrip().endswith("jobscheduler stopped")
    assert proc.leftovers() == []


def test_sighup_reloads_an_edit_and_keeps_the_old_config_on_a_bad_one(
    daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    ticks, tocks = tmp_path / "ticks.txt", tmp_path / "tocks.txt"
    proc = daemon("jobs:\n" + every_second("tick", "echo tick >> ticks.txt"))
    wait_until(lambda: lines(ticks), "a tick")

    with proc.config.open("a") as file:
        file.write(every_second("tock", "echo tock >> tocks.txt"))
    proc.signal(signal.SIGHUP)
    proc.wait_log(r"configuration reloaded: 2 jobs")
    wait_until(lambda: len(lines(tocks)) >= 1, "the added job to run")

    good = proc.config.read_text()
    bad_line = len(good.splitlines()) + 5  # the line of 'colour'
    with proc.config.open("a") as file:
        file.write(every_second("broken", "true", colour="blue"))
    proc.signal(signal.SIGHUP)
    proc.wait_log(r"reload refused, keeping the previous configuration \(1 problem\):")
    problem = proc.wait_log(r"ERROR jobscheduler\.daemon:   (.*)$").group(1)
    assert problem.startswith(f"{proc.config}:{bad_line}, job 'broken', key 'colour': ")
    assert "Traceback" not in proc.log

    # still alive, still running both jobs of the old configuration
    assert proc.process.poll() is None
    ticked, tocked = len(lines(ticks)), len(lines(tocks))
    wait_until(
        lambda: len(lines(ticks)) > ticked and len(lines(tocks)) > tocked,
        "both jobs to run again",
    )
    assert "broken" not in proc.log.split("reload refused")[0]

    # a missing file is not an empty one: the jobs stay
    proc.config.rename(tmp_path / "moved.yaml")
    proc.signal(signal.SIGHUP)
    proc.wait_log(rf"reload refused, keeping the previous configuration: {proc.config}: no such")
    ticked = len(lines(ticks))
    wait_until(lambda: len(lines(ticks)) > ticked, "the job to run on")
    proc.signal(signal.SIGINT)
    assert proc.wait_exit() == 0


def test_sighup_after_an_edit_from_the_command_line(
    daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    tocks = tmp_path / "tocks.txt"
    proc = daemon("jobs:\n" + every_second("tick", "echo tick >> ticks.txt"))
    proc.wait_log(r"jobscheduler running: 1 jobs")
    settings = [
        "command=[sh, -c, echo tock >> tocks.txt]",
        f"cwd={tmp_path}",
        "start=2024-01-01",
        "interval=1 second",
    ]
    edit = subprocess.run(
        [sys.executable, "-m", "jobscheduler", "add", str(proc.config), "tock", *settings],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (edit.returncode, edit.stdout) == (0, "added tock\n"), edit.stderr
    proc.signal(signal.SIGHUP)
    proc.wait_log(r"configuration reloaded: 2 jobs")
    wait_until(tocks.exists, "the job added from the command line to run")
    proc.signal(signal.SIGTERM)
    assert proc.wait_exit() == 0


def test_sigint_lets_the_running_job_finish_then_exits_0(
    daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    started, go, marker = tmp_path / "started", tmp_path / "go", tmp_path / "marker"
    # The job waits for the test's "go" (at most 20 s), then works a second more: it is
    # surely running when SIGINT comes, however slow the machine.
    script = (
        "echo $$ >> started; i=0; "
        "while [ ! -e go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; "
        "sleep 1; echo done >> marker"
    )
    proc = daemon("jobs:\n" + every_second("slow", script, max_instances="1"))
    wait_until(started.exists, "the job to start")
    proc.signal(signal.SIGINT)
    proc.wait_log(r"SIGINT: finishing 1 running jobs, starting nothing new")
    go.touch()
    assert proc.wait_exit() == 0
    # the run that was going when SIGINT came finished, and no other run started after it
    assert lines(marker) == ["done"]
    assert len(lines(started)) == 1
    assert re.search(r"audit: slow : .* : normal : SUCCESSFUL$", proc.log, re.MULTILINE)
    assert "stopping" not in proc.log
    assert proc.leftovers() == []


def _sleeper(daemon: Callable[..., Daemon], tmp_path: Path) -> tuple[Daemon, int]:
    pid_file = tmp_path / "pid"
    proc = daemon(
        "jobs:\n" + every_second("sleeper", "echo $$ > pid; exec sleep 30", max_instances="1")
    )
    wait_until(lambda: lines(pid_file), "the job to start")
    pid = int(lines(pid_file)[0])
    assert not gone(pid)
    return proc, pid


def test_second_sigint_kills_the_running_job(daemon: Callable[..., Daemon], tmp_path: Path) -> None:
    proc, pid = _sleeper(daemon, tmp_path)
    proc.signal(signal.SIGINT)
    proc.wait_log(r"SIGINT: finishing 1 running jobs")
    assert proc.process.poll() is None  # waiting for the sleep
    proc.signal(signal.SIGINT)
    assert proc.wait_exit() == 0
    assert gone(pid)
    assert proc.leftovers() == []
    log = proc.log
    assert "SIGINT: stopping 1 running jobs now" in log
    assert re.search(r"audit: sleeper : .* : abnormal : FAILED \(stopped\)$", log, re.MULTILINE)


def test_sigquit_kills_at_once(daemon: Callable[..., Daemon], tmp_path: Path) -> None:
    proc, pid = _sleeper(daemon, tmp_path)
    proc.signal(signal.SIGQUIT)
    assert proc.wait_exit() == 0
    assert gone(pid)
    assert proc.leftovers() == []
    log = proc.log
    assert "SIGQUIT: stopping 1 running jobs now" in log
    assert re.search(r"audit: sleeper : .* : abnormal : FAILED \(shutdown\)$", log, re.MULTILINE)


def test_bad_config_exits_2_with_one_line_per_problem(tmp_path: Path) -> None:
    config = tmp_path / "jobs.yaml"
    config.write_text("jobs:\n" + every_second("tick", "true", colour="blue"))
    done = subprocess.run(
        [sys.executable, "-m", "jobscheduler", "run", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"jobscheduler: {config}:6, job 'tick', key 'colour': unknown key 'colour' "
        "(known keys: description, type, command, shell, cwd, env, args, start, stop, "
        "interval, cron, calendar, timezone, dependence, on_demand, enabled, timeout, warn_after, "
        "kill_grace, max_instances, priority, output_limit, overlap, catch_up, "
        "catch_up_window, retry, pause_after_failures, host, messages, on_node_loss)"
    ]

    missing = subprocess.run(
        [sys.executable, "-m", "jobscheduler", "run", str(tmp_path / "absent.yaml")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [
        f"jobscheduler: {tmp_path / 'absent.yaml'}: no such configuration file"
    ]


def test_log_file_option(daemon: Callable[..., Daemon], tmp_path: Path) -> None:
    log_file = tmp_path / "scheduler.log"
    proc = daemon(
        "jobs:\n" + every_second("tick", "echo tick >> ticks.txt"), "--log-file", str(log_file)
    )
    wait_until(lambda: "audit: tick" in (log_file.read_text() if log_file.exists() else ""), "")
    proc.signal(signal.SIGTERM)
    assert proc.wait_exit() == 0
    assert proc.log == ""  # nothing on stderr
    assert log_file.read_text().rstrip().endswith("jobscheduler stopped")


IGNORED = ["SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGIO", "SIGPWR", "SIGSTKFLT"]


def test_other_signals_are_logged_and_ignored(
    daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    """Signals that would end a default process at once (orphaning its jobs) are logged and
    ignored: the daemon and its running job go on."""
    proc, pid = _sleeper(daemon, tmp_path)
    sent = [*IGNORED, "SIGRTMIN", "SIGRTMIN+3", "SIGRTMAX"]
    for name in sent:
        if name.startswith("SIGRTMIN+"):
            signum = signal.SIGRTMIN + int(name.split("+")[1])
        else:
            signum = getattr(signal, name)
        proc.signal(signum)
        proc.wait_log(rf"WARNING jobscheduler\.daemon: {re.escape(name)} ignored")
        assert proc.process.poll() is None, f"{name} ended the daemon:\n{proc.log}"
    assert not gone(pid)  # the job runs on
    proc.signal(signal.SIGUSR1)  # and the daemon still answers
    proc.wait_log(r"status: running: 1$")
    proc.signal(signal.SIGTERM)
    # The second once the first is handled: two of one signal sent at once may reach the
    # process as one (the kernel keeps one pending signal of a kind).
    proc.wait_log(r"SIGTERM: finishing 1 running jobs")
    proc.signal(signal.SIGTERM)
    assert proc.wait_exit() == 0
    assert proc.leftovers() == []


@pytest.mark.parametrize("name", ["SIGXCPU", "SIGABRT", "SIGSYS", "SIGTRAP"])
def test_a_fatal_signal_logs_stops_the_jobs_and_exits_1(
    daemon: Callable[..., Daemon], tmp_path: Path, name: str
) -> None:
    proc, pid = _sleeper(daemon, tmp_path)
    proc.signal(getattr(signal, name))
    assert proc.wait_exit() == 1
    assert gone(pid)
    assert proc.leftovers() == []  # no orphaned job process
    log = proc.log
    assert f"ERROR jobscheduler.daemon: {name}: fatal signal, stopping 1 running jobs" in log
    assert re.search(r"audit: sleeper : .* : abnormal : FAILED \(shutdown\)$", log, re.MULTILINE)
    assert log.rstrip().endswith("jobscheduler stopped")


def test_sighup_on_an_emptied_file_keeps_the_jobs_unless_it_says_jobs_empty(
    daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    ticks = tmp_path / "ticks.txt"
    proc = daemon("jobs:\n" + every_second("tick", "echo tick >> ticks.txt"))
    wait_until(lambda: lines(ticks), "a tick")
    # The refusal's reason is its own line, written after "reload refused": wait for it.
    # (The daemon's watch of its file may refuse the edit before the signal does.)
    refusal = "defines no job, and a reload would drop all 1"
    for emptied in ("", "# nothing here yet\n", "jobs:\n", "email:\n"):
        proc.config.write_text(emptied)
        before = proc.log.count(refusal)
        proc.signal(signal.SIGHUP)
        wait_until(lambda n=before: proc.log.count(refusal) > n, "the refusal")
        ticked = len(lines(ticks))
        wait_until(lambda n=ticked: len(lines(ticks)) > n, "the job to run on")
    assert "configuration reloaded" not in proc.log
    proc.config.write_text("jobs: {}\n")
    proc.signal(signal.SIGHUP)
    proc.wait_log(
        r"WARNING jobscheduler\.config: .* says `jobs: \{\}`: the reload drops all 1 jobs"
    )
    proc.wait_log(r"configuration reloaded: 0 jobs")
    proc.signal(signal.SIGTERM)
    assert proc.wait_exit() == 0


def test_sigquit_does_not_wait_for_an_internal_job_that_ignores_stop(
    daemon: Callable[..., Daemon], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tests_dir = str(Path(__file__).resolve().parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([tests_dir, os.environ.get("PYTHONPATH", "")]))
    started = tmp_path / "started.txt"
    proc = daemon(
        "jobs:\n  stubborn:\n    type: internal\n    command: jobs_for_tests:IgnoresStop\n"
        f"    args: {{started_file: '{started}'}}\n"
        "    start: 2024-01-01 00:00:00\n    interval: 1 second\n    max_instances: 1\n"
        "    kill_grace: 300ms\n"
    )
    proc.wait_log(r"jobscheduler running: 1 jobs")
    # A run is under way (its run() waits up to 30 s, whatever stop says).
    wait_until(started.exists, "a run to start")
    began = time.monotonic()
    proc.signal(signal.SIGQUIT)
    assert proc.wait_exit() == 0
    took = time.monotonic() - began
    assert took < 5, f"the daemon took {took:.1f} s to exit"
    assert re.search(r"audit: stubborn : .* : abnormal : FAILED \(did not stop\)$", proc.log, re.M)
