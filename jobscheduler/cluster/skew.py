"""`ClockSkew`: this node's clock against the database's, measured at every heartbeat.

A node decides on its own clock when a slot is due; leases are measured on the database's.
A node 30 s ahead runs every slot it claims 30 s early, and claims the slots before the nodes
whose clocks are right. So every heartbeat reads the database's clock (`Beat.clock`, in the
same statement) and the node compares it with the middle of the heartbeat's round trip:
``skew = (sent + (received - sent) / 2) - database``, positive when the node is ahead. The
round trip bounds the error (half of it either way); a decision is taken only on what the
error cannot explain.

- Past `WARN_AFTER` (1 s): one WARNING; one more when it is back within.
- Past `LIMIT` (5 s): the node stops claiming *scheduled* slots (one ERROR) until its clock
  is back within the limit (one WARNING); the slots it leaves are run by the other nodes, or
  recorded ``missed`` (see `outage`). Why 5 s: well past what NTP leaves (milliseconds) or a
  slow round trip explains, and below what a slot's lateness is noticed at (a 1-second job
  runs 5 slots off at most); a larger skew is a broken clock, not drift. On-demand runs
  (``run_now``, submitted, dependences, retries, reruns) still run: when they run is asked
  by someone, not read from the node's clock.
- Not measured where the database's clock is this machine's own (SQLite: `Beat.clock` is
  None) or the store lives in this process (memory): nodes there share one clock.
"""

from __future__ import annotations

import logging
from datetime import datetime

from ..clock import SKEW_LIMIT, SKEW_WARN_AFTER

__all__ = ["LIMIT", "WARN_AFTER", "ClockSkew"]

log = logging.getLogger("jobscheduler.node")

# The bounds live with the clock seam, so that what only shows a node's skew (`status`, the
# page) reads them without loading this layer.
WARN_AFTER = SKEW_WARN_AFTER
LIMIT = SKEW_LIMIT


class ClockSkew:
    """The skew of node `node`'s clock (see the module notes). Written by the heartbeat's
    thread only; read from any."""

    def __init__(self, node: str, *, limit: float = LIMIT, warn_after: float = WARN_AFTER) -> None:
        if not 0 < warn_after <= limit:
            raise ValueError(f"clock skew: need 0 < warn_after <= limit, not {warn_after}, {limit}")
        self._node = node
        self.limit = limit
        self.warn_after = warn_after
        self.seconds: float | None = None  # as last measured; None: never
        self.error = 0.0  # half the round trip of that measurement
        self.warned = False  # past `warn_after`, not back within yet
        self.blocked = False  # past `limit`: no scheduled slot is claimed

    @property
    def cause(self) -> str:
        """Why a slot was not claimed while the clock was past the limit (its missed record's
        reason)."""
        return f"this node's clock was off the database's by more than {self.limit:g}s"

    def measured(self, sent: datetime, received: datetime, database: datetime | None) -> None:
        """A heartbeat sent at `sent` and answered at `received` (this node's clock) read the
        database's clock `database` (None: nothing to measure)."""
        if database is None:
            return
        half = (received - sent) / 2
        skew = (sent + half - database).total_seconds()
        error = abs(half.total_seconds())
        self.seconds, self.error = skew, error
        low, high = abs(skew) - error, abs(skew) + error  # what the skew surely is within
        way = "ahead of" if skew > 0 else "behind"
        if not self.warned and low > self.warn_after:
            self.warned = True
            log.warning(
                "node %s: its clock is %.1fs %s the database's (more than %gs)",
                self._node,
                abs(skew),
                way,
                self.warn_after,
            )
        if not self.blocked and low > self.limit:
            self.blocked = True
            log.error(
                "node %s: its clock is %.1fs %s the database's, past the limit of %gs: it "
                "claims no scheduled slot until its clock is back within (fix its time sync)",
                self._node,
                abs(skew),
                way,
                self.limit,
            )
        if self.blocked and high <= self.limit:
            self.blocked = False
            log.warning(
                "node %s: its clock is back within %gs of the database's (%+.1fs): claiming "
                "scheduled slots again",
                self._node,
                self.limit,
                skew,
            )
        if self.warned and high <= self.warn_after:
            self.warned = False
            log.warning(
                "node %s: its clock is back within %gs of the database's (%+.1fs)",
                self._node,
                self.warn_after,
                skew,
            )
