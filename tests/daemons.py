"""``jobscheduler run`` daemons on one config file and one state store, for tests and benchmarks.

Each daemon is a real process (``python -m jobscheduler run``) logging to
``<directory>/<name>.log``. Used by the cluster tests and by ``bench/faults.py`` (which puts
tests/ on its path, as it does for ``pg_server``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from jobscheduler.state import StateStore, open_store

__all__ = ["REPO", "Daemons", "start_daemon"]

REPO = Path(__file__).resolve().parent.parent
WITHIN = 60.0  # seconds: reached only when something failed, even on a loaded machine


def start_daemon(
    config: Path,
    url: str,
    node: str,
    log_file: Path,
    *,
    options: tuple[str, ...] = (),
    host: str | None = None,
    code: Path = REPO,
    new_session: bool = False,
) -> subprocess.Popen[bytes]:
    """``jobscheduler run config --state url --node node --log-file log_file *options``, in
    the directory of `config`, on the checkout `code`; on host name `host` (in a UTS
    namespace of its own, ``unshare -u``) if given; in a session of its own if `new_session`
    (so that ``os.killpg`` reaches it and its jobs). Its output goes to its log file alone."""
    argv = [
        *(sys.executable, "-m", "jobscheduler", "run", str(config)),
        *("--state", url, "--node", node, "--log-file", str(log_file), *options),
    ]
    if host is not None:  # exec: the pid stays the daemon's, for SIGSTOP
        argv = ["unshare", "-u", "sh", "-c", f'hostname {host} && exec "$@"', "sh", *argv]
    return subprocess.Popen(
        argv,
        env={**os.environ, "PYTHONPATH": str(code)},
        cwd=config.parent,  # not the repository's: `-m` puts the cwd first on the path
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=new_session,
    )


class Daemons:
    """``jobscheduler run`` processes on one config and one store.

    `config` is the text of ``<directory>/jobs.yaml``; `code` the checkout the daemons run
    (this one by default; another gives a "before" to compare). Closing stops every daemon
    (frozen ones too) and closes the store.
    """

    def __init__(
        self, directory: Path, url: str, config: str, *, lease: float, code: Path = REPO
    ) -> None:
        self.directory = directory
        self.url = url
        self.lease = lease
        self.code = code
        self.config = directory / "jobs.yaml"
        self.config.write_text(config)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.store: StateStore = open_store(url)[0]

    def start(self, name: str, *, host: str | None = None, options: tuple[str, ...] = ()) -> None:
        """Start daemon `name` (on host name `host`, in a UTS namespace of its own, if given);
        `options` are further ``jobscheduler run`` options."""
        self.procs[name] = start_daemon(
            self.config,
            self.url,
            name,
            self.directory / f"{name}.log",
            options=("--lease", str(self.lease), *options),
            host=host,
            code=self.code,
        )

    def wait_up(self, *names: str) -> None:
        """Wait until the daemons `names` (the processes started last under those names) are
        up in the store."""

        def up() -> bool:
            nodes = {n.name: n for n in self.store.nodes() if n.state == "up"}
            return all(n in nodes and nodes[n].pid == self.procs[n].pid for n in names)

        self.wait_for(up, f"{', '.join(names)} up")

    def wait_for(self, check: Callable[[], object], what: str, within: float = WITHIN) -> None:
        """Return as soon as `check()` is true; AssertionError naming `what`, with the
        daemons' logs, after `within` s."""
        deadline = time.monotonic() + within
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}\n{self.logs()}")
            time.sleep(0.05)

    def log(self, name: str) -> str:
        """Daemon `name`'s log ('' before it wrote one)."""
        path = self.directory / f"{name}.log"
        return path.read_text() if path.exists() else ""

    def logs(self) -> str:
        """The end of every daemon's log."""
        return "\n".join(f"--- {n}\n{self.log(n)[-3000:]}" for n in self.procs)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.store.close()
