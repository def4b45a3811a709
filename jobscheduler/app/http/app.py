"""The ASGI application (Starlette): the status page, the JSON API, ``/metrics``.

Routes (docs/operations.md, "HTTP"): ``GET /`` the page, ``/jobs/{name}`` a job's page,
``/runs/{run_id}`` a run's page (each with ``?tz=ZONE``); ``POST /login``, ``POST /logout``,
``POST /action`` its forms; ``GET /api/status``, ``/api/nodes``, ``/api/jobs``, ``/api/history``,
``/api/queue``, ``/api/runs/{run_id}`` (a run, its output included),
``/api/runs/{run_id}/output`` (``?follow=1``: Server-Sent Events until it ends),
``/api/openapi.json``; ``POST /api/jobs/{name}/{action}`` (run, pause, resume, kill,
submit), ``POST /api/jobs/{name}/backfill`` (`backfills`) and ``POST
/api/runs/{run_id}/kill``; ``GET /metrics``. A job's ``{name}`` may hold ``/`` (sent encoded,
``%2F``): its routes take the rest of the path, the action being the last segment. Who may
read and act: `security.Guard`. Every
refusal is a JSON body ``{"error": reason}`` with its status (the page's own forms answer
with the page and the message instead).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ...state.base import StoreError
from .. import opsdata
from . import backfills, pages
from .actions import HttpError, act, read_json
from .console import run_view
from .context import Context
from .openapi import openapi
from .security import COOKIE
from .stream import follow_output
from .times import page_zone
from .views import job_data, job_rows, status_data

__all__ = ["Context", "build_app"]

log = logging.getLogger("jobscheduler.http")

Handler = Callable[[Request], Awaitable[Response]]


def error(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=status)


def _int(request: Request, name: str, default: int, low: int, high: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise HttpError(400, f"{name} must be a whole number, not {text!r}") from None
    if not low <= value <= high:
        raise HttpError(400, f"{name} must be between {low} and {high}")
    return value


def _no_zone(request: Request) -> None:
    """The API and `/metrics` write every time in UTC: a ``tz`` asked of them is refused (400
    with the reason; an unknown zone named so), not ignored. ``tz`` is for the pages."""
    text = request.query_params.get("tz")
    if text is None or not text.strip():
        return
    page_zone(text)  # an unknown zone: its own reason
    raise HttpError(
        400,
        "tz: the API writes every time in UTC (ISO 8601 with its offset); "
        "?tz= is for the pages (/, /jobs/NAME, /runs/ID)",
    )


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


def build_app(ctx: Context, host: str | None = None, *, own_server: bool = True) -> Starlette:
    """The application serving `ctx` (bound to `host`).

    On its own server (`own_server`) on loopback, where reads need no token, requests must
    name a loopback host (or `host`) in their Host header: a page of another site that had
    its name resolve to 127.0.0.1 (DNS rebinding) gets 400, not the status. Mounted in an
    application (`embed`), which hosts it answers for is the application's to say."""
    scheduler, guard = ctx.scheduler, ctx.guard

    def store_away(request: Request, exc: StoreError) -> Response:
        """A 503 for a request the store failed: told to the node once per outage, with no
        traceback per request (a scrape of /metrics every few seconds)."""
        scheduler.store_failed(exc, f"HTTP {request.method} {request.url.path}")
        return error(503, f"state store unavailable: {exc}")

    def reading(handler: Handler) -> Handler:
        async def wrapped(request: Request) -> Response:
            if not guard.may_read(
                request.headers.get("authorization"), request.cookies.get(COOKIE)
            ):
                return error(401, "this server needs its token: Authorization: Bearer TOKEN")
            try:
                _no_zone(request)
                return await handler(request)
            except HttpError as exc:
                return error(exc.status, exc.reason)
            except StoreError as exc:
                return store_away(request, exc)

        return wrapped

    def acting(handler: Handler) -> Handler:
        async def wrapped(request: Request) -> Response:
            if not guard.actions:
                return error(403, "actions are off: the server has no token (--token-env NAME)")
            header = request.headers.get("authorization")
            if not header:
                return error(401, "actions need the token: Authorization: Bearer TOKEN")
            if not guard.bearer_ok(header):
                return error(403, "wrong token")
            try:
                _no_zone(request)
                return await handler(request)
            except HttpError as exc:
                return error(exc.status, exc.reason)
            except StoreError as exc:
                return store_away(request, exc)

        return wrapped

    @reading
    async def api_status(request: Request) -> Response:
        return JSONResponse(status_data(scheduler, scheduler.clock.now()))

    @reading
    async def api_nodes(request: Request) -> Response:
        view = opsdata.nodes_view(scheduler.state_store, scheduler.clock.now())
        return JSONResponse({"node": scheduler.node, **view})

    @reading
    async def api_jobs(request: Request) -> Response:
        page = _int(request, "page", 1, 1, 1_000_000)
        rows, total = job_rows(
            scheduler, ctx.last, page=page, query=request.query_params.get("q", "")
        )
        return JSONResponse({"jobs": rows, "total": total, "page": page})

    @reading
    async def api_job(request: Request) -> Response:
        name = request.path_params["name"]
        return JSONResponse(job_data(scheduler, ctx.last, name, scheduler.clock.now()))

    @reading
    async def api_history(request: Request) -> Response:
        limit = _int(request, "limit", 50, 0, 10_000)
        job = request.query_params.get("job") or None
        records = scheduler.history(job, limit=limit)
        return JSONResponse([opsdata.record_json(r) for r in records])

    @reading
    async def api_queue(request: Request) -> Response:
        limit = _int(request, "limit", 100, 0, 10_000)
        state = request.query_params.get("state") or None
        if state is not None and state not in (
            "pending",
            "running",
            "succeeded",
            "failed",
            "not_started",
        ):
            raise HttpError(400, f"state must be a queue state, not {state!r}")
        rows = scheduler.state_store.queue(state=state, limit=limit)
        return JSONResponse([opsdata.queue_json(r) for r in rows])

    @reading
    async def api_run(request: Request) -> Response:
        return JSONResponse(run_view(scheduler, request.path_params["run_id"]))

    @reading
    async def api_run_output(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        follow = request.query_params.get("follow", "0")
        if follow not in ("0", "1"):
            raise HttpError(400, f"follow must be 0 or 1, not {follow!r}")
        record = await asyncio.to_thread(scheduler.state_store.run, run_id)
        if record is None:
            raise HttpError(404, f"no run has the id {run_id!r}")
        if follow == "1":
            return follow_output(scheduler.state_store, record, request, ctx.closing)
        return PlainTextResponse(record.output_tail)

    @reading
    async def api_openapi(request: Request) -> Response:
        return JSONResponse(openapi())

    @reading
    async def metrics(request: Request) -> Response:
        return Response(ctx.metrics.render(), media_type="text/plain; version=0.0.4")

    @acting
    async def api_job_action(request: Request) -> Response:
        name, action = request.path_params["name"], request.path_params["action"]
        body = await read_json(request)
        if action not in ("submit", "pause") and body:
            raise HttpError(400, f"{action} takes no body")
        answer = act(scheduler, action, job=name, body=body)
        return JSONResponse(answer, status_code=201 if action == "submit" else 200)

    @acting
    async def api_job_backfill(request: Request) -> Response:
        body = await read_json(request)
        status, answer = await asyncio.to_thread(
            backfills.backfill, scheduler, request.path_params["name"], body
        )
        return JSONResponse(answer, status_code=status)

    @acting
    async def api_run_kill(request: Request) -> Response:
        if await read_json(request):
            raise HttpError(400, "kill takes no body")
        return JSONResponse(act(scheduler, "kill", run_id=request.path_params["run_id"]))

    def paging(handler: Handler) -> Handler:
        async def wrapped(request: Request) -> Response:
            try:
                return await handler(request)
            except StoreError as exc:
                return store_away(request, exc)

        return wrapped

    @paging
    async def page(request: Request) -> Response:
        return pages.render(ctx, request)

    @paging
    async def job_page(request: Request) -> Response:
        return pages.render_job(ctx, request, request.path_params["name"])

    @paging
    async def run_page(request: Request) -> Response:
        return pages.render_run(ctx, request, request.path_params["run_id"])

    async def login(request: Request) -> Response:
        return await pages.login(ctx, request)

    async def logout(request: Request) -> Response:
        return pages.logout(request)

    async def form_action(request: Request) -> Response:
        return await pages.form_action(ctx, request)

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/jobs/{name:path}", job_page, methods=["GET"]),
        Route("/runs/{run_id}", run_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/action", form_action, methods=["POST"]),
        Route("/api/status", api_status, methods=["GET"]),
        Route("/api/nodes", api_nodes, methods=["GET"]),
        Route("/api/jobs", api_jobs, methods=["GET"]),
        Route("/api/history", api_history, methods=["GET"]),
        Route("/api/queue", api_queue, methods=["GET"]),
        Route("/api/runs/{run_id}", api_run, methods=["GET"]),
        Route("/api/runs/{run_id}/output", api_run_output, methods=["GET"]),
        Route("/api/openapi.json", api_openapi, methods=["GET"]),
        Route("/api/jobs/{name:path}/backfill", api_job_backfill, methods=["POST"]),
        Route("/api/jobs/{name:path}", api_job, methods=["GET"]),
        Route("/api/jobs/{name:path}/{action}", api_job_action, methods=["POST"]),
        Route("/api/runs/{run_id}/kill", api_run_kill, methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]

    async def not_found(request: Request, exc: Any) -> Response:
        status = getattr(exc, "status_code", 404)
        return error(status, str(getattr(exc, "detail", "not found")))

    async def crashed(request: Request, exc: Exception) -> Response:
        log.exception("HTTP %s %s failed", request.method, request.url.path)
        return error(500, f"internal error: {type(exc).__name__}")

    middleware = []
    if guard.loopback and own_server:
        hosts = [*LOOPBACK_NAMES, *([host] if host else [])]
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=hosts))
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={404: not_found, 405: not_found, Exception: crashed},
    )
