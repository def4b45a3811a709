"""The commands that work against a live cluster, through its state store: ``status``,
``history``, ``kill``, ``submit`` (see docs/operations.md, "The command line").

Each reads the store named by ``--state URL`` (default: ``$JOBSCHEDULER_STATE``, else the
SQLite file beside CONFIG: ``jobs.yaml`` → ``jobs.state.db``), so it works from any machine
that reaches the store, whether or not a daemon runs there. Output is for people unless
``--json`` is given. Bad input (an unknown job or run id, a paused job, a full queue, a store
that cannot be reached) is one line on stderr and exit code 2, with nothing changed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model.catalog import Catalog
    from ..state.base import StateStore

__all__ = ["COMMANDS", "add_commands", "dispatch"]

COMMANDS = ("status", "history", "kill", "submit", "logs")
FOLLOW_POLL = 0.25  # seconds between two reads of a followed run (its output: once a second)

Command = Callable[..., argparse.ArgumentParser]


def add_commands(command: Command) -> None:
    """Add the commands to the parser (`command(name, help=...)` makes a sub-parser)."""

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("config", type=Path)
        sub.add_argument(
            "--state",
            metavar="URL",
            help="the state store (default: $JOBSCHEDULER_STATE, else CONFIG's .state.db)",
        )
        sub.add_argument("--json", action="store_true", help="print JSON for scripts")

    status = command("status", help="nodes, running runs, next runs, recent failures")
    common(status)
    history = command("history", help="the runs the state store keeps, newest first")
    common(history)
    history.add_argument("job", nargs="?")
    history.add_argument("-n", type=int, default=20, help="how many runs (default 20)")
    kill = command("kill", help="stop a running job (every run of JOB, or run --run ID)")
    common(kill)
    kill.add_argument("job", nargs="?")
    kill.add_argument("--run", metavar="ID", help="the run id to stop")
    submit = command("submit", help="queue an on-demand run of a job, for any node")
    common(submit)
    submit.add_argument("job")
    submit.add_argument(
        "--arg", action="append", default=[], metavar="K=V", help="an argument (text)"
    )
    submit.add_argument("--priority", type=int, default=None)
    logs = command("logs", help="a run's output: RUN_ID, or JOB's latest run")
    common(logs)
    logs.add_argument("run", metavar="RUN_ID|JOB")
    logs.add_argument(
        "-f", "--follow", action="store_true", help="go on printing it until the run ends"
    )


def dispatch(args: argparse.Namespace) -> int:
    """Run one of `COMMANDS`; its exit code."""
    from ..config.load import load_config
    from ..errors import JobActionError
    from . import opsdata

    if args.command == "kill" and (args.job is None) == (args.run is None):
        raise JobActionError("kill: give a JOB or --run ID (one of them)")
    if args.command == "history" and args.n < 0:
        raise JobActionError("-n must not be negative")
    pairs = _pairs(args.arg) if args.command == "submit" else None
    catalog = load_config(args.config)
    store = opsdata.open_existing(opsdata.state_url(args.config, args.state))
    try:
        if args.command == "status":
            return _status(store, catalog, args.json)
        if args.command == "history":
            return _history(store, args.job, args.n, args.json)
        if args.command == "logs":
            return _logs(store, args.run, args.follow, args.json)
        if args.command == "kill":
            reached = opsdata.kill(store, catalog, job=args.job, run_id=args.run)
            what = f"run {args.run}" if args.run else args.job
            _say(args.json, {"requested": reached}, f"kill requested: {reached} run(s) of {what}")
            return 0
        queue_id = opsdata.submit(store, catalog, args.job, pairs, priority=args.priority)
        _say(args.json, {"queue_id": queue_id}, f"submitted {args.job}: queue id {queue_id}")
        return 0
    finally:
        store.close()


def _pairs(pairs: list[str]) -> dict[str, Any] | None:
    from ..errors import JobActionError

    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise JobActionError(f"--arg: expected K=V, got {pair!r}")
        values[key] = value
    return values or None


def _json(data: Any, indent: int | None = None) -> str:
    import json  # for --json only: the module is imported by every command to build the parser

    return json.dumps(data, indent=indent)


def _say(as_json: bool, data: dict[str, Any], text: str) -> None:
    print(_json(data) if as_json else text)


def _status(store: StateStore, catalog: Catalog, as_json: bool) -> int:
    from ..clock import SystemClock
    from . import opsdata

    data = opsdata.status(store, catalog, SystemClock().now())
    if as_json:
        print(_json(data, indent=2))
        return 0
    print(f"nodes ({len(data['nodes'])}):")
    for node in data["nodes"]:
        age = node["heartbeat_age"]
        beat = "-" if age is None else f"{age:.1f} s ago"
        state = node["state"]
        if state == "lost":
            state = f"lost since {node['lost_since']} (lease expired, awaiting takeover)"
        digest = node["definitions_digest"]
        defs = "" if digest is None else f"  definitions {digest[:12]}"
        if node["definitions_match"] is False:
            defs += " (differ)"
        skew = node["clock_skew"]
        clock = "" if skew is None else f"  clock {skew:+.1f} s"
        if node["clock_past_limit"]:
            clock += " (past the limit: claims no scheduled slot)"
        print(
            f"  {node['name']}  {state}  host {node['host']} pid {node['pid']}  "
            f"heartbeat {beat}  {node['max_workers']} workers{defs}{clock}"
        )
    definitions = data["definitions"]
    if not definitions["same"]:
        print(f"definitions differ: {definitions['digests']} versions among the live nodes")
    if definitions["some_nodes_only"]:
        print("jobs defined on some nodes only:")
        for entry in definitions["some_nodes_only"]:
            print(
                f"  {entry['job']}  on {', '.join(entry['on'])}"
                f"  not on {', '.join(entry['not_on'])}"
            )
    print(f"running ({len(data['running'])}):")
    for run in data["running"]:
        waiting = "  awaiting takeover (node lost)" if run["awaiting_takeover"] else ""
        print(
            f"  {run['job']}  run {run['run_id']}  on {run['node']}  since {run['started']}"
            f"  ({run['elapsed']:.1f} s){waiting}"
        )
    if data["waiting"]:
        print(f"waiting ({len(data['waiting'])}):")
        for wait in data["waiting"]:
            what = "rerun" if wait["trigger"] == "rerun" else "slot"
            lost = "  awaiting takeover (node lost)" if wait["awaiting_takeover"] else ""
            print(
                f"  {wait['job']}  {what} {wait['slot'] or '-'}  on {wait['node']}"
                f"  since {wait['since']}  ({wait['waited']:.1f} s)  {wait['reason']}{lost}"
            )
    print("next runs:")
    for entry in data["next"]:
        print(f"  {entry['at']}  {entry['job']}")
    print(f"recent failures ({len(data['failures'])}, last 24 h):")
    for run in data["failures"]:
        reason = f"  {run['reason']}" if run["reason"] else ""
        print(f"  {run['started']}  {run['job']}  {run['state']}{reason}")
    print(f"queue: {len(data['queue'])} pending")
    if data["paused"]:
        print(f"paused ({len(data['paused'])}):")
        for pause in data["paused"]:
            until = pause["until"] or "resumed"
            note = f"  {pause['note']}" if pause["note"] else ""
            print(
                f"  {pause['job']}  by {pause['node'] or '-'}  since {pause['paused_at']}"
                f"  until {until}{note}"
            )
    return 0


def _history(store: StateStore, job: str | None, count: int, as_json: bool) -> int:
    from . import opsdata

    records = [opsdata.record_json(r) for r in store.history(job, limit=count)]
    if as_json:
        print(_json(records, indent=2))
        return 0
    rows = [("STARTED", "JOB", "STATE", "DURATION", "TRIGGER", "NODE", "EXIT", "REASON")]
    for r in records:
        code = "" if r["exit_code"] is None else str(r["exit_code"])
        took = "" if r["duration"] is None else f"{r['duration']:.3f}s"
        rows.append(
            (
                r["started"],
                r["job"],
                r["state"],
                took,
                r["trigger"],
                r["node"],
                code,
                r["reason"] or "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _logs(store: StateStore, wanted: str, follow: bool, as_json: bool) -> int:
    """Print the output of run `wanted`, or of job `wanted`'s latest run; with `follow`, then
    what it prints until it ends (read from the store, where it arrives once a second)."""
    from ..clock import SystemClock
    from . import opsdata

    clock = SystemClock()
    record = opsdata.find_run(store, wanted)
    if as_json and not follow:
        print(_json({**opsdata.record_json(record), "output": record.output_tail}))
        return 0
    shown = record.output_tail
    sys.stdout.write(shown)
    sys.stdout.flush()
    while follow and not record.state.finished:
        clock.sleep(FOLLOW_POLL)
        latest = store.run(record.run_id)
        if latest is None:  # pruned meanwhile
            break
        record = latest
        part = opsdata.new_output(shown, record.output_tail)
        if part:
            sys.stdout.write(part)
            sys.stdout.flush()
        shown = record.output_tail
    if follow:
        print(f"[run {record.run_id} {record.state}]", file=sys.stderr)
    return 0
