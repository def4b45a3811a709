"""jobscheduler: an embeddable job scheduler with a command line and a daemon.

The public names are imported when first used (PEP 562), so that ``import jobscheduler``
and the command line start fast: ``jobscheduler --help`` needs none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_module

if TYPE_CHECKING:
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

# Where each public name lives.
_WHERE = {
    "ASGIApp": ".scheduler.pythonface",
    "Catalog": ".model.catalog",
    "Clock": ".clock",
    "ConfigFileError": ".errors",
    "ConfigStore": ".config",
    "ConflictError": ".errors",
    "Dependence": ".model.job",
    "DuplicateNameError": ".errors",
    "EmailConfiguration": ".model.emailconfig",
    "EmailEventHandler": ".events.email",
    "Event": ".model.event",
    "EventHandler": ".events.base",
    "Execution": ".model.execution",
    "FakeClock": ".clock",
    "Interval": ".triggers.interval",
    "IntervalError": ".triggers.interval",
    "IntervalTrigger": ".triggers.interval",
    "InvalidJobError": ".errors",
    "Job": ".model.job",
    "JobActionError": ".errors",
    "JobDecorator": ".model.jobfunction",
    "JobFunction": ".model.jobfunction",
    "JobGroup": ".model.job",
    "JobType": ".model.job",
    "Message": ".model.job",
    "Problem": ".errors",
    "RunContext": ".runners.runner",
    "RunInfo": ".runners.identity",
    "Runner": ".runners.runner",
    "Schedulable": ".model.protocols",
    "ScheduledEnable": ".model.protocols",
    "Scheduler": ".scheduler",
    "SchedulerResult": ".model.execution",
    "SmtpSecurity": ".model.emailconfig",
    "SmtpSettings": ".model.emailconfig",
    "SystemClock": ".clock",
    "Trigger": ".triggers.interval",
    "TriggerEventHandler": ".events.dependences",
    "Unit": ".triggers.interval",
    "UnknownNameError": ".errors",
    "current_run": ".runners.identity",
    "dump_config": ".config",
    "load_config": ".config",
    "parse_config": ".config",
}


__getattr__, __dir__ = lazy_module(__name__, globals(), _WHERE)
