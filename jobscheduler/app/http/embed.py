"""`mountable_app`: the status page, JSON API and ``/metrics`` of a `Scheduler` as an ASGI app
that an application mounts at a path of its own (``Scheduler.asgi_app``, docs/applications.md).

The same Starlette app `serve_http` serves on its own port, with two differences: the
application decides which hosts it answers for (no Host check of its own), and reads are
free unless `private` (the application guards its own exposure); actions always need the
token. Links, forms, redirects and the token's cookie follow the mount's prefix (`pages`).
"""

from __future__ import annotations

import os

from starlette.applications import Starlette

from ...errors import JobActionError
from ...scheduler import Scheduler
from .app import build_app
from .context import Context
from .security import MIN_TOKEN, Guard

__all__ = ["mountable_app"]


def mountable_app(
    scheduler: Scheduler, token_env: str | None, *, private: bool = False
) -> Starlette:
    """The app (see the module notes). `token_env`: the environment variable holding the
    token (None: read-only). A `JobActionError` for a variable that is not set, a token
    shorter than `MIN_TOKEN` characters, or `private` without a token."""
    token: str | None = None
    if token_env is not None:
        token = os.environ.get(token_env)
        if not token:
            raise JobActionError(f"asgi_app: the variable {token_env} is not set")
        if len(token) < MIN_TOKEN:
            raise JobActionError(
                f"asgi_app: the token in {token_env} is too short (at least {MIN_TOKEN})"
            )
    if private and token is None:
        raise JobActionError("asgi_app(private=True): reads need a token, and token_env gives none")
    guard = Guard(token, loopback=not private)  # `loopback`: reads need no token
    return build_app(Context(scheduler, guard), own_server=False)
