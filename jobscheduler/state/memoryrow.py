"""`Row`: how the memory store keeps one run — a slotted object rather than a dict."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from operator import attrgetter
from typing import Any

from .records import RunRecord, RunState

__all__ = ["FIELDS", "Row"]

# `RunRecord`'s fields, in its order (tests/test_state_memory.py checks that they agree).
FIELDS = (
    "run_id",
    "job",
    "slot",
    "trigger",
    "attempt",
    "node",
    "state",
    "started",
    "ended",
    "exit_code",
    "reason",
    "output_tail",
    "last_slot",
)

_values = attrgetter(*FIELDS)
_RUNNING = RunState.RUNNING


class Row:
    """One kept run: the fields of its `RunRecord`, changed in place when it finishes.

    A store writes one when a run is claimed and changes it when the run ends, for every run,
    so it is kept small and cheap: 13 slots (136 bytes) where a dict of the same fields takes
    464, made in one call. The values are the store's to check (they are as `record_values`
    makes them). For code that treats a run as a mapping it also reads and writes by field
    name (``row["state"]``, ``row["ended"] = ...``, ``dict(row)``).
    """

    __slots__ = (
        "attempt",
        "ended",
        "exit_code",
        "job",
        "last_slot",
        "node",
        "output_tail",
        "reason",
        "run_id",
        "slot",
        "started",
        "state",
        "trigger",
    )

    run_id: str
    job: str
    slot: datetime | None
    trigger: str
    attempt: int
    node: str
    state: RunState
    started: datetime
    ended: datetime | None
    exit_code: int | None
    reason: str | None
    output_tail: str
    last_slot: datetime | None

    def __init__(
        self,
        run_id: str,
        job: str,
        slot: datetime | None,
        trigger: str,
        attempt: int,
        node: str,
        started: datetime,
    ) -> None:
        """A running run, as a claim writes it."""
        self.run_id = run_id
        self.job = job
        self.slot = slot
        self.trigger = trigger
        self.attempt = attempt
        self.node = node
        self.state = _RUNNING
        self.started = started
        self.ended = None
        self.exit_code = None
        self.reason = None
        self.output_tail = ""
        self.last_slot = None

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Row:
        """A row of `values` (every field, as `record_values` returns them)."""
        row = cls(
            values["run_id"],
            values["job"],
            values["slot"],
            values["trigger"],
            values["attempt"],
            values["node"],
            values["started"],
        )
        row.state = values["state"]
        row.ended = values["ended"]
        row.exit_code = values["exit_code"]
        row.reason = values["reason"]
        row.output_tail = values["output_tail"]
        row.last_slot = values["last_slot"]
        return row

    def finish(
        self,
        state: RunState,
        ended: datetime,
        exit_code: int | None,
        reason: str | None,
        output_tail: str,
        started: datetime | None = None,
    ) -> None:
        """The run ended (changed in place: the row keeps its place in the write order);
        `started` replaces the claim's start when given."""
        self.state = state
        if started is not None:
            self.started = started
        self.ended = ended
        self.exit_code = exit_code
        self.reason = reason
        self.output_tail = output_tail

    def set_output(self, output: str) -> None:
        """The output so far of the running run (its live output), replacing the last."""
        self.output_tail = output

    def record(self) -> RunRecord:
        """Its `RunRecord`: a copy, which later changes to the row do not reach."""
        return RunRecord._of(dict(zip(FIELDS, _values(self), strict=True)))

    def keys(self) -> tuple[str, ...]:
        return FIELDS

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def __setitem__(self, name: str, value: Any) -> None:
        setattr(self, name, value)

    def __repr__(self) -> str:
        return f"Row({', '.join(f'{n}={v!r}' for n, v in zip(FIELDS, _values(self), strict=True))})"
