"""``jobscheduler backfill CONFIG JOB --from T --to T [--reprocess missing|failed|all]
[--dry-run] [--max-parallel N] [--yes] [--state URL] [--json]``.

The command runs the backfill itself, as a node of the cluster's state store of its own
(``backfill-HOST-PID``): it claims each slot there, so the daemons and other backfills
never run a slot it runs, and it ends when its runs ended. The job is defined in this node
paused, so nothing else of it is scheduled here. Times without a zone are read in the job's
``timezone``. Bad input is one line on stderr, exit 2, nothing run; exit 1 when a run it
made did not succeed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime

    from ..cluster.backfill import SlotDecision

# What only the command itself needs (errors, sockets, JSON, dates) is imported when it runs:
# every other command of the command line imports this module to build its parser.

__all__ = ["add_command", "run"]

Command = Callable[..., argparse.ArgumentParser]


def add_command(command: Command) -> None:
    sub = command("backfill", help="run a job's slots in a range of time (--dry-run: only say)")
    sub.add_argument("config", type=Path)
    sub.add_argument("job")
    sub.add_argument("--from", dest="start", required=True, metavar="T", help="first time")
    sub.add_argument("--to", dest="end", required=True, metavar="T", help="last time")
    sub.add_argument("--reprocess", choices=("missing", "failed", "all"), default="missing")
    sub.add_argument("--dry-run", action="store_true", help="list the slots, run nothing")
    sub.add_argument("--max-parallel", type=int, default=1, metavar="N")
    sub.add_argument("--yes", action="store_true", help="confirm a range over a year")
    sub.add_argument("--state", metavar="URL", help="the state store (as for status)")
    sub.add_argument("--json", action="store_true", help="print JSON for scripts")


def _time(text: str, option: str, zone_name: str | None) -> datetime:
    from datetime import datetime

    from ..errors import JobActionError
    from ..triggers.zones import localize, resolve_zone

    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise JobActionError(
            f"{option}: {text!r} is not a time (2026-01-31, 2026-01-31 02:00, or ISO 8601)"
        ) from None
    return value if value.tzinfo is not None else localize(value, resolve_zone(zone_name))


def run(args: argparse.Namespace) -> int:
    """Carry out the command; its exit code."""
    import os
    import socket

    from ..cluster.backfill import LongRangeError
    from ..config.load import load_config
    from ..errors import JobActionError
    from ..scheduler import Scheduler
    from . import opsdata

    catalog = load_config(args.config)
    job = catalog.job(args.job)
    start = _time(args.start, "--from", job.timezone)
    end = _time(args.end, "--to", job.timezone)
    url = opsdata.state_url(args.config, args.state)
    path = opsdata.sqlite_path(url)
    if path is not None and not path.is_file():
        raise JobActionError(
            f"no state store at {path}: start the daemon first, or give --state URL"
        )
    node = f"backfill-{socket.gethostname()}-{os.getpid()}"
    scheduler = Scheduler(state=url, node=node)
    try:
        scheduler.add_job(job.with_changes(enabled=False))  # run by the backfill only

        def backfill(dry_run: bool) -> list[SlotDecision]:
            return scheduler.backfill(
                job.name, start, end, reprocess=args.reprocess, dry_run=dry_run,
                max_parallel=args.max_parallel, yes=args.yes,
            )  # fmt: skip

        try:
            decisions = backfill(True)  # every check first: bad input runs nothing
        except LongRangeError as exc:
            raise exc.confirm_with("--yes") from None
        if not args.dry_run and any(d.action == "run" for d in decisions):
            scheduler.start()
            decisions = backfill(False)
    finally:
        scheduler.shutdown(wait=True)
    _print(decisions, args.json, args.dry_run)
    ran = not args.dry_run
    failed = [d for d in decisions if ran and d.action == "run" and d.state != "succeeded"]
    return 1 if failed else 0


def _print(decisions: list[SlotDecision], as_json: bool, dry_run: bool) -> None:
    if as_json:
        import json

        print(json.dumps([d.to_json() for d in decisions], indent=2))
        return
    for d in decisions:
        what = f"run (attempt {d.attempt})" if d.action == "run" else "skip"
        if d.action == "run" and dry_run:
            what = f"would run (attempt {d.attempt})"
        outcome = f" -> {d.outcome()}" if d.action == "run" and not dry_run else ""
        print(f"{d.slot.isoformat()}  {what}: {d.reason}{outcome}")
    runs = sum(1 for d in decisions if d.action == "run")
    print(f"{len(decisions)} slot(s), {runs} {'to run' if dry_run else 'run'}")
