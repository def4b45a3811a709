"""Small internal jobs, used by ``sample_config.yaml`` and as models for your own.

An internal job is named ``package.module:Class`` in a job's ``command``; it is created with the
job's ``args`` as keyword arguments and its ``run()`` is called in a worker thread. A plain
`Schedulable` has ``run()`` and ``stop()``; a `ScheduledEnable` also has ``is_done()``,
``running_status`` (``"successful"``, ``"failed"`` or a short failure reason) and
``message_data`` (extra values for alert templates). See `jobscheduler.protocols`. Everything
must be safe to call from another thread while ``run()`` works.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import threading
from pathlib import Path
from typing import Any

__all__ = ["Report", "Touch"]


class Report:
    """Counts the files matching `pattern` under `directory` (a ScheduledEnable).

    Its `running_status` is ``"successful"``, with ``files`` and ``bytes`` in `message_data`;
    or the reason it failed (also in ``message_data["error"]``): the directory cannot be read,
    more than `max_files` files were found, or ``stop()`` ended the scan early ("stopped").
    None until the run is done.
    """

    def __init__(
        self,
        directory: str = ".",
        pattern: str = "*",
        max_files: int | None = None,
        title: str = "Report",
    ) -> None:
        self.directory = Path(directory).expanduser()
        self.pattern = pattern
        self.max_files = max_files
        self.title = title
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._done = False
        self._status: str | None = None
        self._data: dict[str, Any] = {"title": title, "directory": str(self.directory)}

    def run(self) -> None:
        files = 0
        size = 0
        data: dict[str, Any] = {}
        try:
            if not self.directory.is_dir():
                raise FileNotFoundError(f"{self.directory} is not a directory")
            for root, _dirs, names in os.walk(self.directory):
                if self._stopped.is_set():
                    data["error"] = "stopped"
                    break
                for name in fnmatch.filter(names, self.pattern):
                    files += 1
                    with contextlib.suppress(OSError):  # vanished while counting
                        size += os.stat(os.path.join(root, name)).st_size
            if self.max_files is not None and files > self.max_files and "error" not in data:
                data["error"] = f"{files} files, more than {self.max_files}"
        except OSError as exc:
            data["error"] = str(exc)
        with self._lock:
            self._data.update(data, files=files, bytes=size)
            self._status = data.get("error", "successful")
            self._done = True

    def stop(self) -> None:
        self._stopped.set()

    def is_done(self) -> bool:
        with self._lock:
            return self._done

    @property
    def running_status(self) -> str | None:
        with self._lock:
            return self._status

    @property
    def message_data(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._data)


class Touch:
    """Creates `path` or updates its modification time (a plain Schedulable): a heartbeat
    file that monitoring can watch. Fails (raises) when the directory does not exist."""

    def __init__(self, path: str) -> None:
        self.path = Path(path).expanduser()

    def run(self) -> None:
        self.path.touch()

    def stop(self) -> None:
        """Nothing to stop: touching a file is instantaneous."""
