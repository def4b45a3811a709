"""The ``jobscheduler`` command.

Exit codes: 0 success; 2 a bad configuration file, a refused edit (duplicate or unknown name,
invalid value) or bad arguments; 1 anything else (and, for ``run-once``, a FAILED run; 3 a run
that did NOT_START). Errors are one line per problem on stderr, each naming the file, line,
job and key where known; ``--debug`` prints the traceback before them. An edit that is refused
leaves the file as it was.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import cli_backfill, cli_ops

if TYPE_CHECKING:
    from datetime import datetime

    from ..model.catalog import Catalog
    from ..model.job import Job
    from ..state.base import StoreError
    from ..state.values import JobPause

# A command imports what it needs when it runs (PEP 8's exception for start-up time): the
# command line answers --help, validate and status like a native tool. Even the errors (and
# with them dataclasses) are imported after the arguments are parsed: --help needs neither.

__all__ = ["main"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_STARTED = 3

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _terminal_columns() -> int:
    """The terminal's width as `shutil.get_terminal_size` finds it (``COLUMNS``, else the
    terminal of standard output, else 80), without importing shutil (and bz2 and lzma with
    it), which argparse's help formatter does for every parser and argument."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            width = _terminal_columns() - 2  # as argparse's own
        super().__init__(prog, indent_increment, max_help_position, width)


class _ArgumentParser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


class _Parser(_ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"jobscheduler: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


class _NotParsed(Exception):
    """A one-command parser met an error: the whole parser reports it."""


class _OneCommandParser(_ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _NotParsed(message)


class _Omitted(argparse.ArgumentParser):
    """Stands for the commands a one-command parser leaves out: their arguments are dropped."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        return argparse.Action([], argparse.SUPPRESS)


def _translate_once() -> None:
    """Have argparse look each of its texts up once. Building a parser, argparse asks gettext
    for the translation of every title and help text (``_("options")``…), and gettext
    searches the locale directories again at every call: a tenth of ``validate``'s own work.
    The answers cannot change within a process, so argparse's lookup is kept behind a cache
    (the same translations: gettext still answers each first time)."""
    lookup = getattr(argparse, "_", None)
    if lookup is not None and not hasattr(lookup, "cache_info"):
        argparse._ = functools.lru_cache(maxsize=None)(lookup)  # type: ignore[attr-defined]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """`argv` (default: ``sys.argv[1:]``) parsed. A command's arguments are parsed by a parser
    of that command alone: building every command's parser is most of the cost of parsing
    (argparse looks up a translation of each title). ``--help``, ``--version``, an unknown
    command and any error go to the whole parser, which prints what it always printed."""
    _translate_once()
    words = list(sys.argv[1:] if argv is None else argv)
    name = next((word for word in words if word != "--debug"), "-")
    if not name.startswith("-"):
        try:
            return build_parser(only=name).parse_args(words)
        except _NotParsed:
            pass
    return build_parser().parse_args(words)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with `only`, of that command alone (the others omitted,
    its errors raised as `_NotParsed`, not printed)."""
    parser_class = _Parser if only is None else _OneCommandParser
    parser = parser_class(prog="jobscheduler", description="Run and manage scheduled jobs.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--version", action="version", version=_version())
    # --debug is also accepted after the command; SUPPRESS keeps the subcommand from resetting
    # a --debug given before it.
    common = parser_class(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=parser_class)
    add_parser = commands.add_parser
    omitted = _Omitted(add_help=False)

    def command(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if only is not None and name != only:
            return omitted
        return add_parser(name, parents=[common], **kwargs)

    run = command("run", help="run the scheduler daemon in the foreground")
    run.add_argument("config", type=Path)
    run.add_argument("--max-workers", type=int, default=10)
    run.add_argument(
        "--node", default=None, help="this scheduler's node name (default: HOSTNAME-PID)"
    )
    run.add_argument(
        "--state",
        default=None,
        metavar="URL",
        help="state store: sqlite:///PATH, postgresql://USER@HOST/DB or memory (default: "
        "$JOBSCHEDULER_STATE, else CONFIG's name with .state.db beside it)",
    )
    run.add_argument(
        "--lease",
        type=float,
        default=None,
        metavar="SECONDS",
        help="this node's lease in the state store (default 15; heartbeats every third)",
    )
    run.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    run.add_argument("--log-file", type=Path, help="log here instead of stderr")
    run.add_argument("--http", metavar="HOST:PORT", help="serve the status page and API")
    run.add_argument("--token-env", metavar="NAME", help="the variable holding the HTTP token")

    validate = command("validate", help="check a configuration file")
    validate.add_argument("config", type=Path)

    listing = command("list", help="list the jobs of a configuration file")
    listing.add_argument("config", type=Path)
    listing.add_argument("--state", default=None, metavar="URL", help="where pauses are kept")

    upcoming = command("next", help="show the next slots of a job")
    upcoming.add_argument("config", type=Path)
    upcoming.add_argument("job")
    upcoming.add_argument("--state", default=None, metavar="URL", help="where pauses are kept")
    upcoming.add_argument("-n", type=int, default=5, help="how many slots (default 5)")

    add = command(
        "add",
        help="add a job: KEY=VALUE pairs with the file's keys and YAML values",
        description="Example: jobscheduler add jobs.yaml backup type=external "
        "command='[tar, czf, /tmp/b.tgz, /home]' start='2024-01-01 02:00' interval='1 day'",
    )
    add.add_argument("config", type=Path)
    add.add_argument("job")
    add.add_argument("settings", nargs="+", metavar="KEY=VALUE")

    modify = command("modify", help="change keys of a job (KEY=VALUE, or --unset KEY)")
    modify.add_argument("config", type=Path)
    modify.add_argument("job")
    modify.add_argument("settings", nargs="*", metavar="KEY=VALUE")
    modify.add_argument("--unset", action="append", default=[], metavar="KEY")

    remove = command("remove", help="remove a job")
    remove.add_argument("config", type=Path)
    remove.add_argument("job")

    pause = command(
        "pause",
        help="pause a job (or --all) on every node sharing the state store",
        description="The pause is kept in the state store (who, when, the note, until when); "
        "every daemon on it follows within 2 s. The YAML file is not changed.",
    )
    pause.add_argument("config", type=Path)
    pause.add_argument("job", nargs="?")
    pause.add_argument("--all", action="store_true", help="every job of the file")
    pause.add_argument("--note", default=None, metavar="TEXT", help="why (shown by status)")
    pause.add_argument(
        "--for", dest="length", default=None, metavar="DURATION", help="ends by itself: 30m, 2h"
    )
    pause.add_argument("--state", default=None, metavar="URL", help="the state store")
    resume = command("resume", help="end a job's pause (or --all), by hand or by failures")
    resume.add_argument("config", type=Path)
    resume.add_argument("job", nargs="?")
    resume.add_argument("--all", action="store_true", help="every pause in the store")
    resume.add_argument("--state", default=None, metavar="URL", help="the state store")

    once = command("run-once", help="run one job now, in the foreground")
    once.add_argument("config", type=Path)
    once.add_argument("job")
    cli_ops.add_commands(command)
    cli_backfill.add_command(command)
    return parser


def _version() -> str:
    from .. import __version__

    return f"jobscheduler {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command in `argv` (default: ``sys.argv[1:]``) and return its exit code.

    Bad arguments exit 2 from argparse (`SystemExit`). Every error is printed as one line per
    problem on stderr; ``--debug`` prints the traceback first, with the same exit code.
    """
    args = parse_args(argv)
    from ..errors import JobActionError

    try:
        return _dispatch(args)
    except JobActionError as exc:
        if args.debug:
            _print_traceback()
        for problem in exc.problems:
            print(f"jobscheduler: {_one_line(str(problem))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if args.debug:
            _print_traceback()
        print(f"jobscheduler: {type(exc).__name__}: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_ERROR


def _print_traceback() -> None:
    import traceback  # only for --debug: it imports the tokenizer and linecache

    traceback.print_exc()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _dispatch(args: argparse.Namespace) -> int:
    command: str = args.command
    if command == "run":
        return _run(args)
    if command == "validate":
        return _validate(args.config)
    if command == "list":
        return _list(args.config, args.state)
    if command == "next":
        return _next(args.config, args.job, args.n, args.state)
    if command in ("add", "modify"):
        return _edit(args)
    if command == "remove":
        return _simple_edit(command, args.config, args.job)
    if command in ("pause", "resume"):
        return _pause_or_resume(args)
    if command == "run-once":
        return _run_once(args.config, args.job)
    if command in cli_ops.COMMANDS:
        return cli_ops.dispatch(args)
    if command == "backfill":
        return cli_backfill.run(args)
    raise AssertionError(command)


def _load(path: Path) -> Catalog:
    from ..config.load import load_config  # not the package: its file store is not needed

    return load_config(path)


def _validate(path: Path) -> int:
    catalog = _load(path)
    print(f"{path}: OK, {len(catalog.jobs)} jobs, {len(catalog.groups)} groups")
    return EXIT_OK


def _pauses(path: Path, state: str | None, now: datetime) -> dict[str, JobPause]:
    """The pauses in force in the state store of `path` (as `status` finds it); none when
    that store does not exist yet, and none (with a warning on stderr) when it cannot be
    read: the definitions are still listed."""
    from ..errors import JobActionError
    from . import opsdata

    url = opsdata.state_url(path, state)
    where = opsdata.sqlite_path(url)
    if where is not None and not where.is_file():
        return {}
    try:
        store = opsdata.open_existing(url)
    except JobActionError as exc:
        print(f"jobscheduler: pauses not shown: {_one_line(str(exc))}", file=sys.stderr)
        return {}
    try:
        return opsdata.pauses_in_force(store, now)
    finally:
        store.close()


def _paused_text(pause: JobPause) -> str:
    until = f" until {pause.until.isoformat(timespec='seconds')}" if pause.until else ""
    return f"paused{until}"


def _list(path: Path, state: str | None = None) -> int:
    from ..clock import SystemClock
    from ..model.jobschedule import describe_schedule

    catalog = _load(path)
    now = SystemClock().now()
    paused = _pauses(path, state, now)
    rows = [("NAME", "TYPE", "SCHEDULE", "NEXT RUN", "ENABLED", "GROUPS")]
    for job in catalog.jobs.values():
        pause = paused.get(job.name)
        upcoming = job.next_after(now) if job.enabled and pause is None else None
        enabled = "no" if not job.enabled else "yes" if pause is None else _paused_text(pause)
        rows.append(
            (
                job.name,
                job.type.value,
                describe_schedule(job),
                upcoming.isoformat(timespec="seconds") if upcoming else "-",
                enabled,
                ",".join(g.name for g in catalog.groups_of(job.name)) or "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    return EXIT_OK


def _next(path: Path, name: str, count: int, state: str | None = None) -> int:
    from ..clock import SystemClock
    from ..errors import JobActionError
    from ..model.jobschedule import describe_schedule

    if count < 1:
        raise JobActionError("-n must be at least 1")
    job = _load(path).job(name)
    pause = _pauses(path, state, SystemClock().now()).get(name)
    if pause is not None:
        by = f" by {pause.node}" if pause.node else ""
        note = f" ({pause.note})" if pause.note else ""
        print(
            f"{name} is {_paused_text(pause)}{by} since "
            f"{pause.paused_at.isoformat(timespec='seconds')}{note}: its slots once resumed:"
        )
    if job.dependence is not None or job.on_demand:
        print(f"{name} has no schedule: it runs {describe_schedule(job)}")
        return EXIT_OK
    slots = job.slots_after(SystemClock().now(), count)
    if not slots:
        if job.schedule_kind == "once":
            print(f"{name} has no slot left: it ran {describe_schedule(job)}")
        else:
            print(f"{name} has no slot left (stop {job.stop.isoformat() if job.stop else '-'})")
    for slot in slots:
        print(slot.isoformat(timespec="seconds"))
    return EXIT_OK


def _parse_pairs(pairs: Sequence[str]) -> dict[str, Any]:
    """KEY=VALUE pairs, each VALUE read as YAML (``'[a, b]'`` a list, ``5`` a number; an
    empty VALUE is null)."""
    import yaml

    from ..errors import JobActionError

    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise JobActionError(f"expected KEY=VALUE, got {pair!r}")
        try:
            values[key.strip()] = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError as exc:
            reason = _one_line(str(exc))
            raise JobActionError(f"{key}: value {text!r} is not valid YAML: {reason}") from None
    return values


def _plain_document(catalog: Catalog) -> dict[str, Any]:
    """The catalog as plain YAML data (what the file would hold, without its comments)."""
    import yaml

    from ..config import dump_config

    document = yaml.safe_load(dump_config(catalog)) or {}
    assert isinstance(document, dict)
    if not isinstance(document.get("jobs"), dict):
        document["jobs"] = {}
    return document


def _job_from_settings(
    catalog: Catalog, name: str, settings: dict[str, Any], base_dir: Path
) -> Job:
    """Read `settings` exactly as the file's ``jobs.<name>`` entry would be read: the entry is
    checked within the whole configuration (dependences, groups, e-mail).

    Problems are reported without a file and line: the values came from the command line,
    and the line of the intermediate document would point nowhere useful.
    """
    from dataclasses import replace

    import yaml

    from ..config import parse_config
    from ..errors import JobActionError

    document = _plain_document(catalog)
    document["jobs"][name] = settings
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    try:
        return parse_config(text, filename="<command line>", base_dir=base_dir).job(name)
    except JobActionError as exc:
        problems = [replace(p, file=None, line=None) for p in exc.problems]
        raise type(exc)(problems) from None


def _edit(args: argparse.Namespace) -> int:
    from ..config import ConfigStore
    from ..errors import DuplicateNameError, JobActionError, Problem

    store = ConfigStore(args.config)
    catalog = store.read()
    base_dir = args.config.resolve().parent
    settings = _parse_pairs(args.settings)
    if args.command == "add":
        if args.job in catalog.jobs:
            raise DuplicateNameError(
                Problem("a job with this name exists already", job=args.job, key="name")
            )
        job = _job_from_settings(catalog, args.job, settings, base_dir)
        store.add_jobs([job])
        print(f"added {args.job}")
        return EXIT_OK
    catalog.job(args.job)  # UnknownNameError for a job that is not there
    if not settings and not args.unset:
        raise JobActionError("nothing to change: give KEY=VALUE pairs or --unset KEY")
    entry = dict(_plain_document(catalog)["jobs"][args.job])
    entry.update(settings)
    for key in args.unset:
        if key not in entry:
            raise JobActionError(Problem(f"no key {key!r} to unset", job=args.job, key=key))
        del entry[key]
    store.modify_job(_job_from_settings(catalog, args.job, entry, base_dir))
    print(f"modified {args.job}")
    return EXIT_OK


def _simple_edit(command: str, path: Path, name: str) -> int:
    from ..config import ConfigStore

    store = ConfigStore(path)
    store.read()
    store.remove_job(name)
    print(f"removed {name}")
    return EXIT_OK


def _pause_or_resume(args: argparse.Namespace) -> int:
    """``pause`` / ``resume``: the pauses in the state store (as `status` finds it); the
    YAML file is only read."""
    import socket

    from ..clock import SystemClock
    from ..errors import JobActionError
    from . import opsdata

    if (args.job is None) == (not args.all):
        raise JobActionError(f"{args.command}: give a JOB or --all (one of them)")
    length = opsdata.pause_for(args.length) if getattr(args, "length", None) else None
    catalog = _load(args.config)
    names = None if args.all else [args.job]
    if names is not None:
        catalog.job(args.job)  # UnknownNameError before the store is opened
    from ..state.open import open_url

    # A SQLite store not made yet is made (the daemon finds the pause when it starts).
    store = open_url(opsdata.state_url(args.config, args.state))
    try:
        if args.command == "resume":
            resumed = opsdata.resume(store, catalog, names)
            if names is not None and not resumed:
                print(f"{args.job} was not paused")
            else:
                print(f"resumed {', '.join(sorted(resumed)) or 'nothing (no pause)'}")
            return EXIT_OK
        _, until = opsdata.pause(
            store,
            catalog,
            names,
            node=f"cli@{socket.gethostname()}",
            now=SystemClock().now(),
            note=args.note,
            length=length,
        )
    finally:
        store.close()
    what = "every job" if args.all else args.job
    print(f"paused {what}" + (f" until {until.isoformat()}" if until is not None else ""))
    return EXIT_OK


def _run_once(path: Path, name: str) -> int:
    """Run job `name` once, now, whatever its schedule, dependence or ``enabled``.

    Ctrl-C (SIGINT) stops the run as the scheduler would (SIGTERM to its process group, then
    SIGKILL after its kill grace; ``stop()`` on an internal job) and reports it FAILED.
    """
    import threading

    from ..clock import SystemClock
    from ..model.event import Event
    from ..model.execution import Execution
    from ..model.runid import RunIds
    from ..runners.runner import RunContext, Runner

    job = _load(path).job(name)
    clock = SystemClock()
    runner = Runner(clock)
    context = RunContext(job, next(RunIds(clock.now)), None, "run_now")
    result: list[Execution] = []
    worker = threading.Thread(
        target=lambda: result.append(runner.execute(job, context)),
        name=f"run-once {name}",
        daemon=True,
    )
    try:
        worker.start()
        while worker.is_alive():
            try:
                worker.join(0.5)  # a timed join lets Ctrl-C through at once
            except KeyboardInterrupt:
                print(f"{name}: interrupted, stopping it", file=sys.stderr)
                context.stop("interrupted")
    finally:
        runner.close()
    execution = result[0]
    event = execution.event or Event.FAILED
    detail = f" ({execution.reason})" if execution.reason else ""
    print(f"{name}: {event.name}{detail}")
    if execution.duration is not None:
        code = "" if execution.exit_code is None else f", exit code {execution.exit_code}"
        print(f"took {execution.duration:.3f} s{code}")
    if execution.output_tail:
        print("--- output (tail) ---")
        print(execution.output_tail, end="" if execution.output_tail.endswith("\n") else "\n")
    if event is Event.SUCCESSFUL:
        return EXIT_OK
    return EXIT_NOT_STARTED if event is Event.NOT_STARTED else EXIT_ERROR


def _configure_logging(level: str, log_file: Path | None) -> None:
    import logging

    from ..errors import JobActionError

    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise JobActionError(f"unknown log level {level!r}")
    handler: logging.Handler
    try:
        handler = (
            logging.FileHandler(log_file, encoding="utf-8") if log_file else logging.StreamHandler()
        )
    except OSError as exc:
        raise JobActionError(f"--log-file {log_file}: {exc.strerror or exc}") from None
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)


def _run(args: argparse.Namespace) -> int:
    from ..errors import JobActionError
    from ..model.node import check_node_name
    from ..scheduler import Scheduler
    from ..state.base import StoreError
    from .daemon import Daemon

    if args.max_workers < 1:
        raise JobActionError("--max-workers must be at least 1")
    _configure_logging(args.log_level, args.log_file)
    if not args.config.is_file():
        raise JobActionError(f"{args.config}: no such configuration file")
    if args.node is not None:
        try:
            check_node_name(args.node)
        except ValueError as exc:
            raise JobActionError(f"--node: {exc}") from None
    if args.lease is not None and not args.lease > 0:
        raise JobActionError("--lease must be a positive number of seconds")
    http = _http_settings(args)  # checked before anything starts
    try:
        scheduler = Scheduler(
            args.config,
            node=args.node,
            max_workers=args.max_workers,
            state=args.state,
            lease=args.lease,
        )
    except StoreError as exc:  # unreachable, a newer schema, a read-only file: one line
        return _store_failed(exc)
    daemon = Daemon(scheduler)
    server = None
    if http is not None:
        from .http.server import serve_http

        server = serve_http(scheduler, *http)
    restore = daemon.install_signal_handlers()
    try:
        return daemon.run()
    except StoreError as exc:  # at start: the store went away, or the node name is taken
        scheduler.shutdown(wait=False)
        return _store_failed(exc)
    finally:
        restore()
        if server is not None:
            server.close()


def _http_settings(args: argparse.Namespace) -> tuple[str, int, str | None] | None:
    """``--http HOST:PORT`` and the token from ``--token-env NAME`` (see `http.security`)."""
    from .http.security import http_settings

    return http_settings(args.http, args.token_env)


def _store_failed(exc: StoreError) -> int:
    for problem in exc.problems:
        print(f"jobscheduler: {_one_line(str(problem))}", file=sys.stderr)
    return EXIT_ERROR
