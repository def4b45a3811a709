"""The status page and its forms (Jinja2, autoescape on: output tails and names are escaped).

The page takes the token once through its login form and keeps a value derived from it in an
HttpOnly, SameSite=Strict cookie (`security`). Its buttons are small forms posting to
``/action`` with the action, the job or run id and the per-form check; a success answers 303
back to the page with a message, a refusal answers the page with the message and the
refusal's status.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from .. import opsdata
from .actions import ACTIONS, HttpError, act, read_body
from .context import Context
from .security import COOKIE
from .views import PER_PAGE, job_rows, status_data

__all__ = ["form_action", "login", "logout", "render"]

_env = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
HISTORY_ROWS = 30


def _short_time(text: str | None) -> str:
    """``2026-11-23T15:50:18.483612+00:00`` as ``2026-11-23 15:50:18`` (the page says UTC)."""
    if not text:
        return ""
    return text.replace("T", " ", 1)[:19]


def _seconds(value: float | None) -> str:
    """A duration in seconds as the page shows it: ``0.125 s``, ``1 m 05 s``; '' for None."""
    if value is None:
        return ""
    if value < 60:
        return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"
    minutes, secs = divmod(int(value), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} m" if hours else f"{minutes} m {secs:02d} s"


_env.filters["t"] = _short_time
_env.filters["seconds"] = _seconds


def render(
    ctx: Context, request: Request, *, message: str | None = None, status: int = 200
) -> Response:
    guard = ctx.guard
    cookie = request.cookies.get(COOKIE)
    if not guard.may_read(request.headers.get("authorization"), cookie):
        html = _env.get_template("page.html").render(
            locked=True, message=message, message_is_error=status >= 400
        )
        return HTMLResponse(html, status_code=401 if status == 200 else status)
    scheduler = ctx.scheduler
    try:
        page = max(int(request.query_params.get("page", "1")), 1)
    except ValueError:
        page = 1
    query = request.query_params.get("q", "")
    now = scheduler.clock.now()
    rows, total = job_rows(scheduler, ctx.last, page=page, query=query)
    history = [opsdata.record_json(r) for r in scheduler.history(limit=HISTORY_ROWS)]
    context: dict[str, Any] = {
        "locked": False,
        "status": status_data(scheduler, now),
        "jobs": rows,
        "total": total,
        "page": page,
        "pages": max((total + PER_PAGE - 1) // PER_PAGE, 1),
        "query": query,
        "history": history,
        "message": message or request.query_params.get("msg"),
        "message_is_error": status >= 400,
        "actions": guard.actions,
        "signed_in": guard.cookie_ok(cookie),
        "checks": {action: guard.form_check(action) for action in ACTIONS} if guard.actions else {},
        "now": now.strftime("%Y-%m-%d %H:%M:%S"),
    }
    html = _env.get_template("page.html").render(**context)
    return HTMLResponse(html, status_code=status)


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
    response = RedirectResponse("/?" + urlencode({"msg": "signed in"}), status_code=303)
    response.set_cookie(
        COOKIE, ctx.guard.session_value(), httponly=True, samesite="strict", path="/"
    )
    return response


def logout() -> Response:
    response = RedirectResponse("/?" + urlencode({"msg": "signed out"}), status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
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
    return RedirectResponse("/?" + urlencode({"msg": done}), status_code=303)
