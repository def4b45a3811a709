"""Settings of the example project: the least Django needs, and where the jobs' state lives."""

from __future__ import annotations

import os

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-a-secret")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "urls"
WSGI_APPLICATION = "wsgi.application"
INSTALLED_APPS = ["jobsapp"]
DATABASES: dict[str, object] = {}
USE_TZ = True

# The state store every process shares: the web processes submit runs and read the history
# there; the process that runs the jobs (`manage.py runjobs`) claims and records them there.
JOBS_STATE = os.environ.get("JOBS_STATE", "sqlite:///jobs.state.db")
# "1": the web process runs the jobs itself (AppConfig.ready starts the scheduler).
JOBS_RUN_IN_WEB = os.environ.get("JOBS_RUN_IN_WEB") == "1"
