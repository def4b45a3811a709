"""The data the page and the API show, from a live `Scheduler` and its state store.

`LastResults` keeps each job's last outcome: read from the store's newest records when the
server starts, then kept up to date by every finished run (`observe`), so the page never asks
the store once per job (a page of 10,000 jobs stays one pass over the definitions).
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from ...model.event import Event
from ...model.execution import Execution
from ...scheduler import Scheduler
from .. import opsdata
from .actions import HttpError

__all__ = ["PER_PAGE", "LastResults", "job_data", "job_row", "job_rows", "status_data"]

NEXT_RUNS = 10  # the next runs the page and /api/status show
PER_PAGE = 200  # jobs on one page of the status page (the API's /api/jobs pages alike)
_SEED = 5_000  # newest records read at start to know each job's last result


def _outcome(execution: Execution) -> str:
    if execution.event is Event.SUCCESSFUL:
        return "succeeded"
    return "not_started" if execution.event is Event.NOT_STARTED else "failed"


class LastResults:
    """Each job's last result: (state, ended or started as ISO text, run id, reason)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, tuple[str, str | None, str, str | None]] = {}
        for record in reversed(scheduler.state_store.history(limit=_SEED)):
            if record.ended is not None:
                when = opsdata.iso(record.ended)
                self._last[record.job] = (str(record.state), when, record.run_id, record.reason)

    def observe(self, execution: Execution) -> None:
        when = opsdata.iso(execution.ended or execution.started)
        value = (_outcome(execution), when, execution.run_id, execution.reason)
        with self._lock:
            self._last[execution.job_name] = value

    def get(self, job: str) -> dict[str, Any] | None:
        with self._lock:
            value = self._last.get(job)
        if value is None:
            return None
        state, when, run_id, reason = value
        return {"state": state, "at": when, "run_id": run_id, "reason": reason}


def job_rows(
    scheduler: Scheduler, last: LastResults, *, page: int = 1, query: str = ""
) -> tuple[list[dict[str, Any]], int]:
    """One page of the jobs (definition order; `query`: names containing it), and how many
    jobs match in all."""
    names = (
        [n for n in scheduler.catalog.jobs if query in n] if query else list(scheduler.catalog.jobs)
    )
    start = (max(page, 1) - 1) * PER_PAGE
    rows = [job_row(scheduler, last, name) for name in names[start : start + PER_PAGE]]
    return rows, len(names)


def job_row(scheduler: Scheduler, last: LastResults, name: str) -> dict[str, Any]:
    """Defined job `name` as ``/api/jobs`` lists it."""
    job = scheduler.catalog.jobs[name]
    pause = scheduler.pause_of(name)
    return {
        "name": name,
        "schedule": opsdata.schedule_text(job),
        "enabled": job.enabled,
        "paused": None if pause is None else pause.as_dict(),
        "next_run": opsdata.iso(scheduler.next_run(name)),
        "last": last.get(name),
    }


def job_data(scheduler: Scheduler, last: LastResults, name: str, now: datetime) -> dict[str, Any]:
    """``/api/jobs/NAME``: the job's row (`job_row`), its running runs and the runs waiting
    for it (`opsdata.live_of_job`); `HttpError` 404 for a job this scheduler does not
    define."""
    if name not in scheduler.catalog.jobs:
        raise HttpError(404, f"no job named {name!r}")
    return {
        **job_row(scheduler, last, name),
        **opsdata.live_of_job(scheduler.state_store, name, now),
    }


def status_data(scheduler: Scheduler, now: datetime) -> dict[str, Any]:
    """`opsdata.status`, with the next runs as this scheduler knows them."""
    upcoming = scheduler.next_runs(NEXT_RUNS)
    data = opsdata.status(
        scheduler.state_store, scheduler.catalog, now, next_runs=upcoming, next_count=NEXT_RUNS
    )
    data["node"] = scheduler.node
    return data
