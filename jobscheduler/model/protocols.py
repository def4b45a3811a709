"""What an internal job looks like: the `Schedulable` and `ScheduledEnable` protocols.

An INTERNAL job's ``command`` names a class (``"package.module:Class"``) or a plain function
(``"package.module:function"``). The runner imports it, creates one instance per run (passing
the job's ``args`` as keyword arguments) and calls ``run()`` in the worker thread that runs the
job. Nothing needs to inherit from these protocols: having the methods is enough.

Anything callable that is not a class (a function) is called with the job's ``args`` instead,
and treated like a plain `Schedulable` that cannot be stopped; its return value is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["Schedulable", "ScheduledEnable"]


@runtime_checkable
class Schedulable(Protocol):
    """An internal job: ``run()`` does the work, ``stop()`` asks it to end early.

    The run is SUCCESSFUL when ``run()`` returns and FAILED when it raises (the Execution's
    ``error`` is ``"ExceptionType: message"`` and its ``reason`` ``"raised ExceptionType"``).
    ``run()`` is called once, in the worker thread, and blocks for as long as the job runs.

    ``stop()`` is called from another thread when the run times out, is stopped with
    ``stop_job`` or the scheduler shuts down without waiting. It should make ``run()`` return
    soon; Python cannot kill a thread, so a ``run()`` that ignores it keeps its worker busy.
    ``stop()`` may be called before ``run()`` has started (a stop that arrived while the run
    was being set up), so ``run()`` must not clear a stop request it finds on entry. An
    exception raised by ``stop()`` is logged and ignored. A stopped run is FAILED with the
    stop's reason ("timed out", "stopped", "shutdown"), however ``run()`` then ends.
    """

    def run(self) -> None:
        """Do the job's work; return when done."""
        ...

    def stop(self) -> None:
        """Ask a running ``run()`` to return as soon as it can. Must not block for long."""
        ...


@runtime_checkable
class ScheduledEnable(Schedulable, Protocol):
    """An internal job that reports its own outcome (the specification's ScheduledEnable).

    After ``run()`` returns, the runner waits until ``is_done()`` is true (a job may hand its
    work to threads of its own and return early; the runner then checks ``is_done()`` at
    growing intervals of 0.01 s up to 1 s, and gives up ``kill_grace`` after a stop), then
    reads ``running_status`` and ``message_data``:

    - ``running_status`` is read like an event name, ignoring case, spaces and underscores:
      ``"successful"`` makes the run SUCCESSFUL; ``"failed"`` FAILED (reason
      ``"job reported failed"``); ``"not started"`` NOT_STARTED (reason
      ``"job reported not started"``; the scheduler result stays NORMAL). Any other text
      (``"disk full"``) makes the run FAILED with that text as its reason; None or empty text
      FAILED with the reason ``"no running status"``.
    - ``message_data`` (a mapping, or None) is copied into the Execution: alert templates see
      each of its keys. It is copied whatever the outcome, also when ``run()`` raised.

    A ``run()`` that raises, or a stopped run, is FAILED as for a plain `Schedulable`; the
    status is still recorded. Both properties may be read from other threads while the job
    runs (status pages show them), so they must be thread-safe, as the specification asks.
    """

    def is_done(self) -> bool:
        """True once the job's work has finished (successfully or not)."""
        ...

    @property
    def running_status(self) -> str | None:
        """The job's own verdict: "successful", "failed", or a short failure reason."""
        ...

    @property
    def message_data(self) -> Mapping[str, Any] | None:
        """Data for the alert templates: every key becomes a template variable."""
        ...
