"""`PythonFace`: what the `Scheduler` offers a Python application beyond its definitions API —
jobs defined by decorating functions (``@scheduler.job``), and its place in a web
application: an ASGI lifespan (``scheduler.lifespan``) and its status page as a mountable
ASGI app (``scheduler.asgi_app()``). docs/applications.md shows them at work.

A base of `Scheduler`, built only on its public methods (declared here, abstract).
"""

from __future__ import annotations

import contextlib
import importlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from datetime import datetime
from typing import Any

from ..clock import Clock
from ..model.job import Job
from ..model.jobfunction import JobDecorator, job_decorator
from ..triggers.interval import Interval

__all__ = ["ASGIApp", "PythonFace"]

Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [Message, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
    Awaitable[None],
]
"""An ASGI application: ``await app(scope, receive, send)``."""


class PythonFace(ABC):
    """The decorator, the lifespan and the mountable app (see the module notes)."""

    @abstractmethod
    def add_job(self, job: Job) -> None: ...

    @abstractmethod
    def submit(
        self, name: str, args: dict[str, object] | None = None, *, priority: int | None = None
    ) -> int: ...

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def shutdown(self, wait: bool = True) -> None: ...

    @property
    @abstractmethod
    def clock(self) -> Clock: ...

    def job(
        self,
        name: str | None = None,
        *,
        interval: Interval | str | None = None,
        start: datetime | None = None,
        cron: str | None = None,
        calendar: str | None = None,
        on_demand: bool = False,
        **options: Any,
    ) -> JobDecorator:
        """``@scheduler.job(...)``: the function below (plain or ``async def``; or a class
        with ``run()``) becomes an internal job defined in code, named `name` (default: its
        ``__name__``), never written into the YAML file; `options` are any other `Job`
        keywords (``timeout``, ``retry``, ``max_instances``, …). `interval` is an `Interval`
        or a text such as ``"90 minutes"``; without `start` it counts from now (the first
        run one interval after the definition). The function stays callable as before and
        gains ``.submit(**args)``. A `JobActionError` as for `add_job` (a name the file
        defines too, a broken rule)."""
        schedule: dict[str, object] = {"interval": interval, "start": start, "cron": cron}
        schedule.update(calendar=calendar, on_demand=on_demand)
        return job_decorator(self.add_job, self.submit, self.clock.now, name, schedule, options)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """An ASGI lifespan (``FastAPI(lifespan=scheduler.lifespan)``, Starlette's
        ``lifespan=``): the scheduler starts with the application and shuts down with it,
        letting running jobs finish. Both run in a thread, off the application's loop."""
        import asyncio  # here: importing jobscheduler does not load asyncio

        await asyncio.to_thread(self.start)
        try:
            yield
        finally:
            await asyncio.to_thread(self.shutdown)

    def asgi_app(self, token_env: str | None = None, *, private: bool = False) -> ASGIApp:
        """The status page, JSON API and ``/metrics`` as an ASGI app to mount at any path
        (``app.mount("/jobs", scheduler.asgi_app())``; needs the extra ``jobscheduler[http]``).
        Actions need the token held in the environment variable `token_env` (None: read-only);
        with `private`, reads need it too. Links, forms and the token's cookie work under the
        mount's prefix."""
        # Imported by name, when asked: the HTTP surface drives a Scheduler (it sits in the
        # layer above) and is an optional extra that importing jobscheduler never loads.
        embed = importlib.import_module("jobscheduler.app.http.embed")
        app: ASGIApp = embed.mountable_app(self, token_env, private=private)
        return app
