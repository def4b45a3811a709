"""A Flask application with its jobs in the same process (docs/applications.md).

    flask --app examples.flask_app run            # the development server
    gunicorn -w 1 examples.flask_app:app           # one worker: see the docs for more

Flask has no lifespan: the scheduler starts when the module is imported by the serving
process and shuts down at exit (``atexit``). The status page is mounted at ``/jobs`` by
Werkzeug's ``DispatcherMiddleware``, through ``a2wsgi``'s ASGI-to-WSGI adapter.
"""

from __future__ import annotations

import atexit
import os

from a2wsgi import ASGIMiddleware
from flask import Flask, jsonify
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from jobscheduler import Scheduler

scheduler = Scheduler(state=os.environ.get("JOBS_STATE", "memory"), node="flask")
done: list[str] = []


@scheduler.job(on_demand=True)
def export(table: str = "orders") -> None:
    """A plain function: it runs in one of the scheduler's worker threads."""
    done.append(table)


app = Flask(__name__)


@app.get("/")
def home() -> object:
    return jsonify(exported=done, jobs=[job.name for job in scheduler.jobs])


@app.post("/export/<table>")
def ask_export(table: str) -> object:
    return jsonify(queue_id=export.submit(table=table)), 202


token_env = "JOBS_TOKEN" if os.environ.get("JOBS_TOKEN") else None
app.wsgi_app = DispatcherMiddleware(  # type: ignore[method-assign]
    app.wsgi_app, {"/jobs": ASGIMiddleware(scheduler.asgi_app(token_env=token_env))}
)
scheduler.start()
atexit.register(scheduler.shutdown)
