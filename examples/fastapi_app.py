"""A FastAPI application with its jobs in the same process (docs/applications.md).

    JOBS_TOKEN=a-token-of-16-chars-or-more uvicorn examples.fastapi_app:app

The scheduler starts and stops with the application (``lifespan``); its status page, JSON
API and metrics are mounted at ``/jobs``; ``POST /reports/{day}`` asks for a report run.
Without ``JOBS_TOKEN`` the page is read-only.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime

from fastapi import FastAPI

from jobscheduler import Scheduler, current_run

# Definitions in memory (pass "jobs.yaml" to keep the file's jobs too); runs and the queue of
# submitted runs in a state store: "memory" here, a SQLite or PostgreSQL URL in production.
scheduler = Scheduler(state=os.environ.get("JOBS_STATE", "memory"), node="web")
beats: list[str] = []


@scheduler.job(interval="1 second")
async def heartbeat() -> None:
    """Runs every second, on the scheduler's event loop: it holds no thread while it waits."""
    await asyncio.sleep(0.01)
    beats.append(datetime.now(UTC).isoformat())


@scheduler.job(on_demand=True, timeout=60)
async def send_report(day: str = "today") -> None:
    run = current_run()
    await asyncio.sleep(0.05)  # stands for the real work: a query, an HTTP call, a mail
    print(f"report for {day} sent by run {run.run_id if run else '?'}", flush=True)


app = FastAPI(lifespan=scheduler.lifespan)
app.mount(
    "/jobs", scheduler.asgi_app(token_env="JOBS_TOKEN" if os.environ.get("JOBS_TOKEN") else None)
)


@app.get("/")
async def home() -> dict[str, object]:
    return {"heartbeats": len(beats), "jobs": [job.name for job in scheduler.jobs]}


@app.post("/reports/{day}", status_code=202)
async def report(day: str) -> dict[str, object]:
    return {"queue_id": send_report.submit(day=day)}
