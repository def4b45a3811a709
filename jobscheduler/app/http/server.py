"""`serve_http`: the status page, API and metrics of a `Scheduler`, served by uvicorn in a
thread of the scheduler's process (``jobscheduler run CONFIG --http HOST:PORT``, or an
embedding application).

Starlette and uvicorn (the extra ``jobscheduler[http]``): both are widely used and kept up,
small, and typed; uvicorn serves in a thread of our own, so the daemon keeps its main thread
for signals (see docs/operations.md, "HTTP").
"""

from __future__ import annotations

import logging
import threading

import uvicorn

from ...clock import SystemClock
from ...errors import JobActionError
from ...scheduler import Scheduler
from .app import build_app
from .context import Context
from .security import Guard, is_loopback

__all__ = ["HttpServer", "serve_http"]

log = logging.getLogger("jobscheduler.http")

START_TIMEOUT = 10.0  # seconds to wait for the socket to be bound


class HttpServer:
    """A running server: `url`, `port` (the one bound, useful with port 0), `close()`."""

    def __init__(self, ctx: Context, server: uvicorn.Server, thread: threading.Thread) -> None:
        self._ctx = ctx
        self._server = server
        self._thread = thread
        sockets = [s for srv in server.servers for s in srv.sockets]
        self.host, self.port = sockets[0].getsockname()[:2]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{self.port}"

    def close(self) -> None:
        """Stop serving (idempotent); requests under way are finished first (output streams
        end at once)."""
        self._ctx.closing.set()
        self._server.should_exit = True
        self._thread.join(START_TIMEOUT)
        self._ctx.close()


def serve_http(
    scheduler: Scheduler, host: str = "127.0.0.1", port: int = 8080, token: str | None = None
) -> HttpServer:
    """Serve `scheduler` on `host`:`port` until `close()`. `token` None: read-only, and only
    on loopback (a `JobActionError` otherwise, as for a port that cannot be bound)."""
    guard = Guard(token, loopback=is_loopback(host)) if token or is_loopback(host) else None
    if guard is None:
        raise JobActionError(f"serving on {host} beyond loopback needs a token")
    ctx = Context(scheduler, guard)
    config = uvicorn.Config(
        build_app(ctx, host),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    failed: list[BaseException] = []

    def target() -> None:
        try:
            server.run()
        except BaseException as exc:  # SystemExit from uvicorn when the port is taken
            failed.append(exc)

    thread = threading.Thread(target=target, name="jobscheduler-http", daemon=True)
    thread.start()
    clock = SystemClock()
    for _ in range(int(START_TIMEOUT / 0.01)):
        if server.started or not thread.is_alive():
            break
        clock.sleep(0.01)
    if not server.started:
        server.should_exit = True
        ctx.close()
        raise JobActionError(f"--http {host}:{port}: cannot serve there (port taken?)")
    served = HttpServer(ctx, server, thread)
    log.info("status page at %s (actions %s)", served.url, "on" if guard.actions else "off")
    return served
