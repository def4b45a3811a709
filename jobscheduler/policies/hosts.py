"""The `host` policy: runs pinned to the nodes whose name or host name matches a pattern.

A node whose name and host name both fail the job's `fnmatch` pattern does not claim the
job's runs (its claim says no, as if another node had the run). If no live node matches
(the store's `nodes`: up, with a heartbeat within the lease; this node counts as live),
the run is recorded NOT_STARTED with reason "no node for host PATTERN" once its slot (or,
outside the schedule, its due time) is a lease period late: before that, the node asks
again at that time (a one-off start of the same slot), so a matching node that comes up
meanwhile takes it. The record is keyed like a claim of the run, so of several nodes
only one writes it.
"""

from __future__ import annotations

import logging
import socket
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Final

from ..state.base import StateStore

__all__ = ["DEFAULT_LEASE", "RECHECK", "Hosts", "no_node_reason"]

log = logging.getLogger("jobscheduler")

DEFAULT_LEASE: Final = timedelta(seconds=30)
RECHECK: Final = "host_recheck"  # the one-off start that asks again (its run keeps its trigger)


def no_node_reason(pattern: str) -> str:
    return f"no node for host {pattern}"


class Hosts:
    """Whether this node runs a host-pinned job, and whether any live node could."""

    def __init__(self, store: StateStore, node: str, *, lease: timedelta = DEFAULT_LEASE) -> None:
        self._store = store
        self.node = node
        self.hostname = socket.gethostname()
        self.lease = lease
        self._matches: dict[str, bool] = {}  # pattern -> matches this node

    def here(self, pattern: str) -> bool:
        """Whether this node (its name or its host name) matches `pattern`."""
        hit = self._matches.get(pattern)
        if hit is None:
            hit = fnmatchcase(self.node, pattern) or fnmatchcase(self.hostname, pattern)
            self._matches[pattern] = hit
        return hit

    def anywhere(self, pattern: str) -> bool:
        """Whether a live node sharing the store matches `pattern` (a store that fails:
        assumed yes, so a run is not refused for the store's sake)."""
        try:
            now = self._store.now()
            nodes = self._store.nodes()
        except Exception:
            log.exception("reading the nodes from the state store failed")
            return True
        for info in nodes:
            if info.state != "up" or info.name == self.node:
                continue
            if info.heartbeat is not None and now - info.heartbeat > self.lease:
                continue
            if fnmatchcase(info.name, pattern) or fnmatchcase(info.host, pattern):
                return True
        return False

    def late(self, due: datetime, now: datetime) -> bool:
        """Whether a run due at `due` is a lease period late at `now`."""
        return now - due >= self.lease
