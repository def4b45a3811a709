"""``POST /api/jobs/{name}/backfill``: a backfill asked for over HTTP.

The body: ``{"from": T, "to": T, "reprocess": "missing"|"failed"|"all", "dry_run": bool,
"max_parallel": N, "yes": bool}`` (times ISO 8601; without a zone, in the job's
``timezone``). The slots are decided at once (bad input: 400, an unknown job: 404, nothing
run); a dry run answers 200 with them, a backfill 202 with them while its runs go on in the
daemon (the job page and ``/api/history`` show them as they end).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any

from ...cluster.backfill import BackfillError, LongRangeError
from ...errors import UnknownNameError
from ...scheduler import Scheduler
from ...triggers.zones import localize, resolve_zone
from .actions import HttpError

__all__ = ["backfill"]

log = logging.getLogger("jobscheduler.http")

_FIELDS = {"from", "to", "reprocess", "dry_run", "max_parallel", "yes"}


def _time(body: dict[str, Any], key: str, zone_name: str | None) -> datetime:
    text = body.get(key)
    if not isinstance(text, str):
        raise HttpError(400, f"{key} must be a time (ISO 8601 text)")
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise HttpError(400, f"{key}: {text!r} is not an ISO 8601 time") from None
    return value if value.tzinfo is not None else localize(value, resolve_zone(zone_name))


def backfill(scheduler: Scheduler, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The status and JSON answer of a backfill of job `name` asked for with `body`."""
    unknown = set(body) - _FIELDS
    if unknown:
        raise HttpError(400, f"unknown fields: {', '.join(sorted(unknown))}")
    try:
        job = scheduler.get_job(name)
    except UnknownNameError:
        raise HttpError(404, f"no job named {name!r}") from None
    start, end = _time(body, "from", job.timezone), _time(body, "to", job.timezone)
    options: dict[str, Any] = {
        "reprocess": body.get("reprocess", "missing"),
        "max_parallel": body.get("max_parallel", 1),
        "yes": body.get("yes", False),
    }
    dry_run = body.get("dry_run", False)
    for flag in ("yes", "dry_run"):
        if not isinstance(body.get(flag, False), bool):
            raise HttpError(400, f"{flag} must be true or false")
    if not isinstance(options["reprocess"], str):
        raise HttpError(400, "reprocess must be one of missing, failed, all")
    try:
        decisions = scheduler.backfill(name, start, end, dry_run=True, **options)
    except LongRangeError as exc:
        raise HttpError(400, str(exc.confirm_with('"yes": true'))) from None
    except BackfillError as exc:
        raise HttpError(400, " ".join(str(exc).split())) from None
    slots = [d.to_json() for d in decisions]
    if dry_run or not any(d.action == "run" for d in decisions):
        return 200, {"job": name, "dry_run": bool(dry_run), "slots": slots}
    if not scheduler.running:
        raise HttpError(409, "the scheduler is not running")

    def go() -> None:
        try:
            done = scheduler.backfill(name, start, end, **options)
        except Exception:
            log.exception("the backfill of %r failed", name)
            return
        for d in done:  # what the command line prints, in the daemon's log
            if d.action == "run" and d.state != "succeeded":
                log.warning(
                    "backfill of %r: slot %s (attempt %d) -> %s", name, d.slot.isoformat(),
                    d.attempt, d.outcome(),
                )  # fmt: skip
        ran = sum(1 for d in done if d.action == "run")
        log.info("backfill of %r ended: %d slot(s), %d run", name, len(done), ran)

    threading.Thread(target=go, name=f"jobscheduler-backfill-{name}", daemon=True).start()
    return 202, {"job": name, "dry_run": False, "slots": slots}
