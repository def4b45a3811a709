"""The value objects of the state store beside `RunRecord`: nodes, marks, queued runs, alerts.

Each is frozen and holds aware UTC datetimes; every store returns the same fields.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, Final

__all__ = [
    "AGING",
    "KEEP",
    "NODE_STATES",
    "QUEUE_FINAL",
    "QUEUE_STATES",
    "Beat",
    "JobMark",
    "Keep",
    "Look",
    "NodeInfo",
    "PendingAlert",
    "QueuedRun",
    "args_json",
    "args_of",
    "host_matches",
]

# A node is "up" from `join` until `leave` ("left") or a `take_over` ("dead").
NODE_STATES: Final = frozenset({"up", "left", "dead"})

# A queued run goes pending -> running -> succeeded | failed | not_started.
QUEUE_STATES: Final = frozenset({"pending", "running", "succeeded", "failed", "not_started"})
QUEUE_FINAL: Final = frozenset({"succeeded", "failed", "not_started"})

# Aging of the queue: a pending row gains one priority point per this many seconds waited,
# so a steady stream of high-priority rows cannot starve a low one forever.
AGING: Final = 60.0


class Keep(enum.Enum):
    """The type of `KEEP`: "leave this field of the mark as it is"."""

    KEEP = "keep"


KEEP: Final = Keep.KEEP


@dataclass(frozen=True, kw_only=True)
class NodeInfo:
    """A scheduler process sharing the store.

    - `name`: unique among live nodes; `host`: the machine's name; `pid` and
      `process_started` (the OS start time of the pid, seconds since the epoch: a recycled
      pid has another) tell whether the process still lives.
    - `started`: when the node joined; `heartbeat`: its last heartbeat on the *store's*
      clock (None in a `NodeInfo` not yet joined: `join` sets it).
    - `max_workers`: its worker count; `state`: ``up``, ``left`` (it said goodbye) or
      ``dead`` (taken over).
    - `clock_skew`: seconds its clock was ahead of the store's (negative: behind) as its last
      heartbeats measured it; None when not measured (SQLite: the database's clock is the
      machine's own; the memory store: the node's own clock).
    """

    name: str
    host: str
    pid: int
    process_started: float
    started: datetime
    heartbeat: datetime | None = None
    max_workers: int = 0
    state: str = "up"
    clock_skew: float | None = None


@dataclass(frozen=True, kw_only=True)
class Beat:
    """What a node's heartbeat (`StateStore.beat`) found, besides the renewal itself.

    - `alive`: the lease was renewed (as `heartbeat` says; False: the node is dead, and the
      other fields are 0 and False).
    - `expired`: how many *other* nodes are still ``up`` with a lease older than the one
      given; `neighbours`: how many other ``up`` nodes share this node's host (their pids
      are checked on the spot). Both 0: there is nobody to take over.
    - `alerts_due`: the outbox holds an alert whose next attempt is due.
    - `clock`: the database's clock at the beat, to measure the node's clock skew against;
      None where the store has no clock of its own (the memory store) or it is this
      machine's (SQLite).
    """

    alive: bool
    expired: int = 0
    neighbours: int = 0
    alerts_due: bool = False
    clock: datetime | None = field(default=None, compare=False)  # differs every beat


@dataclass(frozen=True, kw_only=True)
class Look:
    """What a node's look at the store (`StateStore.look`) found: `pending`, a pending queue
    row it may take (one of its jobs, the row's host pattern matching it), and `kills`, an
    open kill request for one of its runs."""

    pending: bool
    kills: bool


@dataclass(frozen=True, kw_only=True)
class JobMark:
    """Per job: the last slot handled (`last_slot`, never moving backwards), the count of
    consecutive `failures`, and why it is paused (`paused_reason`; None: not paused)."""

    job: str
    last_slot: datetime | None = None
    failures: int = 0
    paused_reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class QueuedRun:
    """A run asked for on demand (`submit`, the CLI, or an SQL insert into the queue table).

    `args` is the decoded JSON object (None: none); `host` a pattern of the nodes that may run
    it (None: any); `state` goes ``pending`` → ``running`` (taken by `node`) → ``succeeded``
    | ``failed`` | ``not_started``; `run_id` links it to its run record once settled.
    """

    id: int
    job: str
    args: dict[str, Any] | None
    priority: int
    host: str | None
    submitted: datetime
    state: str
    run_id: str | None = None
    node: str | None = None


@dataclass(frozen=True, kw_only=True)
class PendingAlert:
    """An alert not delivered yet: the mail `message` (RFC 5322 bytes) for `recipients`
    through mail server `server` (a key naming the SMTP settings), tried `attempts` times,
    due again at `next_attempt`, with the `last_error`."""

    id: int
    server: str
    message: bytes
    recipients: tuple[str, ...]
    attempts: int
    next_attempt: datetime
    created: datetime
    last_error: str | None = None


def args_json(args: dict[str, Any] | None) -> str | None:
    """`args` as the JSON text a queue row holds; a `TypeError` if it is no JSON object."""
    if args is None:
        return None
    if not isinstance(args, dict):
        raise TypeError(f"args must be a dict (a JSON object) or None, not {args!r}")
    return json.dumps(args, sort_keys=True)


def args_of(text: str | None) -> dict[str, Any] | None:
    """The args of a queue row's JSON text (another program may have written it: anything
    but a JSON object is given as ``{"value": ...}``, and text that is no JSON as
    ``{"text": ...}``, rather than lost)."""
    if text is None or text == "":
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return {"text": text}
    if isinstance(value, dict):
        return value
    return None if value is None else {"value": value}


def host_matches(pattern: str | None, node: str, hostname: str | None) -> bool:
    """Whether a queue row's `host` pattern lets `node` (on `hostname`) take it."""
    if pattern is None or pattern == "":
        return True
    return fnmatchcase(node, pattern) or (hostname is not None and fnmatchcase(hostname, pattern))
