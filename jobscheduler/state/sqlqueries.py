"""The SQL stores' queries, read from ``.sql`` files of named queries once, at import.

The files:

- ``sql/queries.sql``: the queries every engine runs alike;
- ``sql/<engine>/queries.sql`` (``sqlite``, ``postgres``): the engine's own queries (those
  written differently there: PostgreSQL's batches of rows in one JSON parameter) and its
  *fragments*, the expressions the shared queries name in braces: ``{now}`` (the store's
  clock), ``{greatest}``, ``{waited}`` (seconds a queue row has waited), ``{skip_locked}``;
- beside them, ``sql/<engine>/NNN_*.sql``: the schema, applied by ``sqlmigrate.py``.

A block starts with ``-- name: NAME`` (a query) or ``-- fragment: NAME``; lines starting with
``--`` are comments, dropped; a final ``;`` is dropped. Parameters are named and written
``%(name)s`` (psycopg's style); for SQLite they become ``:name`` when loaded. A few queries
have a list written in when called (``{rows}``, ``{jobs}``, ``{ids}``, ``{cases}``: see
each). Every name must be one of `SHARED` (in the shared file) or `OWN` (in the engine's),
each once: a name repeated, unknown or missing is a `QueryFileError` naming the file, at
import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["OWN", "QUERIES", "SHARED", "SQL_FOLDER", "QueryFileError", "load", "param", "parse"]

# The package's own folder (as the status page's templates are found): importlib.resources
# would also read a zipped package, at the price of tempfile and zipfile in every program
# that opens a store (``jobscheduler status``), and jobscheduler is never run from a zip.
SQL_FOLDER = Path(__file__).parent / "sql"

SHARED = frozenset(
    {
        "now",
        # runs
        "claim",
        "claim_within",
        "live_runs",
        "drop_stale_waiting",
        "wait_in_line",
        "waiting_slot",
        "leave_line",
        "wait_for_room",
        "leave_room_line",
        "waiting_runs",
        "waiting_runs_of_job",
        "abandon_waiting",
        "drop_node_waiting",
        "drop_node_waiting_reruns",
        "finish",
        "release",
        "record",
        "abandon",
        "history",
        "history_of_job",
        "history_since",
        "history_of_job_since",
        "history_in_state",
        "history_of_job_in_state",
        "history_since_in_state",
        "history_of_job_since_in_state",
        "run",
        "set_output",
        "set_process",
        "processes",
        # nodes
        "join",
        "node",
        "heartbeat",
        "beat",
        "leave",
        "nodes",
        "expired_nodes",
        "node_dead",
        "set_definitions",
        # marks
        "mark",
        "marks",
        "set_mark",
        "set_marks",
        # pauses
        "pauses",
        "pause_of",
        "pause_version",
        "pause",
        "resume",
        "resume_all",
        "reset_failures",
        "reset_all_failures",
        "bump_pause_version",
        "make_mark",
        "set_failures",
        "failures_of",
        # the queue
        "submit",
        "look",
        "any_pending",
        "take_candidates",
        "take_rows",
        "take_limited_live",
        "put_back",
        "refuse_row",
        "settle",
        "settle_pending",
        "pending_before",
        "queue_requeue_node",
        "queue_fail_node",
        "queue_rows",
        "queue_rows_in_state",
        "pending_count",
        # the outbox
        "hold_alert",
        "due_alerts",
        "any_due",
        "hold_for",
        "alert_sent",
        "alert_failed",
        # kill requests
        "request_kill",
        "kill_requests",
        "kill_done",
        # retention
        "prune_runs",
        "prune_queue",
        "prune_kills",
        "prune_nodes",
        "prune_pauses",
    }
)
#: Each engine's own queries.
OWN: dict[str, frozenset[str]] = {
    "sqlite": frozenset(),
    "postgres": frozenset(
        {
            "claim_rows",
            "finish_rows",
            "lock_jobs",
            "set_marks_rows",
            "settle_rows",
            "within_rows",
            "submit_notify",
            "submit_rows",
            "submit_taken",
            "lock_failures",
            "lock_take_jobs",
        }
    ),
}
FRAGMENTS = frozenset({"now", "greatest", "waited", "skip_locked"})
# Written in by the caller: see the queries that hold them.
LISTS = frozenset({"rows", "jobs", "ids", "cases"})

_HEADER = re.compile(r"^--\s*(name|fragment)\s*:\s*(.*?)\s*$")
_WORD = re.compile(r"^[a-z][a-z0-9_]*$")
_BRACES = re.compile(r"\{([^{}]*)\}")
_PARAM = re.compile(r"%\(([a-z][a-z0-9_]*)\)s")


class QueryFileError(RuntimeError):
    """A query file is malformed: a block repeated, unknown, missing or empty."""


def parse(text: str, source: str) -> tuple[dict[str, str], dict[str, str]]:
    """The queries and the fragments of one file's `text`, by name; `source` names it in
    errors."""
    blocks: dict[str, dict[str, str]] = {"name": {}, "fragment": {}}
    kind: str | None = None
    name = ""
    lines: list[str] = []

    def close() -> None:
        if kind is None:
            return
        body = "\n".join(lines).strip().removesuffix(";").strip()
        if not body and kind == "name":
            raise QueryFileError(f"{source}: query {name!r} is empty")
        blocks[kind][name] = body

    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            close()
            kind, name, lines = header.group(1), header.group(2), []
            if not _WORD.match(name):
                raise QueryFileError(f"{source}, line {number}: {name!r} is not a name")
            if name in blocks[kind]:
                raise QueryFileError(f"{source}, line {number}: {kind} {name!r} is defined twice")
        elif kind is not None and not line.lstrip().startswith("--"):
            lines.append(line)
    close()
    return blocks["name"], blocks["fragment"]


def param(engine: str, name: str) -> str:
    """The placeholder of parameter `name` in `engine`'s SQL."""
    return f":{name}" if engine == "sqlite" else f"%({name})s"


def load(engine: str, shared: str | None = None, own: str | None = None) -> dict[str, str]:
    """`engine`'s queries by name, fragments filled in and parameters in its style; from the
    package's files, or from the texts `shared` and `own` if given (tests)."""
    folder = SQL_FOLDER
    if shared is None:
        shared = folder.joinpath("queries.sql").read_text(encoding="utf-8")
    if own is None:
        own = folder.joinpath(engine, "queries.sql").read_text(encoding="utf-8")
    common, stray = parse(shared, "sql/queries.sql")
    if stray:
        raise QueryFileError(f"sql/queries.sql: fragments belong in sql/<engine>/: {sorted(stray)}")
    source = f"sql/{engine}/queries.sql"
    mine, fragments = parse(own, source)
    _expect(common.keys(), SHARED, "sql/queries.sql", "query")
    _expect(mine.keys(), OWN[engine], source, "query")
    _expect(fragments.keys(), FRAGMENTS, source, "fragment")
    for name, body in list(fragments.items()):  # a fragment may use another
        fragments[name] = _BRACES.sub(lambda m: fragments.get(m.group(1), m.group(0)), body)
    queries: dict[str, str] = {}
    for name, body in {**common, **mine}.items():
        unknown = {m for m in _BRACES.findall(body) if m not in FRAGMENTS | LISTS}
        if unknown:
            raise QueryFileError(f"query {name!r}: unknown {{{sorted(unknown)[0]}}}")
        body = _BRACES.sub(lambda m: fragments.get(m.group(1), m.group(0)), body)
        if engine == "sqlite":
            body = _PARAM.sub(r":\1", body)
        queries[name] = body
    return queries


def _expect(found: Iterable[str], wanted: frozenset[str], source: str, kind: str) -> None:
    names = set(found)
    if names - wanted:
        raise QueryFileError(f"{source}: unknown {kind} {sorted(names - wanted)[0]!r}")
    if wanted - names:
        raise QueryFileError(f"{source}: no {kind} {sorted(wanted - names)[0]!r}")


#: Every engine's queries, by engine and name.
QUERIES: dict[str, dict[str, str]] = {engine: load(engine) for engine in OWN}
