"""The name of this scheduler process (its *node*), as runs and the state store see it."""

from __future__ import annotations

import os
import socket

__all__ = ["check_node_name", "default_node_name"]


def default_node_name() -> str:
    """``HOSTNAME-PID``: this machine's host name and this process's id, unique per live
    process on one machine (``Scheduler(node=...)`` and ``jobscheduler run --node`` replace it).

    Read at each call, so a forked child gets its own pid.
    """
    return f"{socket.gethostname()}-{os.getpid()}"


def check_node_name(name: object) -> str:
    """`name` if it can name a node: a non-empty text, not only spaces, without control
    characters (it goes into commands' environment and the logs); ValueError otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a node name must be a non-empty text, not {name!r}")
    if any(ord(char) < 32 or ord(char) == 127 for char in name):
        raise ValueError(f"a node name must not hold control characters: {name!r}")
    return name
