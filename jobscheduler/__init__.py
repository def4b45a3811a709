"""jobscheduler: an embeddable job scheduler with a command line and a daemon."""

from __future__ import annotations

from .clock import Clock, FakeClock, SystemClock
from .config import ConfigStore, dump_config, load_config, parse_config
from .errors import (
    ConfigFileError,
    ConflictError,
    DuplicateNameError,
    InvalidJobError,
    JobActionError,
    Problem,
    UnknownNameError,
)
from .events.base import EventHandler
from .events.dependences import TriggerEventHandler
from .events.email import EmailEventHandler
from .model.catalog import Catalog
from .model.emailconfig import EmailConfiguration, SmtpSecurity, SmtpSettings
from .model.event import Event
from .model.execution import Execution, SchedulerResult
from .model.job import Dependence, Job, JobGroup, JobType, Message
from .model.jobfunction import JobDecorator, JobFunction
from .model.protocols import Schedulable, ScheduledEnable
from .runners.identity import RunInfo, current_run
from .runners.runner import RunContext, Runner
from .scheduler import Scheduler
from .scheduler.pythonface import ASGIApp
from .triggers.interval import Interval, IntervalError, IntervalTrigger, Trigger, Unit

__version__ = "0.1.0"

__all__ = [
    "ASGIApp",
    "Catalog",
    "Clock",
    "ConfigFileError",
    "ConfigStore",
    "ConflictError",
    "Dependence",
    "DuplicateNameError",
    "EmailConfiguration",
    "EmailEventHandler",
    "Event",
    "EventHandler",
    "Execution",
    "FakeClock",
    "Interval",
    "IntervalError",
    "IntervalTrigger",
    "InvalidJobError",
    "Job",
    "JobActionError",
    "JobDecorator",
    "JobFunction",
    "JobGroup",
    "JobType",
    "Message",
    "Problem",
    "RunContext",
    "RunInfo",
    "Runner",
    "Schedulable",
    "ScheduledEnable",
    "Scheduler",
    "SchedulerResult",
    "SmtpSecurity",
    "SmtpSettings",
    "SystemClock",
    "Trigger",
    "TriggerEventHandler",
    "Unit",
    "UnknownNameError",
    "current_run",
    "dump_config",
    "load_config",
    "parse_config",
]
