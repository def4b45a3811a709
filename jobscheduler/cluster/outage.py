"""`StoreOutage`: whether the state store is away for this node, told in the log twice per
outage (once when it goes, once when it is back), and the scheduled slots this node did not
claim meanwhile, to be recorded ``missed``.

Every part of the node that calls the store (heartbeats, claims, records of runs, the
processes of external runs, the live nodes) hands a failure of the store (`StoreError`) to
`failed` instead of logging it: a 20-s outage under 200 jobs a second would otherwise write a
traceback per call. What is not a store failure (a bug) is still logged by its caller.

- **Away**: the first failure logs one WARNING. From then on scheduled slots are not
  claimed (`StoreClaims` drops them, noting them here: `unclaimed`); runs whose records could
  not be written are counted (`unrecorded`).
- **Back**: only when a write has really succeeded: `NodeKeeper` calls `back` after a
  heartbeat that got through *and* the ``missed`` records of the noted slots were written
  (inserts, not the heartbeat's update of one row alone: a full disk lets SQLite rewrite a
  row in place and still refuse new ones). It logs one WARNING with the counts.

The noted slots are kept per job and cause as their first and last (not one by one: an
outage of an hour under 200 jobs a second would otherwise hold 720,000); the ``missed``
records cover the job's slots between them that no node recorded (`nodemarks.record_gaps`).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from ..clock import Clock
from ..state.base import StoreError

__all__ = ["UNREACHABLE", "StoreOutage", "is_store_failure"]

log = logging.getLogger("jobscheduler.node")

UNREACHABLE = "the state store was unreachable"
"""The cause of the slots not claimed while the store was away (the missed records' reason)."""


def is_store_failure(exc: BaseException) -> bool:
    """Whether `exc` is the store failing (unreachable, locked, full, read-only) rather than
    a bug of the caller's: only those are an outage's."""
    return isinstance(exc, StoreError)


class StoreOutage:
    """The state store's outages as node `node` sees them (see the module notes).
    Thread-safe."""

    def __init__(self, node: str, clock: Clock) -> None:
        self._node = node
        self._clock = clock
        self._lock = threading.Lock()
        self._since: datetime | None = None  # when the current outage began (None: up)
        self._failures = 0  # store calls failed during the current outage
        self._unrecorded = 0  # runs whose records could not be written during it
        # Slots not claimed, by (job, cause): the first and the last.
        self._slots: dict[tuple[str, str], tuple[datetime, datetime]] = {}
        self.outages = 0  # outages seen since the node started (for tests and status)

    @property
    def away(self) -> bool:
        """Whether the store is away (a call failed since the last `back`)."""
        return self._since is not None

    @property
    def since(self) -> datetime | None:
        """When the current outage began; None while the store is up."""
        return self._since

    def failed(self, exc: BaseException, doing: str) -> None:
        """A store call (`doing`: what it was for) failed with `exc`: the first failure of an
        outage is logged (one WARNING), the others at DEBUG only."""
        with self._lock:
            self._failures += 1
            first = self._since is None
            if first:
                self._since = self._clock.now()
                self.outages += 1
        if first:
            log.warning(
                "node %s: state store unreachable (%s: %s): scheduled slots are not claimed "
                "until it is back, then recorded missed; this is logged once per outage",
                self._node,
                doing,
                exc,
            )
        else:
            log.debug("node %s: state store still unreachable (%s: %s)", self._node, doing, exc)

    def unrecorded(self) -> None:
        """A run's record could not be written (the store failed: see `failed`)."""
        with self._lock:
            self._unrecorded += 1

    def unclaimed(self, job: str, slot: datetime, cause: str = UNREACHABLE) -> None:
        """Scheduled `slot` of `job` was not claimed here because of `cause`: it is to be
        recorded missed unless some node records it."""
        key = (job, cause)
        with self._lock:
            span = self._slots.get(key)
            if span is None:
                self._slots[key] = (slot, slot)
            else:
                self._slots[key] = (min(span[0], slot), max(span[1], slot))

    @property
    def noted(self) -> bool:
        """Whether slots are noted (not recorded yet)."""
        return bool(self._slots)

    def take_slots(
        self, until: datetime, cause: str
    ) -> dict[tuple[str, str], tuple[datetime, datetime]]:
        """The slots of `cause` noted up to `until` (included), by (job, cause): (first,
        last), taken out; later ones stay noted. Hand them back with `keep` if writing them
        failed."""
        taken: dict[tuple[str, str], tuple[datetime, datetime]] = {}
        with self._lock:
            for key, (first, last) in list(self._slots.items()):
                if key[1] != cause or first > until:
                    continue
                if last <= until:
                    del self._slots[key]
                    taken[key] = (first, last)
                else:  # the later part stays: it is recorded at a later beat
                    taken[key] = (first, until)
                    self._slots[key] = (until, last)
        return taken

    def keep(self, slots: dict[tuple[str, str], tuple[datetime, datetime]]) -> None:
        """Note again the slots `take_slots` gave (their records could not be written)."""
        for (job, cause), (first, last) in slots.items():
            self.unclaimed(job, first, cause)
            self.unclaimed(job, last, cause)

    def back(self, missed: int, jobs: int) -> None:
        """A write got through after an outage, and `missed` slots of `jobs` jobs were
        recorded missed: one WARNING with what the outage cost. Nothing when not away."""
        with self._lock:
            since, self._since = self._since, None
            failures, self._failures = self._failures, 0
            unrecorded, self._unrecorded = self._unrecorded, 0
        if since is None:
            return
        lasted = (self._clock.now() - since).total_seconds()
        log.warning(
            "node %s: state store back after %.1fs (%d calls failed): %d runs could not be "
            "recorded meanwhile; %d slots of %d jobs not claimed, recorded missed",
            self._node,
            lasted,
            failures,
            unrecorded,
            missed,
            jobs,
        )
