"""The ``jobscheduler`` command: each subcommand, its exit codes and its messages.

Most tests call `main` in-process (capsys); a few run ``python -m jobscheduler`` and the console
script as real subprocesses, to see what a shell sees.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobscheduler.app import cli
from jobscheduler.app.cli import main
from jobscheduler.config import load_config

CONFIG = """\
# A comment that edits made by the command line must keep.
jobs:
  hello:
    command: [echo, hello from the job]
    start: 2024-01-01 00:00:00
    interval: 1 day
    timezone: UTC

  fail:
    command: [sh, -c, 'echo to stdout; echo to stderr >&2; exit 3']
    start: 2024-01-01 00:00:00
    interval: 1 hour
    timezone: UTC
    enabled: false

  missing:
    command: [/nonexistent/jobscheduler-test-command]
    start: 2024-01-01 00:00:00
    interval: 1 hour

  report:
    type: internal
    command: jobscheduler.examples:Report
    args: {{directory: "{data}", pattern: "*.txt"}}
    start: 2024-01-01 00:00:00
    interval: 1 week

  after-hello:
    command: [echo, after]
    dependence: {{job: hello, status: successful, delay: 5s}}

groups:
  team:
    jobs: [hello, after-hello]
"""

BAD_CONFIG = """\
jobs:
  a:
    command: [echo, a]
    start: 2024-01-01
    interval: 3 fortnights
  b:
    command: [echo, b]
    dependence: {job: nosuch}
  c:
    type: internal
    command: not-a-class
    start: 2024-01-01
    interval: 1 day
    timeout: -5
    colour: blue
"""

# (line, job, key) of each problem in BAD_CONFIG
BAD_PLACES = [
    (5, "a", "interval"),
    (8, "b", "dependence.job"),
    (11, "c", "command"),
    (14, "c", "timeout"),
    (15, "c", "colour"),
]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        (data / f"f{i}.txt").write_text("x" * 10)
    path = tmp_path / "jobs.yaml"
    path.write_text(CONFIG.format(data=data))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`main(argv)` → (exit code, stdout, stderr); argparse's SystemExit counts as a code."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def error_lines(err: str) -> list[str]:
    lines = err.splitlines()
    assert lines, "expected an error message on stderr"
    for line in lines:
        assert line.startswith("jobscheduler: "), line
    assert "Traceback" not in err
    return lines


def table(out: str) -> dict[str, dict[str, str]]:
    """The rows of the ``list`` table, by job name, as {column: cell}."""
    lines = out.splitlines()
    header = re.split(r"\s{2,}", lines[0].strip())
    rows: dict[str, dict[str, str]] = {}
    for line in lines[1:]:
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(header), line
        rows[cells[0]] = dict(zip(header, cells, strict=True))
    return rows


# -- validate ------------------------------------------------------------------------------------


def test_version_and_help_start_without_the_scheduler() -> None:
    """``--version`` and ``--help`` answer from a fresh process that imports no scheduler,
    engine, store or configuration module, not even the errors (and dataclasses with them):
    the command line starts like a native tool."""
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['jobscheduler', sys.argv[1]]\n"
        "try:\n"
        "    runpy.run_module('jobscheduler', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('jobscheduler.scheduler',\n"
        "    'jobscheduler.engine', 'jobscheduler.state', 'jobscheduler.config',\n"
        "    'jobscheduler.model', 'jobscheduler.errors', 'yaml', 'jinja2', 'dataclasses',\n"
        "    'json', 'socket', 'traceback')))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    for flag in ("--version", "--help"):
        done = subprocess.run(
            [sys.executable, "-c", probe, flag], capture_output=True, text=True, timeout=60
        )
        assert "HEAVY []" in done.stderr, done.stderr
        if flag == "--version":
            assert re.fullmatch(r"jobscheduler \d+\.\d+\.\d+\n", done.stdout)
        else:
            assert "validate" in done.stdout and "history" in done.stdout


# What a definition may need, each imported by the first definition that uses it: Jinja2 (an
# alert template), systemd's calendar parser, cron with cronsim, zoneinfo (a zone other than
# UTC), the e-mail package (an address) and settings (`email:`); the rest never by validate
# (a misspelt key's suggestions, the state stores, the engine, logging).
BY_USE = (
    "jinja2",
    "jobscheduler.triggers.calendar",
    "jobscheduler.triggers.cron",
    "cronsim",
    "zoneinfo",
    "email.utils",
    "jobscheduler.model.emailconfig",
)
NEVER_BY_VALIDATE = ("difflib", "jobscheduler.state", "jobscheduler.engine", "logging")


def test_validate_loads_only_what_the_file_needs(tmp_path: Path) -> None:
    """``validate`` of a file of UTC interval jobs without e-mail imports none of `BY_USE`;
    a file that uses each of them imports it (and still none of `NEVER_BY_VALIDATE`)."""
    plain = tmp_path / "plain.yaml"
    plain.write_text(
        "jobs:\n"
        "  a: {start: 2030-01-01 01:00:00, interval: 1 day, timezone: UTC, command: [true]}\n"
        "  b: {start: 2030-01-01 01:00:00, interval: 1 hour, timezone: UTC, command: [true]}\n"
    )
    rich = tmp_path / "rich.yaml"
    rich.write_text(
        "email: {from_address: scheduler@example.com}\n"
        "jobs:\n"
        "  a:\n"
        "    calendar: Mon..Fri 09:00\n"
        "    command: [true]\n"
        "    messages: {failed: {recipients: [ops@example.com], template: 'x {{ JobName }}'}}\n"
        "  b: {cron: '0 3 * * *', timezone: Europe/Berlin, command: [true]}\n"
    )
    probe = (
        "import sys, runpy\n"
        "watched = sys.argv[2].split()\n"
        "sys.argv = ['jobscheduler', 'validate', sys.argv[1]]\n"
        "try:\n"
        "    runpy.run_module('jobscheduler', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('LOADED', sorted(m for m in sys.modules if m in watched), file=sys.stderr)\n"
    )
    expected = {plain: "LOADED []", rich: f"LOADED {sorted(BY_USE)}"}
    for path, loaded in expected.items():
        done = subprocess.run(
            [sys.executable, "-c", probe, str(path), " ".join(BY_USE + NEVER_BY_VALIDATE)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "OK, 2 jobs" in done.stdout, done.stdout + done.stderr
        assert loaded in done.stderr, done.stderr


# What `validate` of a file of interval jobs without alerts leaves out, each a cost at every
# start: shutil (with bz2 and lzma: argparse's help formatter asks it the terminal's width),
# calendar (a leap year is one line), threading (a lock comes from _thread), the template
# reader and the address checks (a file without alerts), dataclasses and inspect (the model's
# value classes are made by `valueclass`), shlex (commands given as lists).
NOT_BY_PLAIN_VALIDATE = (
    "dataclasses",
    "inspect",
    "shlex",
    "shutil",
    "calendar",
    "threading",
    "jobscheduler.model.templatereader",
    "jobscheduler.model.addresses",
)


def test_validate_compiles_no_code_at_start(tmp_path: Path) -> None:
    """``validate`` of a plain file compiles no source text (a dataclass's methods, a
    NamedTuple's constructor: each a cost at every start, the first also warming up the
    compiler), while a bad file still gets its error at file, line, job and key."""
    plain = tmp_path / "plain.yaml"
    plain.write_text(
        "jobs:\n"
        "  a: {start: 2030-01-01 01:00:00, interval: 1 day, command: [true]}\n"
        "  b: {start: 2030-01-01 01:00:00, interval: 1 month, command: [true]}\n"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs:\n  a:\n    start: 2030-01-01 01:00:00\n    interval: 0 days\n")
    probe = (
        "import sys, runpy\n"
        "compiled = []\n"
        "def hook(event, args):\n"
        "    if event == 'compile' and str(args[1]).startswith('<'):  # text, not a module\n"
        "        compiled.append(str(args[0])[:60])\n"
        "sys.addaudithook(hook)\n"
        "sys.argv = ['jobscheduler', 'validate', sys.argv[1]]\n"
        "try:\n"
        "    runpy.run_module('jobscheduler', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('COMPILED', compiled, file=sys.stderr)\n"
    )
    runs = {
        path: subprocess.run(
            [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=60
        )
        for path in (plain, bad)
    }
    assert "OK, 2 jobs" in runs[plain].stdout, runs[plain].stdout + runs[plain].stderr
    assert "COMPILED []" in runs[plain].stderr, runs[plain].stderr
    where = f"jobscheduler: {bad}:4, job 'a', key 'interval': "
    assert where in runs[bad].stderr, runs[bad].stderr


def test_validate_leaves_out_what_a_plain_file_does_not_use(tmp_path: Path) -> None:
    """``validate`` of a plain file imports none of `NOT_BY_PLAIN_VALIDATE` (nor
    `NEVER_BY_VALIDATE`), and PyYAML's reader holds the pattern `yamlnodes` compiled for it;
    a file with an alert imports the address checks, and still reports a bad recipient at
    its file, line, job and key."""
    plain = tmp_path / "plain.yaml"
    plain.write_text(
        "jobs:\n"
        "  a: {start: 2030-01-01 01:00:00, interval: 1 day, command: [true]}\n"
        "  b: {start: 2030-01-01 01:00:00, interval: 1 month, command: [true]}\n"
    )
    alerting = tmp_path / "alerting.yaml"
    alerting.write_text(
        "jobs:\n"
        "  a:\n"
        "    start: 2030-01-01 01:00:00\n"
        "    interval: 1 day\n"
        "    command: [true]\n"
        "    messages: {failed: {recipients: ['ops@example.com, b@example.com']}}\n"
    )
    probe = (
        "import sys, runpy\n"
        "watched = sys.argv[2].split()\n"
        "sys.argv = ['jobscheduler', 'validate', sys.argv[1]]\n"
        "try:\n"
        "    runpy.run_module('jobscheduler', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "from jobscheduler.config import yamlnodes\n"
        "pattern = sys.modules['yaml.reader'].Reader.NON_PRINTABLE.pattern\n"
        "ours = pattern == yamlnodes._NOT_PRINTABLE\n"
        "print('LOADED', sorted(m for m in sys.modules if m in watched), ours, file=sys.stderr)\n"
    )
    watched = " ".join(NOT_BY_PLAIN_VALIDATE + NEVER_BY_VALIDATE)
    runs = {
        path: subprocess.run(
            [sys.executable, "-c", probe, str(path), watched],
            capture_output=True,
            text=True,
            timeout=60,
        )
        for path in (plain, alerting)
    }
    assert "OK, 2 jobs" in runs[plain].stdout, runs[plain].stdout + runs[plain].stderr
    assert "LOADED [] True" in runs[plain].stderr, runs[plain].stderr
    alert_run = runs[alerting]
    assert "'jobscheduler.model.addresses'" in alert_run.stderr, alert_run.stderr
    where = f"jobscheduler: {alerting}:6, job 'a', key 'messages.failed.recipients': recipient"
    assert where in alert_run.stderr, alert_run.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "jobs.yaml"],
        ["--debug", "validate", "jobs.yaml"],
        ["validate", "--debug", "jobs.yaml"],
        ["next", "jobs.yaml", "a", "-n", "3"],
        ["status", "jobs.yaml", "--state", "memory", "--json"],
        ["backfill", "jobs.yaml", "a", "--from", "2026-01-01", "--to", "2026-01-02"],
        ["submit", "jobs.yaml", "a", "--arg", "k=v", "--arg", "x=y"],
        ["validate"],  # errors: printed by the whole parser
        ["validate", "a", "b"],
        ["next", "jobs.yaml", "a", "-n", "x"],
        ["nosuch", "jobs.yaml"],
        ["--deb", "validate", "jobs.yaml"],
        ["validate", "-h"],
        ["--help"],
        [],
    ],
)
def test_one_command_parser_parses_as_the_whole_parser(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """`cli.parse_args` builds the parser of the command given alone: the namespace, the
    messages and the exit code are the whole parser's."""

    def outcome(parse: Any) -> tuple[object, str, str]:
        try:
            result: object = vars(parse(argv))
        except SystemExit as exc:
            result = ("exit", exc.code)
        out, err = capsys.readouterr()
        return result, out, err

    whole = outcome(cli.build_parser().parse_args)
    assert outcome(cli.parse_args) == whole
    assert whole[1] or whole[2] or whole[0]["command"] in argv  # parsed, or said why not


def test_validate_ok(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    code, out, err = run(capsys, "validate", str(config))
    assert code == 0
    assert out.strip() == f"{config}: OK, 5 jobs, 1 groups"
    assert err == ""


def test_validate_reports_every_problem_with_its_place(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_CONFIG)
    code, out, err = run(capsys, "validate", str(bad))
    assert code == 2
    assert out == ""
    lines = error_lines(err)
    assert len(lines) == len(BAD_PLACES)
    for line, (number, job, key) in zip(lines, BAD_PLACES, strict=True):
        assert line.startswith(f"jobscheduler: {bad}:{number}, job {job!r}, key {key!r}: "), line
    assert "fortnights" in lines[0]
    assert "nosuch" in lines[1]
    assert "colour" in lines[4]


def test_validate_yaml_syntax_error_and_missing_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("jobs:\n  a: [\n")
    code, _, err = run(capsys, "validate", str(broken))
    assert code == 2
    [line] = error_lines(err)
    assert re.match(rf"jobscheduler: {re.escape(str(broken))}:\d+: YAML syntax", line), line

    code, _, err = run(capsys, "validate", str(tmp_path / "absent.yaml"))
    assert code == 2
    [line] = error_lines(err)
    assert "absent.yaml" in line and "no such file" in line


# -- list and next -------------------------------------------------------------------------------


def test_list_shows_a_table_of_jobs(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    code, out, err = run(capsys, "list", str(config))
    assert code == 0 and err == ""
    assert out.splitlines()[0].split() == [
        "NAME",
        "TYPE",
        "SCHEDULE",
        "NEXT",
        "RUN",
        "ENABLED",
        "GROUPS",
    ]
    rows = table(out)
    assert list(rows) == ["hello", "fail", "missing", "report", "after-hello"]
    hello = rows["hello"]
    assert hello["TYPE"] == "external"
    assert hello["SCHEDULE"] == "every 1 day from 2024-01-01T00:00:00+00:00"
    assert hello["ENABLED"] == "yes"
    assert hello["GROUPS"] == "team"
    next_run = datetime.fromisoformat(hello["NEXT RUN"])
    now = datetime.now(UTC)
    assert now - timedelta(seconds=5) < next_run <= now + timedelta(days=1)
    assert (next_run.hour, next_run.minute, next_run.second) == (0, 0, 0)
    assert rows["fail"]["ENABLED"] == "no"
    assert rows["fail"]["NEXT RUN"] == "-"
    assert rows["fail"]["GROUPS"] == "-"
    assert rows["report"]["TYPE"] == "internal"
    assert rows["after-hello"]["SCHEDULE"] == "after hello successful +5s"
    assert rows["after-hello"]["NEXT RUN"] == "-"
    assert rows["after-hello"]["GROUPS"] == "team"


def test_next_prints_the_next_slots(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    before = datetime.now(UTC)
    code, out, err = run(capsys, "next", str(config), "hello", "-n", "3")
    assert code == 0 and err == ""
    slots = [datetime.fromisoformat(line) for line in out.splitlines()]
    assert len(slots) == 3
    assert before - timedelta(seconds=5) < slots[0] <= before + timedelta(days=1)
    assert all(s.utcoffset() == timedelta(0) for s in slots)
    assert (slots[0].hour, slots[0].minute, slots[0].second) == (0, 0, 0)
    assert [b - a for a, b in itertools.pairwise(slots)] == [timedelta(days=1)] * 2

    code, out, _ = run(capsys, "next", str(config), "hello")
    assert code == 0 and len(out.splitlines()) == 5  # the default

    code, out, _ = run(capsys, "next", str(config), "after-hello")
    assert code == 0
    assert out.strip() == "after-hello has no schedule: it runs after hello successful +5s"


def test_next_errors(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    code, out, err = run(capsys, "next", str(config), "nosuch")
    assert code == 2 and out == ""
    assert error_lines(err) == ["jobscheduler: job 'nosuch': no job has this name"]
    code, _, err = run(capsys, "next", str(config), "hello", "-n", "0")
    assert code == 2
    assert error_lines(err) == ["jobscheduler: -n must be at least 1"]


# -- add, modify, remove, pause, resume ----------------------------------------------------------


def test_add_writes_the_job_and_keeps_comments(
    capsys: pytest.CaptureFixture[str], config: Path
) -> None:
    code, out, err = run(
        capsys,
        "add",
        str(config),
        "backup",
        "command=[tar, czf, /tmp/b.tgz, /home]",
        "start=2024-01-01 02:00",
        "interval=6 hours",
        "timezone=Europe/Berlin",
        "max_instances=1",
    )
    assert (code, out, err) == (0, "added backup\n", "")
    text = config.read_text()
    assert text.startswith("# A comment that edits made by the command line must keep.")
    job = load_config(config).job("backup")
    assert job.command == ("tar", "czf", "/tmp/b.tgz", "/home")
    assert str(job.interval) == "6 hours"
    assert job.max_instances == 1
    assert job.start is not None and job.start.isoformat() == "2024-01-01T02:00:00+01:00"
    code, out, _ = run(capsys, "list", str(config))
    assert "backup" in table(out)


def test_add_a_dependent_job(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    code, _, err = run(
        capsys,
        "add",
        str(config),
        "cleanup",
        "command=[echo, clean]",
        "dependence={job: hello, status: both, delay: 2s}",
    )
    assert code == 0, err
    dependence = load_config(config).job("cleanup").dependence
    assert dependence is not None
    assert (dependence.job_name, str(dependence.event)) == ("hello", "both")
    assert dependence.delay == timedelta(seconds=2)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["hello", "command=[echo, again]", "start=2024-01-01", "interval=1 day"],
            "jobscheduler: job 'hello', key 'name': a job with this name exists already",
        ),
        (
            ["new", "command=[echo]", "start=2024-01-01", "interval=1 fortnight"],
            "jobscheduler: job 'new', key 'interval': unknown interval unit 'fortnight'",
        ),
        (
            ["new", "command=[echo]", "start=2024-01-01", "interval=1 day", "colour=blue"],
            "jobscheduler: job 'new', key 'colour': unknown key 'colour'",
        ),
        (
            ["new", "command=[echo]", "dependence={job: nosuch}"],
            "jobscheduler: job 'new', key 'dependence.job': depends on unknown job 'nosuch'",
        ),
        (
            ["new", "command=[echo]", "start=2024-01-01", "interval=1 day", "timeout=-3"],
            "jobscheduler: job 'new', key 'timeout': timeout must be above 0",
        ),
        (["new", "command"], "jobscheduler: expected KEY=VALUE, got 'command'"),
        (["new", "command=[echo"], "jobscheduler: command: value '[echo' is not valid YAML"),
    ],
)
def test_add_refused_leaves_the_file_unchanged(
    capsys: pytest.CaptureFixture[str], config: Path, argv: list[str], expected: str
) -> None:
    before = config.read_bytes()
    code, out, err = run(capsys, "add", str(config), *argv)
    assert code == 2
    assert out == ""
    [line] = error_lines(err)
    assert line.startswith(expected), line
    assert "<command line>" not in line
    assert config.read_bytes() == before


def test_modify_changes_keys_and_unsets_them(
    capsys: pytest.CaptureFixture[str], config: Path
) -> None:
    code, out, err = run(capsys, "modify", str(config), "hello", "interval=2 days", "priority=7")
    assert (code, out, err) == (0, "modified hello\n", "")
    job = load_config(config).job("hello")
    assert (str(job.interval), job.priority, job.command) == (
        "2 days",
        7,
        ("echo", "hello from the job"),
    )
    code, _, err = run(capsys, "modify", str(config), "hello", "--unset", "priority")
    assert code == 0, err
    assert load_config(config).job("hello").priority == 0
    assert config.read_text().startswith("# A comment")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["nosuch", "priority=1"], "jobscheduler: job 'nosuch': no job has this name"),
        (["hello", "interval=soon"], "jobscheduler: job 'hello', key 'interval': "),
        (["hello", "colour=red"], "jobscheduler: job 'hello', key 'colour': unknown key"),
        (["hello", "--unset", "colour"], "jobscheduler: job 'hello', key 'colour': no key"),
        # (without interval it would be a one-off, which is valid: issue 18)
        (["hello", "--unset", "start"], "jobscheduler: job 'hello', key 'start': "),
        (["hello"], "jobscheduler: nothing to change"),
    ],
)
def test_modify_refused_leaves_the_file_unchanged(
    capsys: pytest.CaptureFixture[str], config: Path, argv: list[str], expected: str
) -> None:
    before = config.read_bytes()
    code, out, err = run(capsys, "modify", str(config), *argv)
    assert code == 2 and out == ""
    [line] = error_lines(err)
    assert line.startswith(expected), line
    assert config.read_bytes() == before


def test_remove(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    code, out, err = run(capsys, "remove", str(config), "missing")
    assert (code, out, err) == (0, "removed missing\n", "")
    assert "missing" not in load_config(config).jobs

    before = config.read_bytes()
    code, out, err = run(capsys, "remove", str(config), "missing")
    assert code == 2 and out == ""
    assert error_lines(err) == ["jobscheduler: job 'missing': no job has this name"]

    # hello has a dependent: refused, with its name, file unchanged
    code, out, err = run(capsys, "remove", str(config), "hello")
    assert code == 2 and out == ""
    [line] = error_lines(err)
    assert line.startswith("jobscheduler: job 'hello': cannot remove")
    assert "'after-hello'" in line
    assert config.read_bytes() == before

    # after-hello is in the group team with hello: removed, and the group keeps hello
    code, out, err = run(capsys, "remove", str(config), "after-hello")
    assert (code, out, err) == (0, "removed after-hello\n", "")
    assert load_config(config).groups["team"].job_names == ("hello",)


def test_pause_and_resume(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    before = config.read_bytes()
    code, out, err = run(capsys, "pause", str(config), "hello", "--note", "deploy")
    assert (code, out, err) == (0, "paused hello\n", "")
    assert config.read_bytes() == before  # kept in the state store, not in the file
    assert load_config(config).job("hello").enabled is True
    code, out, _ = run(capsys, "list", str(config))
    assert table(out)["hello"]["ENABLED"] == "paused"
    assert table(out)["hello"]["NEXT RUN"] == "-"
    code, out, _ = run(capsys, "next", str(config), "hello", "-n", "1")
    assert out.startswith("hello is paused by cli@") and "(deploy)" in out.splitlines()[0]

    code, out, err = run(capsys, "resume", str(config), "hello")
    assert (code, out, err) == (0, "resumed hello\n", "")
    assert config.read_bytes() == before
    code, out, _ = run(capsys, "list", str(config))
    assert table(out)["hello"]["ENABLED"] == "yes"
    code, out, err = run(capsys, "resume", str(config), "hello")
    assert (code, out, err) == (0, "hello was not paused\n", "")

    for command in ("pause", "resume"):
        code, out, err = run(capsys, command, str(config), "nosuch")
        assert code == 2 and out == ""
        assert error_lines(err) == ["jobscheduler: job 'nosuch': no job has this name"]


def test_pause_for_and_all(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    code, out, err = run(capsys, "pause", str(config), "--all", "--for", "2h")
    assert code == 0 and err == "" and out.startswith("paused every job until ")
    code, out, _ = run(capsys, "list", str(config))
    rows = table(out).values()
    assert all(r["ENABLED"].startswith("paused until ") or r["ENABLED"] == "no" for r in rows)
    assert any(r["ENABLED"].startswith("paused until ") for r in rows)
    code, out, err = run(capsys, "resume", str(config), "--all")
    assert code == 0 and out.startswith("resumed ")
    code, out, _ = run(capsys, "list", str(config))
    assert {row["ENABLED"] for row in table(out).values()} <= {"yes", "no"}
    for bad, message in (
        (["--for", "2"], "--for '2' is a bare number: write it with its unit, e.g. '2m' or '2h'"),
        (["--for", "30"], "--for '30' is a bare number"),
        # A length must carry its unit: the refusal never suggests a bare number of seconds.
        (["--for", "soon"], "--for 'soon' is not a duration: write it with its unit, e.g. '90s'"),
    ):
        code, out, err = run(capsys, "pause", str(config), "hello", *bad)
        assert code == 2 and out == "" and message in err and len(error_lines(err)) == 1
        assert "number of seconds" not in err
    code, out, err = run(capsys, "pause", str(config))
    assert code == 2 and "give a JOB or --all" in err
    code, out, err = run(capsys, "pause", str(config), "hello", "--all")
    assert code == 2 and "give a JOB or --all" in err


# -- run-once ------------------------------------------------------------------------------------


def test_run_once_success_prints_event_and_output(
    capsys: pytest.CaptureFixture[str], config: Path
) -> None:
    code, out, err = run(capsys, "run-once", str(config), "hello")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "hello: SUCCESSFUL"
    assert re.fullmatch(r"took \d+\.\d{3} s, exit code 0", lines[1])
    assert lines[2:] == ["--- output (tail) ---", "hello from the job"]


def test_run_once_failure(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    # fail is paused: run-once runs it anyway (it is for testing a definition)
    code, out, _ = run(capsys, "run-once", str(config), "fail")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "fail: FAILED (exit code 3)"
    assert lines[1].endswith("exit code 3")
    assert "to stdout" in out and "to stderr" in out


def test_run_once_not_started(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    code, out, _ = run(capsys, "run-once", str(config), "missing")
    assert code == 3
    first = out.splitlines()[0]
    assert first.startswith("missing: NOT_STARTED (command not found: ")
    assert "exit code" not in out


def test_run_once_internal_job(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    code, out, err = run(capsys, "run-once", str(config), "report")
    assert code == 0, err
    assert out.splitlines()[0] == "report: SUCCESSFUL"


def test_run_once_unknown_job(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    code, out, err = run(capsys, "run-once", str(config), "nosuch")
    assert code == 2 and out == ""
    assert error_lines(err) == ["jobscheduler: job 'nosuch': no job has this name"]


# -- arguments, errors, tracebacks ---------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["validate"],
        ["next", "jobs.yaml", "hello", "-n", "many"],
        ["add", "jobs.yaml", "new"],
        ["list", "jobs.yaml", "extra"],
    ],
)
def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert "jobscheduler: error: " in err
    assert "Traceback" not in err


def test_run_refuses_bad_arguments_before_starting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config: Path
) -> None:
    code, _, err = run(capsys, "run", str(config), "--max-workers", "0")
    assert code == 2
    assert error_lines(err) == ["jobscheduler: --max-workers must be at least 1"]
    code, _, err = run(capsys, "run", str(tmp_path / "absent.yaml"))
    assert code == 2
    assert error_lines(err) == [
        f"jobscheduler: {tmp_path / 'absent.yaml'}: no such configuration file"
    ]
    code, _, err = run(capsys, "run", str(config), "--log-level", "chatty")
    assert code == 2
    assert error_lines(err) == ["jobscheduler: unknown log level 'chatty'"]
    code, _, err = run(capsys, "run", str(config), "--log-file", str(tmp_path / "no" / "log"))
    assert code == 2
    [line] = error_lines(err)
    assert line.startswith(f"jobscheduler: --log-file {tmp_path / 'no' / 'log'}: ")


def test_unexpected_error_is_one_line_and_debug_shows_traceback(
    capsys: pytest.CaptureFixture[str], config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: Path) -> None:
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(cli, "_load", broken)
    code, out, err = run(capsys, "list", str(config))
    assert code == 1 and out == ""
    assert error_lines(err) == ["jobscheduler: RuntimeError: disk on fire second line"]

    for argv in (["--debug", "list", str(config)], ["list", str(config), "--debug"]):
        code, _, err = run(capsys, *argv)
        assert code == 1
        assert "Traceback (most recent call last)" in err
        assert "in broken" in err
        last = err.rstrip().splitlines()[-1]
        assert last == "jobscheduler: RuntimeError: disk on fire second line"


# -- real subprocesses ---------------------------------------------------------------------------


def command(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobscheduler", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )


def test_subprocess_validate_and_debug(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_CONFIG)
    done = command("validate", "bad.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert [line.split(",")[0] for line in lines] == [
        f"jobscheduler: bad.yaml:{number}" for number, _, _ in BAD_PLACES
    ]
    assert "Traceback" not in done.stderr

    debug = command("--debug", "validate", "bad.yaml", cwd=tmp_path)
    assert debug.returncode == 2
    assert "Traceback (most recent call last)" in debug.stderr
    assert "ConfigFileError" in debug.stderr
    assert debug.stderr.splitlines()[-len(BAD_PLACES) :] == lines


def test_subprocess_list_run_once_and_usage(config: Path) -> None:
    listing = command("list", config.name, cwd=config.parent)
    assert listing.returncode == 0, listing.stderr
    assert set(table(listing.stdout)) == {"hello", "fail", "missing", "report", "after-hello"}

    once = command("run-once", config.name, "fail", cwd=config.parent)
    assert once.returncode == 1
    assert once.stdout.startswith("fail: FAILED (exit code 3)\n")

    usage = command(cwd=config.parent)
    assert usage.returncode == 2
    assert usage.stderr.startswith("usage: jobscheduler")
    assert "Traceback" not in usage.stderr


def test_console_script(config: Path) -> None:
    script = Path(sys.executable).parent / "jobscheduler"
    assert script.exists(), "the package is installed with its console script"
    done = subprocess.run(
        [str(script), "run-once", str(config), "hello"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "hello: SUCCESSFUL"
    assert "hello from the job" in done.stdout
