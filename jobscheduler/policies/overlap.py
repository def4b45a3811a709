"""The `overlap` policy: what a scheduled slot does when it comes while its job is busy.

A job is *busy* when its runs queued or running reach its instance limit (`max_instances`,
or 1 without one). A job whose `overlap` is ``allow`` (the default) never gets here: the
engine asks `on_busy` only for a busy job with another policy, so the policy costs a job
without one nothing.

- ``skip``: the slot is not run. It is reported as NOT_STARTED with the reason `SKIPPED`
  (the one marker the scheduler looks for): the scheduler records it in state ``skipped``,
  with no event and no alert.
- ``queue``: the first such slot waits (one run, *held* by the engine, off its ready runs)
  until a run of the job ends; slots coming while one waits are skipped.
- ``replace``: the running runs of the job are stopped with the reason `REPLACED` (TERM,
  then KILL after the job's `kill_grace`, as `stop_job` does: each ends FAILED, reason
  "replaced"), and the slot's run is held until they have ended; slots coming meanwhile are
  skipped.

Nodes sharing a store in other processes decide the same over the job's live runs on every
node, in the claim's transaction (`cluster.limits`), with one waiting slot per job for the
whole cluster kept in the store, and the runs a ``replace`` stops told why through the
store's kill requests (whose reason is `REPLACED`; the replacing node logs which slot
replaced them); on such a store the engine leaves these slots to
their claims. The decisions here are the engine's, over its own runs, which is the whole of
it for one process alone on its store.

The engine keeps the held runs (`engine.timeline`): a held run starts when a run of its job
has been reported, or when the job's next slot is dispatched and finds it idle; a held run
of a job removed or paused meanwhile ends NOT_STARTED ("job removed", "job paused").
"""

from __future__ import annotations

from typing import Final, Literal

from ..model.job import Job

__all__ = [
    "HOLD",
    "REPLACE",
    "REPLACED",
    "SKIP",
    "SKIPPED",
    "is_busy",
    "limited",
    "on_busy",
    "waits",
]

SKIPPED: Final = "skipped: the job was still running (overlap)"
"""The reason of a slot skipped by `overlap` (compared by identity: the marker itself)."""

REPLACED: Final = "replaced"
"""The stop reason of the runs a ``replace`` slot stops."""


SKIP: Final = "skip"
HOLD: Final = "hold"
REPLACE: Final = "replace"
Action = Literal["skip", "hold", "replace"]


def limited(job: Job) -> bool:
    """Whether `job` has a limit on its runs at once: ``max_instances``, or an `overlap`
    other than ``allow``. Such a job's runs are counted over every node sharing a SQL store
    in the claim's transaction (`cluster.limits`): its slots are claimed ahead only while the
    job has room on every node (`engine.ahead`)."""
    return job.max_instances is not None or job.overlap != "allow"


def waits(job: Job) -> bool:
    """Whether a slot of `job` that finds it busy waits for it (``queue``, ``replace``)
    rather than being skipped or refused at once: on a shared store its claim may wait for
    the job's runs on other nodes, so it is claimed alone, never in a batch of others."""
    return job.overlap == "queue" or job.overlap == "replace"


def is_busy(job: Job, running: int) -> bool:
    """Whether `job`, with `running` runs queued or running, has reached its limit."""
    limit = job.max_instances
    return running >= (limit if limit is not None else 1)


def on_busy(job: Job, holding: bool) -> Action:
    """What a scheduled slot of the busy `job` (its policy is not ``allow``) does: `SKIP` it,
    `HOLD` its run until the job is idle, or `REPLACE` (hold it and stop the running runs).
    `holding`: a run of the job is held already (then the slot is skipped)."""
    if job.overlap == "skip" or holding:
        return SKIP
    return REPLACE if job.overlap == "replace" else HOLD
