"""jobscheduler: an embeddable job scheduler with a command line and a daemon."""

from __future__ import annotations

from .catalog import Catalog
from .clock import Clock, FakeClock, SystemClock
from .emailconfig import EmailConfiguration, SmtpSecurity, SmtpSettings
from .errors import (
    ConfigFileError,
    ConflictError,
    DuplicateNameError,
    InvalidJobError,
    JobActionError,
    Problem,
    UnknownNameError,
)
from .events import Event, EventHandler
from .execution import Execution, SchedulerResult
from .job import Dependence, Job, JobGroup, JobType, Message
from .schedules import Interval, IntervalTrigger, Trigger, Unit

__version__ = "0.1.0"

__all__ = [
    "Catalog",
    "Clock",
    "ConfigFileError",
    "ConflictError",
    "Dependence",
    "DuplicateNameError",
    "EmailConfiguration",
    "Event",
    "EventHandler",
    "Execution",
    "FakeClock",
    "Interval",
    "IntervalTrigger",
    "InvalidJobError",
    "Job",
    "JobActionError",
    "JobGroup",
    "JobType",
    "Message",
    "Problem",
    "SchedulerResult",
    "SmtpSecurity",
    "SmtpSettings",
    "SystemClock",
    "Trigger",
    "Unit",
    "UnknownNameError",
]
