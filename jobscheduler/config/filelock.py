"""The lock every writer of a configuration file takes: on the file its path resolves to.

A writer reaching the file through a symbolic link and one using its real path must exclude
each other: the lock (``<resolved file>.lock``) and the temporary files of a write therefore
sit beside the resolved file, never beside the link.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from ..errors import ConfigFileError, Problem

__all__ = ["exclusive"]


@contextlib.contextmanager
def exclusive(config: Path) -> Iterator[Path]:
    """Lock the file `config` resolves to and yield that resolved path.

    The lock is ``<resolved file>.lock``, beside the real file: a writer reaching it through a
    symbolic link and one using its real path take the same lock. The link is resolved again
    at each write (so a re-pointed link is followed) and once more after the lock is held: if
    it was re-pointed while we waited, the lock is on the wrong file, so take the new one.
    """
    while True:
        target = Path(os.path.realpath(config))
        lock_path = Path(f"{target}.lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise ConfigFileError(
                Problem(
                    f"cannot open the lock file {str(lock_path)!r}: {exc.strerror}", str(config)
                )
            ) from None
        try:
            # flock, not lockf: flock locks belong to the open file, so two threads of one
            # process exclude each other too.
            fcntl.flock(fd, fcntl.LOCK_EX)
            if Path(os.path.realpath(config)) != target:
                continue  # re-pointed meanwhile (the finally releases this lock)
            yield target
            return
        finally:
            os.close(fd)  # releases the lock
