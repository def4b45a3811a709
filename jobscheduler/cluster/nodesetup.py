"""Where a scheduler keeps its state when not told (`default_state`), and its `NodeKeeper`
made from the `Scheduler`'s keywords (`make_keeper`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path

from ..clock import Clock
from ..engine.processor import JobProcessor
from ..model.execution import Execution
from ..model.job import Job
from ..state.base import StateStore
from ..state.urls import ENV_STATE as ENV
from ..state.urls import default_state_url, state_file
from .node import DEFAULT_LEASE, NodeKeeper, Retention

__all__ = ["ENV", "default_state", "make_keeper", "state_file"]


def default_state(
    state: str | StateStore | None, config_path: str | Path | None
) -> str | StateStore | None:
    """A `StateStore` given as it is; else the URL `state.urls.default_state_url` decides."""
    if state is not None and not isinstance(state, str):
        return state
    return default_state_url(config_path, state)


def make_keeper(
    store: StateStore,
    processor: JobProcessor,
    *,
    name: str,
    clock: Clock,
    jobs: Callable[[], Mapping[str, Job]],
    report: Callable[[Job, Execution], None],
    lease: timedelta | float | None,
    retention: Retention | None,
    max_workers: int,
    compare: bool = True,
) -> NodeKeeper:
    """The `NodeKeeper` of a scheduler; `lease` in seconds or a timedelta (None: 15 s);
    `compare` False: no other node can see the store (no digest of the definitions)."""
    if lease is None:
        lease = DEFAULT_LEASE
    elif not isinstance(lease, timedelta):
        lease = timedelta(seconds=lease)
    return NodeKeeper(
        store,
        processor,
        name=name,
        clock=clock,
        jobs=jobs,
        report=report,
        lease=lease,
        retention=retention,
        max_workers=max_workers,
        compare=compare,
    )
