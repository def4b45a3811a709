"""The command line's cold start: ``--version``, ``--help``, ``validate`` of a 10-job file
and ``status`` against a live daemon, against two floors measured in the same run.

Each repetition starts every command once as a fresh process (the order rotating from one
repetition to the next, so that a drift of the machine favours none), timed from the start of
the process to its exit by this parent. The floors: ``python -c pass`` (the interpreter alone)
and ``systemctl --version`` (a native tool, when installed). Reported: the median and range
of each, and the median's ratio to each floor. ``status`` reads the SQLite store of a daemon
(``jobscheduler run``) started for the run and stopped at its end.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import os
import shutil
import signal
import subprocess
import tempfile
import time

from bench import _common as common

NAME = "cli_start"
JOBS = 10
TARGETS_MS = {"--help": 150.0, "validate": 150.0, "status": 300.0}


def _config(directory: Path) -> Path:
    lines = ["jobs:"]
    for i in range(JOBS):
        lines += [
            f"  job{i}:",
            f"    command: [sh, -c, 'echo {i}']",
            "    start: 2099-01-01 00:00:00",
            "    interval: 1 hour",
        ]
    path = directory / "jobs.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _commands(config: Path) -> dict[str, list[str]]:
    tool = [sys.executable, "-m", "jobscheduler"]
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "--version": [*tool, "--version"],
        "--help": [*tool, "--help"],
        "validate": [*tool, "validate", str(config)],
        "status": [*tool, "status", str(config)],
    }
    systemctl = shutil.which("systemctl")
    if systemctl:
        commands["systemctl --version"] = [systemctl, "--version"]
    return commands


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    repo = str(common.REPO)
    return {**os.environ, "PYTHONPATH": f"{repo}{os.pathsep}{path}" if path else repo}


def _start_daemon(config: Path) -> subprocess.Popen[bytes]:
    daemon = subprocess.Popen(
        [sys.executable, "-m", "jobscheduler", "run", str(config), "--log-level", "WARNING"],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=config.parent,
    )
    deadline = time.monotonic() + 60
    while True:
        done = subprocess.run(
            [sys.executable, "-m", "jobscheduler", "status", str(config), "--json"],
            env=_env(),
            capture_output=True,
            text=True,
        )
        if done.returncode == 0 and '"up"' in done.stdout:
            return daemon
        if time.monotonic() > deadline or daemon.poll() is not None:
            daemon.kill()
            raise RuntimeError(f"the daemon did not come up: {done.stderr}")
        time.sleep(0.2)


def _time(command: list[str]) -> float:
    begin = time.perf_counter()
    done = subprocess.run(command, env=_env(), capture_output=True)
    took = time.perf_counter() - begin
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.decode()[-2000:]}")
    return took


def main(argv: list[str] | None = None) -> int:
    opts = common.options(__doc__ or NAME, argv)
    reps = 3 if opts.smoke else max(opts.reps, 21)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        config = _config(Path(tmp))
        commands = _commands(config)
        daemon = _start_daemon(config)
        times: dict[str, list[float]] = {name: [] for name in commands}
        try:
            names = list(commands)
            for rep in range(reps):
                shift = rep % len(names)
                for name in names[shift:] + names[:shift]:
                    times[name].append(_time(commands[name]) * 1000.0)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
    stats = {name: common.stat(values) for name, values in times.items()}
    python = stats["python -c pass"].median
    native = stats["systemctl --version"].median if "systemctl --version" in stats else None
    rows = []
    for name, s in stats.items():
        rows.append(
            [
                name,
                common.span(s, 1),
                common.times(common.ratio(s.median, python)),
                "-" if native is None else common.times(common.ratio(s.median, native)),
            ]
        )
    targets = [
        common.Target(f"{name}, median", stats[name].median, "<=", limit, "ms")
        for name, limit in TARGETS_MS.items()
    ]
    common.report(
        NAME,
        opts,
        "The command line's cold start",
        ["command", "ms (median, range)", "x python -c pass", "x systemctl --version"],
        rows,
        {"cases": {name: {"ms": s.median, "values": s.values} for name, s in stats.items()}},
        targets,
        [f"{reps} repetitions, each command a fresh process; validate and status: {JOBS} jobs"],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
