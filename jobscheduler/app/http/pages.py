"""The status page and its forms (Jinja2, autoescape on: output tails and names are escaped).

The page takes the token once through its login form and keeps a value derived from it in an
HttpOnly, SameSite=Strict cookie (`security`). Its buttons are small forms posting to
``/action`` with the action, the job or run id and the per-form check; a success answers 303
back to the page with a message, a refusal answers the page with the message and the
refusal's status.

Every form, redirect and the cookie's path start with the request's ASGI ``root_path``
(`base`), and the links between pages are relative: mounted under a prefix
(``app.mount("/jobs", scheduler.asgi_app())``), the pages work there as they do at the root
of their own server.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from jinja2 import Environment, FileSystemLoader, pass_context, select_autoescape
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from .. import opsdata
from .actions import ACTIONS, HttpError, act, read_body
from .chart import duration_chart
from .console import job_view, run_view
from .context import Context
from .security import COOKIE
from .times import page_zone, shown_time, zone_name
from .views import PER_PAGE, job_rows, status_data

__all__ = ["form_action", "login", "logout", "render", "render_job", "render_run"]

_env = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
HISTORY_ROWS = 30


@pass_context
def _time(context: Any, value: str | datetime | None) -> str:
    """A time (ISO text or a datetime) in the page's zone, with that zone: every time on a
    page carries its zone."""
    return shown_time(value, context.get("zone", UTC))


def _quoted(value: str) -> str:
    """A name or run id as one path segment of a link."""
    return quote(value, safe="")


def _seconds(value: float | None) -> str:
    """A duration in seconds as the page shows it: ``0.125 s``, ``1 m 05 s``; '' for None."""
    if value is None:
        return ""
    if value < 60:
        return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"
    minutes, secs = divmod(int(value), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} m" if hours else f"{minutes} m {secs:02d} s"


def _button(
    action: str,
    label: str,
    job: str,
    checks: dict[str, str],
    signed_in: bool,
    danger: bool,
    base: str,
) -> str:
    """The page's ``button`` macro for a job, written in Python: a page of 200 jobs has 600
    of them, and a macro call costs Jinja2 some 40 µs."""
    target = escape(job)
    locked = "" if signed_in else ' disabled title="sign in with the token first"'
    style = ' class="danger"' if danger else ""
    return (
        f'<form class="inline" method="post" action="{escape(base)}/action">'
        f'<input type="hidden" name="action" value="{action}">'
        f'<input type="hidden" name="job" value="{target}">'
        f'<input type="hidden" name="check" value="{escape(checks.get(action, ""))}">'
        f'<button type="submit"{style}{locked} data-action="{action}" data-target="{target}">'
        f"{label}</button></form>"
    )


def _job_buttons(
    job: str, running: bool, checks: dict[str, str], signed_in: bool, base: str = ""
) -> Markup:
    """A job row's Run now, Pause (or, for a paused job: not `running`, Resume) and Kill
    buttons (their forms under `base`)."""
    pause = ("pause", "Pause") if running else ("resume", "Resume")
    return Markup(
        _button("run", "Run now", job, checks, signed_in, False, base)
        + _button(*pause, job, checks, signed_in, False, base)
        + _button("kill", "Kill", job, checks, signed_in, True, base)
    )


_env.globals["job_buttons"] = _job_buttons
_env.filters["t"] = _time
_env.filters["seconds"] = _seconds
_env.filters["q"] = _quoted


def base(request: Request) -> str:
    """The path the app is mounted at (ASGI ``root_path``; "" at the root), without a
    trailing slash."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _home(request: Request, message: str) -> RedirectResponse:
    return RedirectResponse(f"{base(request)}/?" + urlencode({"msg": message}), status_code=303)


def _locked(ctx: Context, request: Request, message: str | None, status: int) -> Response | None:
    """The sign-in page when the request may not read, else None."""
    if ctx.guard.may_read(request.headers.get("authorization"), request.cookies.get(COOKIE)):
        return None
    html = _env.get_template("page.html").render(
        locked=True, message=message, message_is_error=status >= 400, base=base(request)
    )
    return HTMLResponse(html, status_code=401 if status == 200 else status)


def _common(ctx: Context, request: Request, zone: tzinfo, root: str) -> dict[str, Any]:
    """What every page's layout shows: the node, the time now, who is signed in."""
    guard, scheduler = ctx.guard, ctx.scheduler
    tz = request.query_params.get("tz", "").strip()
    return {
        "locked": False,
        "base": base(request),
        "node": scheduler.node,
        "now": scheduler.clock.now(),
        "zone": zone,
        "zone_name": zone_name(zone),
        "tz": tz,
        "tz_query": "?" + urlencode({"tz": tz}) if tz else "",
        "root": root + ("?" + urlencode({"tz": tz}) if tz else ""),
        "actions": guard.actions,
        "signed_in": guard.cookie_ok(request.cookies.get(COOKIE)),
        "checks": {action: guard.form_check(action) for action in ACTIONS} if guard.actions else {},
    }


def _refused(request: Request, exc: HttpError) -> Response:
    html = _env.get_template("base.html").render(
        locked=True, message=exc.reason, message_is_error=True, base=base(request)
    )
    return HTMLResponse(html, status_code=exc.status)


def _page_number(request: Request) -> int:
    try:
        return max(int(request.query_params.get("page", "1")), 1)
    except ValueError:
        return 1


def render(
    ctx: Context, request: Request, *, message: str | None = None, status: int = 200
) -> Response:
    if (locked := _locked(ctx, request, message, status)) is not None:
        return locked
    try:
        zone = page_zone(request.query_params.get("tz"))
    except HttpError as exc:
        return _refused(request, exc)
    scheduler = ctx.scheduler
    page = _page_number(request)
    query = request.query_params.get("q", "")
    now = scheduler.clock.now()
    rows, total = job_rows(scheduler, ctx.last, page=page, query=query)
    history = [opsdata.record_json(r) for r in scheduler.history(limit=HISTORY_ROWS)]
    context: dict[str, Any] = {
        **_common(ctx, request, zone, "./"),
        "status": status_data(scheduler, now),
        "jobs": rows,
        "total": total,
        "page": page,
        "pages": max((total + PER_PAGE - 1) // PER_PAGE, 1),
        "query": query,
        "history": history,
        "message": message or request.query_params.get("msg"),
        "message_is_error": status >= 400,
    }
    html = _env.get_template("page.html").render(**context)
    return HTMLResponse(html, status_code=status)


def render_job(ctx: Context, request: Request, name: str) -> Response:
    """``/jobs/NAME``: the job page (`console.job_view`)."""
    if (locked := _locked(ctx, request, None, 200)) is not None:
        return locked
    try:
        zone = page_zone(request.query_params.get("tz"))
        now = ctx.scheduler.clock.now()
        job = job_view(ctx.scheduler, name, now, page=_page_number(request))
    except HttpError as exc:
        return _refused(request, exc)
    chart = Markup(duration_chart(job["last_runs"], zone))
    html = _env.get_template("job.html").render(
        **_common(ctx, request, zone, "../"), job=job, chart=chart
    )
    return HTMLResponse(html)


def render_run(ctx: Context, request: Request, run_id: str) -> Response:
    """``/runs/ID``: a run and its output, followed live while it runs."""
    if (locked := _locked(ctx, request, None, 200)) is not None:
        return locked
    try:
        zone = page_zone(request.query_params.get("tz"))
        run = run_view(ctx.scheduler, run_id)
    except HttpError as exc:
        return _refused(request, exc)
    stream = f"../api/runs/{quote(run_id, safe='')}/output?follow=1"
    html = _env.get_template("run.html").render(
        **_common(ctx, request, zone, "../"), run=run, stream_url=stream
    )
    return HTMLResponse(html)


async def _form(request: Request) -> dict[str, str]:
    body = await read_body(request)
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=10)
    except (UnicodeDecodeError, ValueError):
        raise HttpError(400, "the form could not be read") from None
    return {key: values[0] for key, values in fields.items()}


async def login(ctx: Context, request: Request) -> Response:
    try:
        form = await _form(request)
    except HttpError as exc:
        return render(ctx, request, message=exc.reason, status=exc.status)
    if not ctx.guard.actions:
        return render(ctx, request, message="this server has no token", status=403)
    if not ctx.guard.token_ok(form.get("token")):
        return render(ctx, request, message="wrong token", status=403)
    response = _home(request, "signed in")
    response.set_cookie(
        COOKIE,
        ctx.guard.session_value(),
        httponly=True,
        samesite="strict",
        path=base(request) or "/",
    )
    return response


def logout(request: Request) -> Response:
    response = _home(request, "signed out")
    response.delete_cookie(COOKIE, path=base(request) or "/", httponly=True, samesite="strict")
    return response


async def form_action(ctx: Context, request: Request) -> Response:
    guard = ctx.guard
    try:
        form = await _form(request)
        if not guard.actions:
            raise HttpError(403, "actions are off: the server has no token (--token-env NAME)")
        if not guard.cookie_ok(request.cookies.get(COOKIE)):
            raise HttpError(401, "sign in with the token first")
        action = form.get("action", "")
        if action not in ACTIONS or not guard.form_ok(action, form.get("check")):
            raise HttpError(403, "this form is not one of this page's: reload the page")
        job, run_id = form.get("job") or None, form.get("run_id") or None
        answer = act(ctx.scheduler, action, job=job if run_id is None else None, run_id=run_id)
    except HttpError as exc:
        return render(ctx, request, message=exc.reason, status=exc.status)
    what = run_id or job
    done = f"{action}: {what}" + (
        f" ({answer['requested']} run(s))" if "requested" in answer else ""
    )
    return _home(request, done)
