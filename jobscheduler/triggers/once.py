"""`OnceTrigger`: one slot, at a given instant (a one-off job: `start` and no repeating
trigger, like ``at`` or APScheduler's date trigger)."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo

from .zones import localize

__all__ = ["OnceTrigger"]


class OnceTrigger:
    """The one slot `at` (aware): `next_after(t)` is `at` for any `t` before it, else None.

    A wall time that does not exist or is ambiguous was resolved when `at` was made aware
    (`zones.localize`: the gap's end; the first occurrence), as for any job's `start`."""

    __slots__ = ("_at_utc", "_zone", "at")

    def __init__(self, at: datetime, zone: tzinfo) -> None:
        if at.tzinfo is None:
            raise ValueError("OnceTrigger needs an aware instant")
        self.at = at
        self._zone = zone
        self._at_utc = at.astimezone(UTC)

    @property
    def zone(self) -> tzinfo:
        return self._zone

    def next_after(self, t: datetime) -> datetime | None:
        """`at` (in the zone) when `t` is before it; else None. A naive `t` is read in the
        zone."""
        if t.tzinfo is None:
            t = localize(t, self._zone)
        if t.astimezone(UTC) < self._at_utc:
            return self._at_utc.astimezone(self._zone)
        return None

    def __repr__(self) -> str:
        return f"OnceTrigger({self.at.isoformat()})"
