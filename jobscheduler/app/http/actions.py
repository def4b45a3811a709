"""The actions the page's buttons and the API carry out, and how bad input is answered.

Only defined jobs can be acted on, by name: no action runs a command of its own. An action
that is refused raises `HttpError` (an HTTP status and a one-line reason) before it changes
anything.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ...cluster.queue import JobPausedError, QueueFullError
from ...errors import JobActionError, UnknownNameError
from ...scheduler import Scheduler
from ...state.values import load_json
from .. import opsdata

__all__ = ["ACTIONS", "BODY_LIMIT", "HttpError", "act", "read_body", "read_json"]

BODY_LIMIT = 64 * 1024  # bytes: a request body beyond it is refused (413)

ACTIONS = ("run", "pause", "resume", "kill", "submit")


class HttpError(Exception):
    """A refused request: `status` and a one-line `reason` (the JSON body's ``error``)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


async def read_body(request: Request) -> bytes:
    """The request's body, at most `BODY_LIMIT` bytes (413 beyond, read no further)."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > BODY_LIMIT):
        raise HttpError(413, f"the request body is larger than {BODY_LIMIT} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > BODY_LIMIT:
            raise HttpError(413, f"the request body is larger than {BODY_LIMIT} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request) -> dict[str, Any]:
    """The body as a JSON object; an empty body is ``{}``. 400 for anything else, a body
    nested deeper than `state.values.MAX_JSON_DEPTH` included (the bound of a run's arguments)."""
    body = await read_body(request)
    if not body.strip():
        return {}
    try:
        value = load_json(body)
    except ValueError as exc:
        raise HttpError(400, f"the body is {exc}") from None
    if not isinstance(value, dict):
        raise HttpError(400, "the body must be a JSON object")
    return value


def _submit_fields(body: dict[str, Any]) -> tuple[dict[str, Any] | None, int | None]:
    unknown = set(body) - {"args", "priority"}
    if unknown:
        raise HttpError(400, f"unknown fields: {', '.join(sorted(unknown))}")
    args = body.get("args")
    if args is not None and not isinstance(args, dict):
        raise HttpError(400, "args must be a JSON object")
    priority = body.get("priority")
    if priority is not None and (type(priority) is not int or abs(priority) > 1_000_000):
        raise HttpError(400, "priority must be a whole number between -1000000 and 1000000")
    return args, priority


def _pause_fields(body: dict[str, Any]) -> tuple[str | None, Any]:
    """A pause's optional ``note`` (text) and ``for`` (a duration with its unit, "2h")."""
    unknown = set(body) - {"note", "for"}
    if unknown:
        raise HttpError(400, f"unknown fields: {', '.join(sorted(unknown))}")
    note = body.get("note")
    if note is not None and not isinstance(note, str):
        raise HttpError(400, "note must be text")
    length = body.get("for")
    if length is not None:
        try:
            length = opsdata.pause_for(length, "for")
        except opsdata.OpsError as exc:
            raise HttpError(400, _text(exc)) from None
    return note, length


def act(
    scheduler: Scheduler,
    action: str,
    *,
    job: str | None = None,
    run_id: str | None = None,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Carry out `action` on job `job` (or, for ``kill``, run `run_id`); its JSON answer."""
    try:
        if action == "kill":
            reached = opsdata.kill(scheduler.state_store, scheduler.catalog, job=job, run_id=run_id)
            scheduler.queue.wake(kills=True)
            return {"requested": reached}
        assert job is not None
        if action == "submit":
            args, priority = _submit_fields(body or {})
            return {"queue_id": scheduler.submit(job, args, priority=priority)}
        if action == "run":
            scheduler.run_now(job)
            return {"started": job}
        if action == "pause":
            note, length = _pause_fields(body or {})
            until = scheduler.clock.now() + length if length is not None else None
            scheduler.pause_job(job, note=note, until=until)
            pause = scheduler.pause_of(job)
            return {"paused": job, "pause": None if pause is None else pause.as_dict()}
        if action == "resume":
            scheduler.resume_job(job)
            return {"resumed": job}
    except UnknownNameError as exc:
        raise HttpError(404, _text(exc)) from None
    except opsdata.OpsError as exc:
        raise HttpError(404, _text(exc)) from None
    except JobPausedError as exc:
        raise HttpError(409, _text(exc)) from None
    except QueueFullError as exc:
        raise HttpError(429, _text(exc)) from None
    except (JobActionError, TypeError, ValueError) as exc:
        raise HttpError(400, _text(exc)) from None
    raise HttpError(404, f"no action {action!r}: one of {', '.join(ACTIONS)}")


def _text(exc: Exception) -> str:
    return " ".join(str(exc).split())
