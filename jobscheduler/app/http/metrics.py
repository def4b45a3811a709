"""Prometheus metrics at ``/metrics`` (`prometheus_client`, a registry of this server's own).

- ``jobscheduler_runs_total{job, outcome}`` (counter): runs ended on this node since it
  started; outcome ``succeeded``, ``failed`` or ``not_started``.
- ``jobscheduler_lateness_seconds`` (histogram): how long after its slot a scheduled run
  started.
- ``jobscheduler_run_duration_seconds{job}`` (histogram): how long the runs that ended on
  this node ran (runs that never started are not counted).
- ``jobscheduler_running`` (gauge): runs running on this node.
- ``jobscheduler_queue_depth`` (gauge): pending rows in the queue, all nodes' (counted up to
  10,000).
- ``jobscheduler_node_heartbeat_age_seconds{node, state}`` (gauge): seconds since each
  node's last heartbeat, on the store's clock.
- ``jobscheduler_clock_skew_seconds{node}`` (gauge): how far each live node's clock is
  ahead of the database's (negative: behind), as its heartbeats measured it; only nodes
  whose skew is measured (PostgreSQL: not SQLite, whose clock is the machine's own).
- ``jobscheduler_alerts_pending`` (gauge): alerts this node has still to deliver.

Counters and the histogram are updated as runs end; the gauges are read at each scrape (one
queue read and one node read of the store).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ...model.event import Event
from ...model.execution import Execution
from ...scheduler import Scheduler
from .. import opsdata

__all__ = ["DEPTH_CAP", "Metrics"]

log = logging.getLogger("jobscheduler.http")

DEPTH_CAP = 10_000
LATENESS_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0)
# From a tenth of a second to a day: jobs run from moments to hours.
DURATION_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 86400.0)


class _Gauges(Collector):
    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def collect(self) -> Iterator[Metric]:
        scheduler = self._scheduler
        store = scheduler.state_store
        running = GaugeMetricFamily("jobscheduler_running", "Runs running on this node.")
        running.add_metric([], len(scheduler.executing))
        yield running
        depth = GaugeMetricFamily("jobscheduler_queue_depth", "Pending rows in the queue.")
        depth.add_metric([], store.pending_count(limit=DEPTH_CAP))
        yield depth
        ages = GaugeMetricFamily(
            "jobscheduler_node_heartbeat_age_seconds",
            "Seconds since each node's last heartbeat.",
            labels=["node", "state"],
        )
        skews = GaugeMetricFamily(
            "jobscheduler_clock_skew_seconds",
            "Seconds each live node's clock is ahead of the database's.",
            labels=["node"],
        )
        now = store.now()
        for node in store.nodes():
            if node.heartbeat is not None:
                lost = node.lost_since(now, opsdata.DEFAULT_LEASE) is not None
                state = "lost" if lost else node.state
                ages.add_metric([node.name, state], (now - node.heartbeat).total_seconds())
            if node.state == "up" and node.clock_skew is not None:
                skews.add_metric([node.name], node.clock_skew)
        yield ages
        yield skews
        alerts = GaugeMetricFamily(
            "jobscheduler_alerts_pending", "Alerts waiting to be delivered by this node."
        )
        alerts.add_metric([], alerts_pending(scheduler))
        yield alerts


def alerts_pending(scheduler: Scheduler) -> int:
    """Alerts this node still has to deliver (its outbox)."""
    # The Scheduler has no public view of its outbox yet: read the handlers' one.
    return len(scheduler._handlers.outbox.pending())


class Metrics:
    """The server's metrics; `observe` is given every finished run."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._runs = Counter(
            "jobscheduler_runs",
            "Runs ended on this node, by job and outcome.",
            ["job", "outcome"],
            registry=self.registry,
        )
        self._lateness = Histogram(
            "jobscheduler_lateness_seconds",
            "How long after its slot a scheduled run started.",
            buckets=LATENESS_BUCKETS,
            registry=self.registry,
        )
        self._durations = Histogram(
            "jobscheduler_run_duration_seconds",
            "How long the runs that ended on this node ran, by job.",
            ["job"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_Gauges(scheduler))

    def observe(self, execution: Execution) -> None:
        event = execution.event
        outcome = (
            "succeeded"
            if event is Event.SUCCESSFUL
            else "not_started"
            if event is Event.NOT_STARTED
            else "failed"
        )
        self._runs.labels(execution.job_name, outcome).inc()
        if event is not Event.NOT_STARTED and execution.duration is not None:
            self._durations.labels(execution.job_name).observe(execution.duration)
        if execution.slot is not None and event is not Event.NOT_STARTED:
            late = (execution.started - execution.slot).total_seconds()
            self._lateness.observe(max(late, 0.0))

    def render(self) -> bytes:
        return generate_latest(self.registry)
