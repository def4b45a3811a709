"""`FileWatch`: tells the daemon when its configuration file changed, from a `stat` of it.

The daemon's main thread looks every `WATCH_POLL` seconds (one ``stat`` system call: no read
of the file, nothing asked of the state store). A file counts as changed when what ``stat``
says of it (device, inode, size, modification and change times, in nanoseconds) differs from
what it said when the definitions in force were read; ``stat`` follows symbolic links, so an
edit of the file a link leads to, or a link pointed elsewhere, is a change, and so is an
editor's write to a temporary file renamed over it (another inode). A change is taken up once
two looks in a row saw the same thing (so a file still being written is not read half-way):
the look after the one that first saw it comes `CONFIRM` seconds later, so a change is
taken up within ``WATCH_POLL + CONFIRM`` of the edit (0.6 s), plus the reload itself.

Each state of the file is taken up once: a reload refused (an edit that does not validate)
is not tried again, nor logged again, until the file changes once more.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CONFIRM", "WATCH_POLL", "FileWatch", "Signature", "signature"]

WATCH_POLL = 0.5
"""Seconds between two looks at the configuration file."""

CONFIRM = 0.1
"""Seconds from a look that saw a change to the look that confirms it (`FileWatch.settling`)."""

Signature = tuple[int, int, int, int, int]
"""(device, inode, size, mtime_ns, ctime_ns) of a file."""


def signature(path: Path) -> Signature | None:
    """What ``stat`` says of the file `path` leads to (links followed); None when there is
    none (missing, a dangling link, unreadable directory)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class FileWatch:
    """Changes of the file at `path` since the state last taken up (`taken`).

    `poll` is called every `WATCH_POLL` seconds; it returns the new signature once a change
    has been seen the same by two looks in a row, else None. A missing file (signature None)
    is a change too: the caller decides what it means (the daemon keeps its definitions)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._taken = signature(path)
        self._last_seen: Signature | None = self._taken
        self._seen_once = False  # `_last_seen` differs from `_taken` and was seen once

    @property
    def settling(self) -> bool:
        """Whether the last look saw a change not yet confirmed (look again after `CONFIRM`)."""
        return self._seen_once

    def taken(self, state: Signature | None) -> None:
        """The file in `state` was taken up (reloaded, or refused): not reported again."""
        self._taken = state
        self._last_seen = state
        self._seen_once = False

    def poll(self) -> tuple[bool, Signature | None]:
        """One look: (changed, its signature). `changed` is True once the file differs from
        what was taken up and two looks in a row saw the same signature."""
        now = signature(self.path)
        if now == self._taken:
            self._last_seen, self._seen_once = now, False
            return False, now
        if self._seen_once and now == self._last_seen:
            return True, now
        self._last_seen, self._seen_once = now, True
        return False, now
