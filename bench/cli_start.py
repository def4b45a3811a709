"""The command line's cold start: ``--version``, ``--help``, ``validate`` of a 10-job file
and ``status`` against a live daemon, against two floors measured in the same run.

Each repetition starts every command once as a fresh process (the order rotating from one
repetition to the next, so that a drift of the machine favours none), timed from the start of
the process to its exit by this parent. The floors: ``python -c pass`` (the interpreter alone)
and ``systemctl --version`` (a native tool, when installed). Reported: the median and range
of each, and the median's ratio to each floor. ``status`` reads the SQLite store of a daemon
(``jobscheduler run``) started for the run and stopped at its end.

The commands run as an installed tool runs: with their modules' bytecode cached (in a
private ``PYTHONPYCACHEPREFIX``, written by one untimed run of each command first), whatever
the caller's ``PYTHONDONTWRITEBYTECODE`` (with it, every start would compile every module of
the checkout). Also reported, for each command, what a loaded machine blurs less than the
wall clock: the CPU time (user + system) its process used (median), the modules it imports
and the sum of their own import times (``-X importtime``; the least of 3 runs).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import os
import resource
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


def _env(pycache: Path) -> dict[str, str]:
    """The commands' environment: this checkout first on the path, bytecode cached in
    `pycache`."""
    path = os.environ.get("PYTHONPATH")
    repo = str(common.REPO)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = f"{repo}{os.pathsep}{path}" if path else repo
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def _start_daemon(config: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    daemon = subprocess.Popen(
        [sys.executable, "-m", "jobscheduler", "run", str(config), "--log-level", "WARNING"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=config.parent,
    )
    deadline = time.monotonic() + 60
    while True:
        done = subprocess.run(
            [sys.executable, "-m", "jobscheduler", "status", str(config), "--json"],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode == 0 and '"up"' in done.stdout:
            return daemon
        if time.monotonic() > deadline or daemon.poll() is not None:
            daemon.kill()
            raise RuntimeError(f"the daemon did not come up: {done.stderr}")
        time.sleep(0.2)


def _time(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """The wall-clock time of `command` and the CPU time (user + system) it used, in s."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    begin = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True)
    took = time.perf_counter() - begin
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - used.ru_utime) + (after.ru_stime - used.ru_stime)
    return took, cpu


def _imports(command: list[str], env: dict[str, str], runs: int = 3) -> tuple[int, float]:
    """The modules `command` imports and the sum of their own import times (ms; the least
    of `runs` runs with ``-X importtime``)."""
    counts, sums = [], []
    for _ in range(runs):
        done = subprocess.run(
            [command[0], "-X", "importtime", *command[1:]], env=env, capture_output=True, text=True
        )
        selves = [
            int(line.split("|")[0].split(":")[1])
            for line in done.stderr.splitlines()
            if line.startswith("import time:") and "self [us]" not in line
        ]
        counts.append(len(selves))
        sums.append(sum(selves) / 1000.0)
    return max(counts), min(sums)


def main(argv: list[str] | None = None) -> int:
    opts = common.options(__doc__ or NAME, argv)
    reps = 3 if opts.smoke else max(opts.reps, 21)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        config = _config(Path(tmp))
        commands = _commands(config)
        env = _env(Path(tmp) / "pycache")
        daemon = _start_daemon(config, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu_times: dict[str, list[float]] = {name: [] for name in commands}
        try:
            for command in commands.values():  # untimed: writes the bytecode cache
                _time(command, env)
            imports = {name: _imports(command, env) for name, command in commands.items()}
            names = list(commands)
            for rep in range(reps):
                shift = rep % len(names)
                for name in names[shift:] + names[:shift]:
                    took, cpu = _time(commands[name], env)
                    times[name].append(took * 1000.0)
                    cpu_times[name].append(cpu * 1000.0)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
    stats = {name: common.stat(values) for name, values in times.items()}
    cpu = {name: common.stat(values).median for name, values in cpu_times.items()}
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
                common.num(cpu[name], 1),
                common.times(common.ratio(cpu[name], cpu["python -c pass"])),
                str(imports[name][0]),
                common.num(imports[name][1], 1),
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
        [
            "command",
            "ms (median, range)",
            "x python -c pass",
            "x systemctl --version",
            "CPU ms",
            "CPU x python",
            "modules",
            "import ms",
        ],
        rows,
        {
            "cases": {
                name: {
                    "ms": s.median,
                    "values": s.values,
                    "cpu_ms": cpu[name],
                    "modules": imports[name][0],
                    "import_ms": imports[name][1],
                }
                for name, s in stats.items()
            },
            "load_average": os.getloadavg(),
        },
        targets,
        [f"{reps} repetitions, each command a fresh process; validate and status: {JOBS} jobs"],
        started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
