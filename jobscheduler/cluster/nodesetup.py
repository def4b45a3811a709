"""Where a scheduler keeps its state when not told (`default_state`), and its `NodeKeeper`
made from the `Scheduler`'s keywords (`make_keeper`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path

from ..clock import Clock
from ..engine.processor import JobProcessor
from ..model.execution import Execution
from ..model.job import Job
from ..state.base import StateStore
from .node import DEFAULT_LEASE, NodeKeeper, Retention

__all__ = ["ENV", "default_state", "make_keeper", "state_file"]

ENV = "JOBSCHEDULER_STATE"


def state_file(config_path: str | Path) -> Path:
    """The SQLite file beside a config file: ``jobs.yaml`` → ``jobs.state.db``."""
    path = Path(config_path).expanduser()
    return path.with_name(f"{path.stem}.state.db")


def default_state(
    state: str | StateStore | None, config_path: str | Path | None
) -> str | StateStore | None:
    """`state` if given; else ``$JOBSCHEDULER_STATE`` if set (and not empty); else, with a
    config file, ``sqlite:///`` the file `state_file` names (absolute); else None (memory)."""
    if state is not None:
        return state
    env = os.environ.get(ENV, "").strip()
    if env:
        return env
    if config_path is None:
        return None
    return f"sqlite:///{state_file(config_path).absolute()}"


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
) -> NodeKeeper:
    """The `NodeKeeper` of a scheduler; `lease` in seconds or a timedelta (None: 15 s)."""
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
    )
