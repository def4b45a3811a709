"""The WSGI application (``runserver``, gunicorn): Django, with the scheduler's status page
mounted at ``/jobs`` through ``a2wsgi``'s ASGI-to-WSGI adapter."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from a2wsgi import ASGIMiddleware
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
django_app = get_wsgi_application()

from jobsapp.jobs import scheduler  # noqa: E402 (after Django is set up)

PREFIX = "/jobs"
token_env = "JOBS_TOKEN" if os.environ.get("JOBS_TOKEN") else None
jobs_app = ASGIMiddleware(scheduler.asgi_app(token_env=token_env))  # type: ignore[arg-type]


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """``/jobs/...`` to the status page (its prefix moved to SCRIPT_NAME), the rest to Django."""
    path = environ.get("PATH_INFO", "")
    if path == PREFIX or path.startswith(PREFIX + "/"):
        environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + PREFIX
        environ["PATH_INFO"] = path[len(PREFIX) :]
        return jobs_app(environ, start_response)  # type: ignore[arg-type]
    return django_app(environ, start_response)
