"""The node names of this process's schedulers: a default name taken by one of them is not
given to the next (`local_name`)."""

from __future__ import annotations

import threading

from ..model.node import check_node_name

__all__ = ["local_name", "names_joined", "names_left"]

_lock = threading.Lock()
_joined: set[str] = set()  # the names of this process's nodes now joined


def local_name(name: str | None, default: str) -> str:
    """The node name of a new scheduler: `name` if given (ValueError if it cannot name a
    node), else `default` (``HOSTNAME-PID``), or ``HOSTNAME-PID-2``, ``-3``, … while other
    schedulers of this same process are joined under the shorter ones."""
    if name is not None:
        return check_node_name(name)
    with _lock:
        chosen, n = default, 1
        while chosen in _joined:
            n += 1
            chosen = f"{default}-{n}"
        return chosen


def names_joined(name: str) -> None:
    with _lock:
        _joined.add(name)


def names_left(name: str) -> None:
    with _lock:
        _joined.discard(name)
