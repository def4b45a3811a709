"""What the operations surfaces show and do, read from the state store (CLI and HTTP alike).

Every function here takes the store and the definitions (a `Catalog`) as values, so the
command line (another process, maybe another machine) and the HTTP server (inside the
daemon) give the same answers and refuse the same bad input:

- `OpsError` (a `JobActionError`): an unknown job or run id, a paused job, a full queue.
  Nothing was changed when it is raised.
- Datetimes are written as ISO 8601 in UTC (``2026-11-23T15:40:05.123456+00:00``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..clock import SKEW_LIMIT
from ..errors import JobActionError, Problem, UnknownNameError
from ..model.catalog import Catalog
from ..model.job import Job
from ..model.jobschedule import describe_schedule
from ..state.base import StateStore, StoreError
from ..state.records import RunRecord, RunState
from ..state.urls import ENV_STATE, default_state_url
from ..state.values import JobPause, NodeInfo, QueuedRun, WaitingRun

__all__ = [
    "ENV_STATE",
    "OpsError",
    "find_run",
    "kill",
    "live_of_job",
    "new_output",
    "node_json",
    "nodes_view",
    "pause",
    "pause_for",
    "pauses_in_force",
    "queue_json",
    "record_json",
    "resume",
    "running_json",
    "schedule_text",
    "state_url",
    "status",
    "submit",
    "waiting_json",
    "waiting_view",
]

RECENT_FAILURES = 10
DEFAULT_LEASE = timedelta(seconds=15)
"""The lease of a node that did not publish its own (one of an older version): the default
lease of `cluster.node`, not imported from there so that `status` loads no engine."""
FAILED_STATES = frozenset({RunState.FAILED, RunState.ABANDONED, RunState.NOT_STARTED})


class OpsError(JobActionError):
    """Bad input to an operation (unknown run id, nothing to kill); nothing was changed."""


def state_url(config: Path, given: str | None) -> str:
    """The store the CLI and the daemon use (`state.urls.default_state_url`)."""
    url = default_state_url(config, given)
    assert url is not None  # there is a config file
    return url


def sqlite_path(url: str) -> Path | None:
    """The file a ``sqlite:///`` URL names (None for any other URL)."""
    if not url.startswith("sqlite:///"):
        return None
    return Path(url[len("sqlite:///") :])


def open_existing(url: str) -> StateStore:
    """The store at `url` for reading and asking; a SQLite file that does not exist is an
    error (no daemon has used it), not a new empty store."""
    from ..state.open import open_url

    path = sqlite_path(url)
    if path is not None and not path.is_file():
        raise StoreError(
            Problem(f"no state store at {path}: start the daemon first, or give --state URL")
        )
    return open_url(url)


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def record_json(record: RunRecord) -> dict[str, Any]:
    """A run record with its published field names (``history --json``, ``/api/history``)."""
    return {
        "run_id": record.run_id,
        "job": record.job,
        "slot": iso(record.slot),
        "trigger": str(record.trigger),
        "attempt": record.attempt,
        "node": record.node,
        "state": str(record.state),
        "started": iso(record.started),
        "ended": iso(record.ended),
        "duration": record.duration,
        "exit_code": record.exit_code,
        "reason": record.reason,
        "output_tail": record.output_tail,
    }


def find_run(store: StateStore, wanted: str) -> RunRecord:
    """Run `wanted`, or the latest run of the job named `wanted`; `OpsError` when neither
    is in the store."""
    record = store.run(wanted)
    if record is None:
        latest = store.history(wanted, limit=1)
        if not latest:
            raise OpsError(
                Problem(f"no run has the id {wanted!r}, and no job of that name has runs")
            )
        record = latest[0]
    return record


_PROBE = 16  # characters: the start of the new output looked for in what was printed


def new_output(shown: str, output: str) -> str:
    """What `output` (a run's output now) adds to `shown` (its output printed so far). The
    kept output is its last bytes, so once it is full its start moves on: `output` then
    starts inside `shown`, at the first place from which the rest of `shown` begins it (a
    run repeating the very same lines may so lose some); if nothing of `shown` is left, all
    of `output` is new."""
    if output.startswith(shown):
        return output[len(shown) :]
    probe = output[:_PROBE]
    start = shown.find(probe) if probe else -1
    while start >= 0:
        if output.startswith(shown[start:]):
            return output[len(shown) - start :]
        start = shown.find(probe, start + 1)
    for start in range(max(len(shown) - _PROBE, 0), len(shown)):  # overlaps under _PROBE
        if output.startswith(shown[start:]):
            return output[len(shown) - start :]
    return "\n[… output cut …]\n" + output


def node_json(
    node: NodeInfo,
    now: datetime,
    *,
    lost_since: datetime | None = None,
    matches: bool | None = None,
) -> dict[str, Any]:
    """A node as `status` and ``/api/nodes`` show it: `state` is ``lost`` (with
    `lost_since`) for an ``up`` node whose lease expired; `definitions_match` tells whether
    its definitions are those of the other live nodes (None: lost, gone, or not published)."""
    age = None if node.heartbeat is None else (now - node.heartbeat).total_seconds()
    return {
        "name": node.name,
        "host": node.host,
        "pid": node.pid,
        "state": "lost" if lost_since is not None else node.state,
        "lost_since": iso(lost_since),
        "started": iso(node.started),
        "heartbeat": iso(node.heartbeat),
        "heartbeat_age": age,
        "lease": None if node.lease is None else node.lease.total_seconds(),
        "max_workers": node.max_workers,
        "definitions_digest": node.definitions_digest,
        "defined_jobs": None if node.defined_jobs is None else len(node.defined_jobs),
        "definitions_match": matches,
        # Seconds ahead of the database's clock (None: not measured); past the limit the
        # node claims no scheduled slot (cluster/skew.py).
        "clock_skew": node.clock_skew,
        "clock_past_limit": node.clock_skew is not None and abs(node.clock_skew) > SKEW_LIMIT,
    }


def nodes_view(store: StateStore, now: datetime) -> dict[str, Any]:
    """The nodes (`node_json`) and how their definitions compare (read on the store's clock
    for leases): ``{"nodes": [...], "definitions": {...}}``.

    Only live nodes (``up``, lease not expired, digest published) are compared. A node's
    definitions match when its digest is the one most live nodes have, and strictly more
    nodes than any other digest (two nodes that differ: neither matches). `definitions`
    has `same` (every live node has one digest), `digests` (how many there are),
    `some_nodes_only` (each job defined on some live nodes only: ``{"job", "on",
    "not_on"}``, by name)."""
    nodes = store.nodes()
    store_now = store.now()
    lost = {n.name: n.lost_since(store_now, DEFAULT_LEASE) for n in nodes}
    live = [
        n
        for n in nodes
        if n.state == "up" and lost[n.name] is None and n.definitions_digest is not None
    ]
    counts: dict[str, int] = {}
    for n in live:
        assert n.definitions_digest is not None
        counts[n.definitions_digest] = counts.get(n.definitions_digest, 0) + 1
    ranked = sorted(counts.values(), reverse=True)
    top = ranked[0] if ranked else 0
    leading = {d for d, c in counts.items() if c == top} if ranked[1:2] != [top] else set()
    live_names = {n.name for n in live}
    shown = []
    for n in nodes:
        matches = (n.definitions_digest in leading) if n.name in live_names else None
        shown.append(node_json(n, now, lost_since=lost[n.name], matches=matches))
    defined: dict[str, list[str]] = {}
    for n in live:
        for job in n.defined_jobs or ():
            defined.setdefault(job, []).append(n.name)
    some = [
        {"job": job, "on": on, "not_on": sorted(live_names - set(on))}
        for job, on in sorted(defined.items())
        if len(on) < len(live)
    ]
    return {
        "nodes": shown,
        "definitions": {"same": len(counts) <= 1, "digests": len(counts), "some_nodes_only": some},
    }


def queue_json(row: QueuedRun) -> dict[str, Any]:
    return {
        "id": row.id,
        "job": row.job,
        "args": row.args,
        "priority": row.priority,
        "host": row.host,
        "submitted": iso(row.submitted),
        "state": row.state,
        "run_id": row.run_id,
        "node": row.node,
        "reason": row.reason,
        "attempt": row.attempt,
    }


def schedule_text(job: Job) -> str:
    """How a job is started, in a few words, as ``jobscheduler list`` says it."""
    return describe_schedule(job)


def running_runs(
    store: StateStore, job: str | None = None, *, limit: int = 1000
) -> list[RunRecord]:
    """The runs (of `job`, or of all) in state ``running``, newest first, at most `limit`
    (one indexed read: the store's running runs, however much history it keeps)."""
    return store.history(job, limit=limit, state=RunState.RUNNING)


def running_json(record: RunRecord, now: datetime, lost: set[str]) -> dict[str, Any]:
    """A running run as `status` and ``/api/jobs/NAME`` show it: its record, how long it has
    run, and whether its node is one of the `lost` (the run awaits takeover)."""
    return {
        **record_json(record),
        "elapsed": (now - record.started).total_seconds(),
        "awaiting_takeover": record.node in lost,
    }


def lost_nodes(store: StateStore) -> set[str]:
    """The nodes still ``up`` whose lease expired (on the store's clock): lost, awaiting
    takeover."""
    store_now = store.now()
    return {n.name for n in store.nodes() if n.lost_since(store_now, DEFAULT_LEASE) is not None}


def waiting_json(
    wait: WaitingRun, now: datetime, *, busy_on: list[str], lost: set[str]
) -> dict[str, Any]:
    """A run waiting for its busy job (`StateStore.waiting_runs`) as `status --json`, the
    API and the page show it: which slot (`trigger` ``schedule``: the job's one waiting slot
    for the cluster, ``overlap: queue`` or ``replace``; ``rerun``: a rerun after a node
    loss waiting for room under the job's limit), on which node, since when, and why
    (`busy_on`: the nodes the job runs on now, as far as its running runs show)."""
    on = f" (busy on {', '.join(busy_on)})" if busy_on else ""
    if wait.trigger == "rerun":
        reason = f"a rerun waiting for room under the job's limit{on}"
    else:
        reason = f"the job's waiting slot: runs once the job is idle on every node{on}"
    return {
        "job": wait.job,
        "slot": iso(wait.slot),
        "run_id": wait.run_id,
        "trigger": wait.trigger,
        "attempt": wait.attempt,
        "node": wait.node,
        "since": iso(wait.since),
        "waited": max((now - wait.since).total_seconds(), 0.0),
        "busy_on": busy_on,
        "reason": reason,
        "awaiting_takeover": wait.node in lost,
    }


def waiting_view(
    store: StateStore,
    now: datetime,
    running: Iterable[RunRecord],
    lost: set[str],
    job: str | None = None,
) -> list[dict[str, Any]]:
    """The runs waiting for their busy job (of `job`, or of all), oldest first
    (`waiting_json`), with the nodes `running` (the running runs read) shows their jobs on."""
    waits = store.waiting_runs(job)
    if not waits:
        return []
    busy: dict[str, set[str]] = {}
    for r in running:
        busy.setdefault(r.job, set()).add(r.node)
    return [waiting_json(w, now, busy_on=sorted(busy.get(w.job, ())), lost=lost) for w in waits]


def live_of_job(store: StateStore, name: str, now: datetime) -> dict[str, Any]:
    """Job `name`'s running runs and its runs waiting for it (``running`` and ``waiting``, as
    `status` shows them), for the job's page and ``/api/jobs/NAME``."""
    running = running_runs(store, name)
    lost = lost_nodes(store)
    return {
        "running": [running_json(r, now, lost) for r in running],
        "waiting": waiting_view(store, now, running, lost, name),
    }


def status(
    store: StateStore,
    catalog: Catalog,
    now: datetime,
    *,
    next_runs: Iterable[tuple[str, datetime | None]] | None = None,
    next_count: int = 10,
) -> dict[str, Any]:
    """Nodes (`nodes_view`: ``lost`` ones, definitions compared), running runs (those of a
    lost node `awaiting_takeover`), the runs waiting for their busy jobs (`waiting_view`),
    the next runs, recent failures and the pending queue.

    `next_runs` (job, when) come from a live scheduler; without them they are computed from
    the definitions (the next slot after `now` of each enabled job not paused). ``paused``:
    the pauses in force (job, who, when, note, until)."""
    paused = pauses_in_force(store, now)
    if next_runs is None:
        next_runs = (
            (j.name, j.next_after(now) if j.enabled and j.name not in paused else None)
            for j in catalog.jobs.values()
        )
    upcoming = sorted((when, name) for name, when in next_runs if when is not None)
    recent = store.history(limit=200, since=now - timedelta(days=1))
    view = nodes_view(store, now)
    lost = {n["name"] for n in view["nodes"] if n["state"] == "lost"}
    running = running_runs(store)
    return {
        "now": iso(now),
        "nodes": view["nodes"],
        "definitions": view["definitions"],
        "running": [running_json(r, now, lost) for r in running],
        "waiting": waiting_view(store, now, running, lost),
        "next": [{"job": name, "at": iso(when)} for when, name in upcoming[:next_count]],
        "failures": [record_json(r) for r in recent if r.state in FAILED_STATES][:RECENT_FAILURES],
        "queue": [queue_json(row) for row in store.queue(state="pending", limit=100)],
        "paused": [{"job": name, **p.as_dict()} for name, p in sorted(paused.items())],
    }


def pauses_in_force(store: StateStore, now: datetime) -> dict[str, JobPause]:
    """The pauses the store keeps that hold at `now`, by job."""
    return {name: p for name, p in store.pauses().items() if p.in_force(now)}


def pause_for(text: Any, key: str = "--for") -> timedelta:
    """A pause's length as the CLI's ``--for`` and the API's ``"for"`` give it: a duration
    with its unit (``90s``, ``2h``, ``1h30m``, ``1d``); `OpsError` for anything else."""
    from ..config.values import parse_unit_duration

    if not isinstance(text, str):
        raise OpsError(Problem(f"{key} must be a duration such as '2h', not {text!r}"))
    try:
        length = parse_unit_duration(text, key, units=("m", "h"))
    except ValueError as exc:
        raise OpsError(Problem(str(exc))) from None
    if length <= timedelta(0):
        raise OpsError(Problem(f"{key} must be above 0, not {text!r}"))
    return length


def pause(
    store: StateStore,
    catalog: Catalog,
    names: list[str] | None,
    *,
    node: str,
    now: datetime,
    note: str | None = None,
    length: timedelta | None = None,
) -> tuple[list[str], datetime | None]:
    """Pause `names` (None: every job of `catalog`) in the store, by `node` at `now`, with
    `note`, for `length` (None: until resumed); every node follows. Returns the jobs paused
    and the pause's end. `UnknownNameError` for a job `catalog` does not define."""
    if names is None:
        names = list(catalog.jobs)
    for name in names:
        catalog.job(name)
    if note is not None and not isinstance(note, str):
        raise OpsError(Problem(f"the note must be text, not {note!r}"))
    until = now + length if length is not None else None
    if names:
        store.pause(names, node=node, paused_at=now, note=note or None, until=until)
    return names, until


def resume(store: StateStore, catalog: Catalog, names: list[str] | None) -> list[str]:
    """End the pauses of `names` (None: every pause the store keeps) and their counts of
    failures; the jobs that had one. `UnknownNameError` for a job `catalog` does not define
    and the store has no pause of."""
    if names is not None:
        kept = store.pauses()
        for name in names:
            if name not in kept:
                catalog.job(name)
    return store.resume(names)


def check_submit(store: StateStore, catalog: Catalog, name: str, limit: int) -> Job:
    """The job a submit names, refused when unknown, disabled (``enabled: false``) or paused
    (a pause in force in the store), or when `limit` rows are pending already."""
    # Imported here: the engine is not needed by the commands that only read (status).
    from ..clock import SystemClock
    from ..cluster.queue import JobPausedError, QueueFullError

    job = catalog.job(name)
    pause = store.pause_of(name)
    if not job.enabled or (pause is not None and pause.in_force(SystemClock().now())):
        raise JobPausedError(Problem("the job is paused: resume it first", job=name))
    if store.pending_count(limit=limit) >= limit:
        raise QueueFullError(
            Problem(f"the queue is full: {limit} runs wait already; try later", job=name)
        )
    return job


def submit(
    store: StateStore,
    catalog: Catalog,
    name: str,
    args: dict[str, Any] | None,
    *,
    priority: int | None = None,
    limit: int | None = None,
) -> int:
    """Queue a run of `name` in the store, for whichever node takes it; its queue id.
    `limit`: how many pending rows make the queue full (None: the engine's default)."""
    if limit is None:
        from ..cluster.queue import DEFAULT_MAX_PENDING

        limit = DEFAULT_MAX_PENDING
    job = check_submit(store, catalog, name, limit)
    return store.submit(name, args, priority=job.priority if priority is None else priority)


def kill(
    store: StateStore, catalog: Catalog, *, job: str | None = None, run_id: str | None = None
) -> int:
    """Ask the node running run `run_id` (or every running run of `job`) to stop it; how many
    runs the request reached. `UnknownNameError` for a job neither defined nor running,
    `OpsError` for a run id the store does not know; 0 when it is known but not running."""
    if run_id is not None:
        reached = store.request_kill(run_id=run_id)
        if reached == 0 and not any(r.run_id == run_id for r in store.history(limit=100_000)):
            raise OpsError(Problem(f"no run has the id {run_id!r}"))
        return reached
    assert job is not None
    reached = store.request_kill(job=job)
    if reached == 0 and job not in catalog.jobs:
        raise UnknownNameError(Problem("no job has this name", job=job))
    return reached
