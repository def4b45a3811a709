"""The value objects of the state store beside `RunRecord`: nodes, marks, queued runs, alerts.

Each is frozen and holds aware UTC datetimes; every store returns the same fields.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from itertools import islice
from typing import Any, Final, Literal, TypeVar

__all__ = [
    "AGING",
    "BUSY",
    "CLAIMED",
    "DEFAULT_HISTORY_LIMIT",
    "KEEP",
    "MAX_ARGS_SIZE",
    "MAX_JSON_DEPTH",
    "NODE_STATES",
    "QUEUE_FINAL",
    "QUEUE_STATES",
    "SKIPPED_BY_LIMIT",
    "TAKEN",
    "WAITING",
    "Beat",
    "JobMark",
    "JobPause",
    "Keep",
    "Look",
    "NodeInfo",
    "PendingAlert",
    "QueuedRun",
    "TakeClaims",
    "WaitingRun",
    "Within",
    "args_json",
    "args_of",
    "host_matches",
    "jobs_json",
    "jobs_of",
    "json_depth",
    "load_json",
    "lowest_caps",
    "read_args",
    "within",
]

T = TypeVar("T")

# A node is "up" from `join` until `leave` ("left") or a `take_over` ("dead").
NODE_STATES: Final = frozenset({"up", "left", "dead"})

# A queued run goes pending -> running -> succeeded | failed | not_started.
QUEUE_STATES: Final = frozenset({"pending", "running", "succeeded", "failed", "not_started"})
QUEUE_FINAL: Final = frozenset({"succeeded", "failed", "not_started"})

# `RunStore.claim_within`'s answers: the run is this node's (inserted ``running``); its key or
# run id is taken (another node has the slot); the job is at its limit and nothing was
# written; the job is at its limit and the slot's ``skipped`` record was written instead;
# `RunStore.wait_in_line`'s: the slot is the job's one waiting slot; and (`claim_many_within`
# with ``yielding``) another transaction holds the job's lock and nothing was written.
Within = Literal["claimed", "taken", "busy", "skipped", "waiting", "locked"]
CLAIMED: Final = "claimed"
TAKEN: Final = "taken"
BUSY: Final = "busy"
SKIPPED_BY_LIMIT: Final = "skipped"
WAITING: Final = "waiting"
LOCKED: Final = "locked"

# Aging of the queue: a pending row gains one priority point per this many seconds waited,
# so a steady stream of high-priority rows cannot starve a low one forever.
AGING: Final = 60.0

# The finished runs a memory store keeps unless told otherwise (here, not in `memory`, so that
# `open_store` names it without importing the memory store).
DEFAULT_HISTORY_LIMIT: Final = 1000

# JSON that reaches the scheduler (a run's arguments, a request's body) nests at most this
# deep: a run's arguments are plain data, and deeper values are refused before they reach
# code that copies, stores or renders them recursively (Python's decoder itself gives up
# near 1,000 levels with a `RecursionError`).
MAX_JSON_DEPTH: Final = 64

# A run's arguments, as the JSON text of its queue row, hold at most this many bytes (UTF-8).
MAX_ARGS_SIZE: Final = 64 * 1024


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
      ``dead`` (taken over). An ``up`` node whose heartbeat is older than its `lease` is
      lost: it is taken over by the next node that looks (`lost_since`).
    - `lease`: the node's lease (None: a node that did not say, written by an older
      version); `definitions_digest`: the digest of its job definitions
      (`cluster.digest.definitions_digest`) and `defined_jobs`, the names of the jobs it
      defines, sorted (both None: not published).
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
    lease: timedelta | None = None
    definitions_digest: str | None = None
    defined_jobs: tuple[str, ...] | None = None
    clock_skew: float | None = None

    def lost_since(self, now: datetime, default_lease: timedelta) -> datetime | None:
        """When this ``up`` node's lease expired, if it has by `now` (the store's clock);
        None while it lives, or once it left or was taken over. `default_lease` stands for a
        lease the node did not publish."""
        if self.state != "up" or self.heartbeat is None:
            return None
        ends = self.heartbeat + (self.lease if self.lease is not None else default_lease)
        return ends if ends < now else None


@dataclass(frozen=True, kw_only=True)
class Beat:
    """What a node's heartbeat (`StateStore.beat`) found, besides the renewal itself.

    - `alive`: the lease was renewed (as `heartbeat` says; False: the node is dead, and the
      other fields are 0 and False).
    - `expired`: how many *other* nodes are still ``up`` with a lease older than the one
      given; `neighbours`: how many other ``up`` nodes share this node's host (their pids
      are checked on the spot). Both 0: there is nobody to take over.
    - `alerts_due`: the outbox holds an alert whose next attempt is due.
    - `stale_rows`: the queue holds a pending row submitted more than the lease ago (it may
      be of a job no live node defines: the node then looks, `NodeKeeper`).
    - `clock`: the database's clock at the beat, to measure the node's clock skew against;
      None where the store has no clock of its own (the memory store) or it is this
      machine's (SQLite).
    """

    alive: bool
    expired: int = 0
    neighbours: int = 0
    alerts_due: bool = False
    stale_rows: bool = False
    clock: datetime | None = field(default=None, compare=False)  # differs every beat


@dataclass(frozen=True, kw_only=True)
class Look:
    """What a node's look at the store (`StateStore.look`) found: `pending`, a pending queue
    row it may take (one of its jobs, the row's host pattern matching it), and `kills`, an
    open kill request for one of its runs. `jobs`: the jobs of those rows (None: not told,
    the pending rows being too many to list; compared only when `pending`)."""

    pending: bool
    kills: bool
    jobs: frozenset[str] | None = field(default=None, compare=False)


@dataclass(frozen=True, kw_only=True)
class JobMark:
    """Per job: the last slot handled (`last_slot`, never moving backwards), the count of
    consecutive `failures`, and why it is paused (`paused_reason`; None: not paused)."""

    job: str
    last_slot: datetime | None = None
    failures: int = 0
    paused_reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class JobPause:
    """A job's pause, shared by every node of the store: who paused it (`node`: a node's
    name, the CLI's ``cli@HOST``, or empty for a pause older than the record of who), when
    (`paused_at`), a `note` (why; a pause by failures says "paused after N consecutive
    failures") and `until` (None: until resumed). A pause whose `until` has come is no longer
    in force, on every node, without anyone writing it."""

    job: str
    node: str
    paused_at: datetime
    note: str | None = None
    until: datetime | None = None

    def in_force(self, now: datetime) -> bool:
        """Whether the pause holds at `now` (aware)."""
        return self.until is None or now < self.until

    def lets_count(self, at: datetime, started: datetime | None) -> bool:
        """Whether, beside this pause of its job, the outcome at `at` of a run that started
        at `started` (None: not known) counts toward ``pause_after_failures``: not while the
        pause is in force, nor for a run started before the pause was made, or at its very
        instant (a run of the streak that paused the job), once it has ended."""
        return not self.in_force(at) and (started is None or started > self.paused_at)

    def as_dict(self) -> dict[str, Any]:
        """The pause as JSON data (instants in ISO 8601, UTC): for `status --json` and the
        API."""
        return {
            "node": self.node,
            "paused_at": self.paused_at.isoformat(),
            "note": self.note,
            "until": None if self.until is None else self.until.isoformat(),
        }


@dataclass(frozen=True, kw_only=True)
class WaitingRun:
    """A run waiting, in a worker of `node` since `since`, for its busy job (`waiting_runs`).

    `trigger` ``schedule``: the job's one waiting slot for the cluster (``overlap: queue`` or
    ``replace``, `RunStore.wait_in_line`), waiting until the job is idle on every node and
    counted as a live run by every other claim of the job; ``rerun``: a rerun after a node
    loss waiting for room under the job's limit (`RunStore.wait_for_room`), counted by no
    claim. `run_id` is the id its run gets once it claims; `attempt` is the run's."""

    job: str
    slot: datetime | None
    run_id: str
    node: str
    since: datetime
    trigger: str = "schedule"
    attempt: int = 1


@dataclass(frozen=True, kw_only=True)
class QueuedRun:
    """A run asked for on demand (`submit`, the CLI, or an SQL insert into the queue table).

    `args` is the decoded JSON object (None: none, or arguments that cannot be read: see
    `read_args`); `host` a pattern of the nodes that may run it (None: any); `state` goes
    ``pending`` → ``running`` (taken by `node`) → ``succeeded`` | ``failed`` |
    ``not_started``; `run_id` links it to its run record: from the take when the take
    claimed its run (`TakeClaims`), else once settled. `reason` says why a
    row ended ``not_started`` without a run (its arguments could not be read). `attempt`: 1,
    and one more each time the row went back to the queue because its node was lost while
    it ran (``on_node_loss: rerun``).
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
    reason: str | None = None
    attempt: int = 1


@dataclass(frozen=True, kw_only=True)
class TakeClaims:
    """The runs a `take` claims with its rows (`QueueStore.take`), so that a submitted run
    costs one commit between its row and its start, not two.

    Each row taken ``running`` whose job is one of `jobs` has its run claimed in the take's
    transaction, as `claim` would claim it (trigger ``"submit"``, no slot, the taking node,
    the row's attempt, `started`), under the next unused id of `run_ids` (made by the
    caller, at least as many as the take's `limit`), and the row's `run_id` is set to it.
    A row refused for its arguments claims nothing. `jobs` leaves out the jobs whose runs
    are claimed under a limit by their worker (``max_instances``, ``overlap``)."""

    jobs: Collection[str]
    run_ids: Sequence[str]
    started: datetime


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


def json_depth(value: Any) -> int:
    """How deep `value` nests (a scalar: 0, ``{}``: 1), walked without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            deepest = max(deepest, level)
            continue
        deepest = max(deepest, level + 1)
        stack.extend((child, level + 1) for child in item)
    return deepest


def load_json(text: str | bytes) -> Any:
    """The JSON value of `text`, nested at most `MAX_JSON_DEPTH` levels. A `ValueError`
    whose text completes "… is " otherwise: ``not valid JSON: …``, ``nested deeper than 64
    levels``."""
    try:
        value = json.loads(text)
    except RecursionError:  # the decoder's own bound, far past ours
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # a JSONDecodeError, or bytes that are no UTF-8
        raise ValueError(f"not valid JSON: {exc}") from None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def args_json(args: dict[str, Any] | None) -> str | None:
    """`args` as the JSON text a queue row holds; a `TypeError` if it is no JSON object, a
    `ValueError` if it nests deeper than `MAX_JSON_DEPTH` or its text is larger than
    `MAX_ARGS_SIZE` bytes."""
    if args is None:
        return None
    if not isinstance(args, dict):
        raise TypeError(f"args must be a dict (a JSON object) or None, not {args!r}")
    if json_depth(args) > MAX_JSON_DEPTH:
        raise ValueError(f"args are nested deeper than {MAX_JSON_DEPTH} levels")
    text = json.dumps(args, sort_keys=True)
    if _size(text) > MAX_ARGS_SIZE:
        raise ValueError(f"args are larger than {MAX_ARGS_SIZE} bytes as JSON")
    return text


def read_args(text: object) -> dict[str, Any] | None:
    """The args of a queue row's `args` column, checked: another program may have written
    anything there. None for none (NULL, empty text); a JSON object as it is; any other JSON
    value as ``{"value": ...}``. A `ValueError` with the reason (text, not a traceback) for
    what no run can be given: text larger than `MAX_ARGS_SIZE` bytes, text that is no JSON,
    JSON nested deeper than `MAX_JSON_DEPTH`, a value of another type (SQLite keeps what it
    is given)."""
    if text is None or text == "":
        return None
    if isinstance(text, bytes | bytearray | memoryview):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("the arguments are not valid JSON: not UTF-8 text") from None
    if not isinstance(text, str):
        raise ValueError(f"the arguments are no JSON text but a {type(text).__name__}")
    if _size(text) > MAX_ARGS_SIZE:
        raise ValueError(f"the arguments are larger than {MAX_ARGS_SIZE} bytes")
    try:
        value = load_json(text)
    except ValueError as exc:
        raise ValueError(f"the arguments are {exc}") from None
    if isinstance(value, dict):
        return value
    return None if value is None else {"value": value}


def args_of(text: object) -> dict[str, Any] | None:
    """The args of a queue row for showing it (`read_args`; None for arguments it refuses:
    the row ends ``not_started`` with the reason when a node takes it)."""
    try:
        return read_args(text)
    except ValueError:
        return None


def _size(text: str) -> int:
    """Bytes of `text` in UTF-8 (encoded only when its length leaves a doubt)."""
    if len(text) * 4 <= MAX_ARGS_SIZE:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def within(
    rows: Iterable[T], limit: int, most: Mapping[str, int], job_of: Callable[[T], str]
) -> list[T]:
    """The first `limit` of `rows` (in order), at most ``most[job]`` of each job named in
    `most`: a take's choice among the rows it may take."""
    if not most:
        return list(islice(rows, limit))
    counts: dict[str, int] = {}
    chosen: list[T] = []
    for row in rows:
        if len(chosen) >= limit:
            break
        job = job_of(row)
        cap = most.get(job)
        if cap is not None:
            if counts.get(job, 0) >= cap:
                continue
            counts[job] = counts.get(job, 0) + 1
        chosen.append(row)
    return chosen


def lowest_caps(most: Mapping[str, int], room: Mapping[str, int]) -> dict[str, int]:
    """The most rows of each job a take may pick (`within`'s `most`): the lower of `most`
    (the node's own bound) and `room` (what the job's limit still allows over every node);
    a job named in one of them only has that one's number."""
    caps = dict(most)
    for name, free in room.items():
        caps[name] = min(free, caps.get(name, free))
    return caps


def host_matches(pattern: str | None, node: str, hostname: str | None) -> bool:
    """Whether a queue row's `host` pattern lets `node` (on `hostname`) take it."""
    if pattern is None or pattern == "":
        return True
    return fnmatchcase(node, pattern) or (hostname is not None and fnmatchcase(hostname, pattern))


def jobs_json(jobs: Sequence[str] | None) -> str | None:
    """A node's job names as the JSON array its row holds (None: not published)."""
    return None if jobs is None else json.dumps(list(jobs))


def jobs_of(text: str | None) -> tuple[str, ...] | None:
    """A node's job names from its row (None: not published, or not a JSON array of text)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        return None
    return tuple(value)
