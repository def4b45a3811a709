"""Problems in a configuration file: each named with its file, line, job or group, and key."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from jobscheduler import ConfigFileError, Job, JobActionError, Problem
from jobscheduler.config import MAX_BYTES, MAX_NODES, dump_config, load_config, parse_config
from jobscheduler.config import yamlnodes as config_yaml
from jobscheduler.config.yamlnodes import YamlProblem, compose
from jobscheduler.model.catalog import Catalog

REPO = Path(__file__).resolve().parent.parent
OK_JOB = "    command: 'true'\n    start: 2024-01-01 00:00:00\n    interval: 1 day\n"


@pytest.fixture(params=["C", "pure"])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with libyaml's parser and with PyYAML's pure one."""
    if request.param == "pure":
        monkeypatch.setattr(config_yaml, "_LOADER", yaml.SafeLoader)
    elif not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML built without libyaml")
    return str(request.param)


def problems_of(text: str, tmp_path: Path, name: str = "jobs.yaml") -> list[Problem]:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    assert all(p.file == str(path) for p in info.value.problems)
    return list(info.value.problems)


def the_problem(text: str, tmp_path: Path) -> Problem:
    problems = problems_of(text, tmp_path)
    assert len(problems) == 1, problems
    return problems[0]


def assert_names(problem: Problem, line: int, job: str | None, key: str | None) -> None:
    """The problem and its message name the place: file:line, job, key."""
    assert (problem.line, problem.job, problem.key) == (line, job, key), problem
    text = str(problem)
    assert text.startswith(f"{problem.file}:{line}")
    if job is not None:
        assert f"job {job!r}" in text
    if key is not None:
        assert f"key {key!r}" in text


def test_yaml_syntax_error(tmp_path: Path, loader: str) -> None:
    problem = the_problem("jobs:\n  a:\n    command: [unclosed\n    start: x\n", tmp_path)
    assert problem.line is not None and problem.line >= 3
    assert "YAML syntax" in problem.message


def test_unknown_key_suggests_the_closest(tmp_path: Path, loader: str) -> None:
    problem = the_problem(f"jobs:\n  a:\n{OK_JOB}    intervall: 2 days\n", tmp_path)
    assert_names(problem, 6, "a", "intervall")
    assert "did you mean 'interval'" in problem.message


def test_spec_parameter_names_point_to_keys(tmp_path: Path, loader: str) -> None:
    problems = problems_of(
        "jobs:\n  a:\n    JobCmd: ls\n    StartDTG: 2024-01-01\n    IntervalUnit: day\n"
        "DefinedGroups: {}\n",
        tmp_path,
    )
    hints = {p.key: p.message for p in problems if "unknown key" in p.message}
    assert "'command'" in hints["JobCmd"]
    assert "'start'" in hints["StartDTG"]
    assert "'interval'" in hints["IntervalUnit"]
    assert "'groups'" in hints["DefinedGroups"]


def test_unknown_top_level_key(tmp_path: Path, loader: str) -> None:
    problem = the_problem("jobz: {}\n", tmp_path)
    assert_names(problem, 1, None, "jobz")
    assert "did you mean 'jobs'" in problem.message


def test_wrong_types(tmp_path: Path, loader: str) -> None:
    problems = problems_of(
        f"jobs:\n  a:\n{OK_JOB}    priority: high\n    enabled: maybe\n    env: [A, B]\n"
        "    max_instances: 1.5\n",
        tmp_path,
    )
    by_key = {p.key: p for p in problems}
    assert_names(by_key["priority"], 6, "a", "priority")
    assert_names(by_key["enabled"], 7, "a", "enabled")
    assert_names(by_key["env"], 8, "a", "env")
    assert_names(by_key["max_instances"], 9, "a", "max_instances")
    assert "whole number" in by_key["priority"].message


def test_invalid_values(tmp_path: Path, loader: str) -> None:
    problems = problems_of(
        "jobs:\n"
        "  a:\n    command: 'true'\n    start: 2024-01-01\n    interval: 0 days\n"
        "  b:\n    command: 'true'\n    start: 2024-01-01\n    interval: 1 fortnight\n"
        "  c:\n    command: 'true'\n    start: 2024-02-30 10:00:00\n    interval: 1 day\n"
        "  d:\n    command: 'true'\n    start: 2024-01-01\n    interval: 1 day\n"
        "    timezone: Mars/Olympus_Mons\n"
        "  e:\n    command: 'true'\n    start: 2024-01-01\n    interval: 60\n"
        "  f:\n    command: 'true'\n    start: 2024-01-01\n    interval: 1 day\n"
        "    timeout: -5s\n",
        tmp_path,
    )
    by_job = {p.job: p for p in problems}
    assert_names(by_job["a"], 5, "a", "interval")
    assert "above 0" in by_job["a"].message
    assert_names(by_job["b"], 9, "b", "interval")
    assert_names(by_job["c"], 12, "c", "start")
    assert_names(by_job["d"], 18, "d", "timezone")
    assert_names(by_job["e"], 22, "e", "interval")
    assert "needs a unit" in by_job["e"].message
    assert_names(by_job["f"], 27, "f", "timeout")


def test_start_after_stop_and_missing_schedule(tmp_path: Path, loader: str) -> None:
    problems = problems_of(
        "jobs:\n"
        "  a:\n    command: 'true'\n    start: 2024-02-01\n    stop: 2024-01-01\n"
        "    interval: 1 day\n"
        "  b:\n    command: 'true'\n",
        tmp_path,
    )
    by_job = {p.job: p for p in problems}
    assert_names(by_job["a"], 5, "a", "stop")
    assert "after stop" in by_job["a"].message
    assert_names(by_job["b"], 7, "b", "dependence")  # no schedule: the job's line
    assert "schedule" in by_job["b"].message


def test_unknown_dependence_target(tmp_path: Path, loader: str) -> None:
    problem = the_problem(
        "jobs:\n  a:\n    command: 'true'\n    dependence:\n      job: nosuch\n", tmp_path
    )
    assert_names(problem, 5, "a", "dependence.job")
    assert "nosuch" in problem.message


def test_bad_dependence_status_and_delay(tmp_path: Path, loader: str) -> None:
    problems = problems_of(
        "jobs:\n"
        f"  p:\n{OK_JOB}"
        "  a:\n    command: 'true'\n    dependence: {job: p, status: sometimes}\n"
        "  b:\n    command: 'true'\n    dependence:\n      job: p\n      delay: soon\n",
        tmp_path,
    )
    by_job = {p.job: p for p in problems}
    assert_names(by_job["a"], 8, "a", "dependence.status")
    assert_names(by_job["b"], 13, "b", "dependence.delay")


def test_dependence_cycle(tmp_path: Path, loader: str) -> None:
    problems = problems_of(
        "jobs:\n"
        "  a:\n    command: 'true'\n    dependence: {job: b}\n"
        "  b:\n    command: 'true'\n    dependence: {job: a}\n",
        tmp_path,
    )
    assert len(problems) == 1
    assert_names(problems[0], 4, "a", "dependence.job")
    assert "cycle" in problems[0].message and "a -> b -> a" in problems[0].message


def test_group_naming_an_unknown_job(tmp_path: Path, loader: str) -> None:
    problem = the_problem(
        f"jobs:\n  a:\n{OK_JOB}groups:\n  ops:\n    jobs:\n      - a\n      - ghost\n", tmp_path
    )
    assert (problem.line, problem.group, problem.key) == (10, "ops", "jobs")  # the item's line
    assert str(problem).startswith(f"{problem.file}:10, group 'ops', key 'jobs'")
    assert "ghost" in problem.message


def test_duplicate_keys_and_names(tmp_path: Path, loader: str) -> None:
    problems = problems_of(
        f"jobs:\n  a:\n{OK_JOB}    priority: 1\n    priority: 2\n  a:\n{OK_JOB}"
        f"groups:\n  a:\n    jobs: [a]\n",
        tmp_path,
    )
    messages = [str(p) for p in problems]
    assert any("key 'priority'" in m and "twice (lines 6 and 7)" in m for m in messages)
    assert any(":8" in m and "appears twice (lines 2 and 8)" in m for m in messages)
    assert any("group 'a'" in m and "name of a job" in m for m in messages)


def test_templates_compile_at_load(tmp_path: Path, loader: str) -> None:
    (tmp_path / "bad.txt").write_text("line one\n{% if %}\n")
    problems = problems_of(
        "email:\n  from_address: s@example.com\n  subject: '{{ JobName'\n"
        f"jobs:\n  a:\n{OK_JOB}"
        "    messages:\n"
        "      failed:\n"
        "        recipients: [ops@example.com]\n"
        "        template: |\n"
        "          fine {{ JobName }}\n"
        "          broken {{ }\n"
        "      successful: {recipients: [ops@example.com], template_file: bad.txt}\n"
        "      not_started: {recipients: [ops@example.com], template_file: missing.txt}\n",
        tmp_path,
    )
    by_key = {p.key: p for p in problems}
    assert by_key["email.subject"].line == 3
    inline = by_key["messages.failed.template"]
    assert_names(inline, 14, "a", "messages.failed.template")  # the template's own line 2
    assert "line 2" in inline.message
    from_file = by_key["messages.successful.template_file"]
    assert_names(from_file, 15, "a", "messages.successful.template_file")
    assert "bad.txt" in from_file.message and "line 2" in from_file.message
    missing = by_key["messages.not_started.template_file"]
    assert_names(missing, 16, "a", "messages.not_started.template_file")
    assert "missing.txt" in missing.message and "does not exist" in missing.message


def test_alert_problems(tmp_path: Path, loader: str) -> None:
    problems = problems_of(
        f"jobs:\n  a:\n{OK_JOB}"
        "    messages:\n"
        "      failed: {recipients: [not-an-address]}\n"
        "      sometimes: {recipients: [a@example.com]}\n"
        "      successful: {template: x}\n"
        "      not_started: {recipients: [a@example.com], template: x, template_file: y}\n",
        tmp_path,
    )
    by_key = {p.key: p for p in problems}
    assert_names(by_key["messages.failed.recipients"], 7, "a", "messages.failed.recipients")
    assert_names(by_key["messages.sometimes"], 8, "a", "messages.sometimes")
    assert_names(by_key["messages.successful.recipients"], 9, "a", "messages.successful.recipients")
    assert "not both" in by_key["messages.not_started.template_file"].message


def test_alerts_need_an_email_section(tmp_path: Path, loader: str) -> None:
    problem = the_problem(
        f"jobs:\n  a:\n{OK_JOB}    messages:\n      failed: {{recipients: [o@example.com]}}\n",
        tmp_path,
    )
    assert_names(problem, 6, "a", "messages")
    assert "email" in problem.message


def test_email_problems(tmp_path: Path, loader: str) -> None:
    problems = problems_of(
        "email:\n  from_address: nobody\n  smtp:\n    port: 99999\n    password: hunter2\n",
        tmp_path,
    )
    by_key = {p.key: p for p in problems}
    assert by_key["email.smtp.password"].line == 5
    assert "password_env" in by_key["email.smtp.password"].message
    assert "hunter2" not in str(by_key["email.smtp.password"])
    problems = problems_of("email:\n  from_address: nobody\n", tmp_path)
    assert (problems[0].line, problems[0].key) == (2, "email.from_address")
    problems = problems_of("email:\n  from_address: a@b.c\n  smtp: {port: 0}\n", tmp_path)
    assert (problems[0].line, problems[0].key) == (3, "email.smtp.port")


def test_every_problem_of_a_file_is_reported_together(tmp_path: Path, loader: str) -> None:
    problems = problems_of(
        "jobs:\n"
        "  a:\n    command: 'true'\n    start: soon\n    interval: 1 day\n"
        "  b:\n    comand: ls\n    start: 2024-01-01\n    interval: 1 day\n"
        "  c:\n    command: 'true'\n    dependence: {job: nosuch}\n"
        "groups:\n  g:\n    jobs: [a, b, c, d]\n",
        tmp_path,
    )
    lines = [p.line for p in problems]
    assert lines == sorted(lines)
    assert {(p.job, p.key) for p in problems if p.job} >= {
        ("a", "start"),
        ("b", "comand"),
        ("c", "dependence.job"),
    }
    # 'a' and 'b' are invalid, so the group is only blamed for 'd', which is not defined
    group = [p for p in problems if p.group == "g"]
    assert len(group) == 1 and "'d'" in group[0].message
    assert str(ConfigFileError(problems)).startswith(f"{len(problems)} problems:")


def test_wrong_shapes(tmp_path: Path, loader: str) -> None:
    assert "mapping" in the_problem("- a\n- b\n", tmp_path).message
    assert "jobs must be a mapping" in the_problem("jobs: [a, b]\n", tmp_path).message
    problem = the_problem("jobs:\n  a:\n", tmp_path)
    assert_names(problem, 2, "a", None)
    problem = the_problem("jobs:\n  a: just text\n", tmp_path)
    assert problem.job == "a" and "mapping" in problem.message
    problem = the_problem(f"jobs:\n  a:\n{OK_JOB}    args: {{x: 1}}\n", tmp_path)
    assert_names(problem, 6, "a", "args")
    problem = the_problem(f"jobs:\n  a:\n{OK_JOB}    command: {{x: 1}}\n", tmp_path)
    assert problem.key == "command"


# -- hostile input ------------------------------------------------------------------------------


def test_python_tags_are_refused_and_never_run(tmp_path: Path, loader: str) -> None:
    marker = tmp_path / "pwned"
    text = (
        "jobs:\n  a:\n"
        f"    command: !!python/object/apply:os.system ['touch {marker}']\n"
        "    start: 2024-01-01\n    interval: 1 day\n"
    )
    problem = the_problem(text, tmp_path)
    assert problem.line == 3 and "python/object/apply" in problem.message
    assert "safe loader" in problem.message
    assert not marker.exists()
    for tag in ("!!python/name:os.system", "!!python/tuple [1]", "!!binary aGk=", "!!set {a}"):
        assert the_problem(f"x: {tag}\n", tmp_path).line == 1
    assert "not supported" in the_problem("jobs: !custom {}\n", tmp_path).message


def billion_laughs(levels: int = 9) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "jobs:\n" + "\n".join("  " + line for line in lines) + "\n"


@pytest.mark.timeout(20)
def test_alias_expansion_bomb_is_refused(tmp_path: Path, loader: str) -> None:
    problem = the_problem(billion_laughs(), tmp_path)
    assert "expands to more than" in problem.message and f"{MAX_NODES:,}" in problem.message
    assert problem.line is not None


def test_aliases_may_expand_up_to_the_cap(tmp_path: Path, loader: str) -> None:
    # Six levels of nine: 9**6 = 531,441 leaves, under the cap (seven levels pass it).
    assert "expands to more than" not in "".join(
        p.message for p in problems_of(billion_laughs(6), tmp_path)
    )
    assert "expands to more than" in the_problem(billion_laughs(7), tmp_path).message


def test_nodes_written_out_count_against_the_cap_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_yaml, "MAX_NODES", 1000)
    root = compose("x: [" + ", ".join(["1"] * 990) + "]\n")
    assert root is not None and root.pairs[0][1].size == 991  # with the list
    with pytest.raises(YamlProblem, match="expands to more than 1,000 nodes"):
        compose("x: [" + ", ".join(["1"] * 1001) + "]\n")


def test_the_limits_admit_a_100000_job_file(tmp_path: Path) -> None:
    # Measured on 1,000 jobs as `dump_config` writes them, scaled: size and nodes are linear.
    jobs = [
        Job(f"job-{i:06d}", type="internal", command="app.jobs:run",
            start=datetime(2031, 1, 1), interval="1 day", timezone="Europe/Berlin")
        for i in range(1000)
    ]  # fmt: skip
    text = dump_config(Catalog.build(jobs))
    root = compose(text)
    assert root is not None
    assert 100 * len(text.encode()) < MAX_BYTES * 0.8
    assert 100 * root.size < MAX_NODES * 0.8


def test_recursive_and_unknown_aliases(tmp_path: Path, loader: str) -> None:
    assert "contains it" in the_problem("a: &x [1, *x]\n", tmp_path).message
    assert "no anchor" in the_problem("a: *nothing\n", tmp_path).message


def test_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as fh:
        fh.truncate(MAX_BYTES + 1)  # sparse: nothing to parse, only to refuse
    with pytest.raises(ConfigFileError, match="MiB limit"):
        load_config(path)
    with pytest.raises(ConfigFileError, match="MiB limit"):
        parse_config("#" * (MAX_BYTES + 1))


def test_deep_nesting_and_several_documents(tmp_path: Path, loader: str) -> None:
    assert "nesting deeper" in the_problem("x: " + "[" * 500 + "]" * 500 + "\n", tmp_path).message
    problem = the_problem("jobs: {}\n---\njobs: {}\n", tmp_path)
    assert problem.line == 2 and "more than one YAML document" in problem.message


def test_not_utf8_missing_and_directory(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"jobs:\n  caf\xe9: {}\n")
    with pytest.raises(ConfigFileError) as info:
        load_config(path)
    assert info.value.problem.line == 2 and "UTF-8" in info.value.problem.message
    with pytest.raises(ConfigFileError, match="no such file"):
        load_config(tmp_path / "absent.yaml")
    with pytest.raises(ConfigFileError, match="directory"):
        load_config(tmp_path)


def test_errors_are_job_action_errors_with_a_string_filename() -> None:
    with pytest.raises(JobActionError) as info:
        parse_config("jobs: {a: {command: 'true'}}\n", filename="inline.yaml")
    assert str(info.value).startswith("inline.yaml:1, job 'a'")


@pytest.mark.parametrize("delay", ["500", "'500'", "0", "1.5", "-3", "1e3"])
def test_a_bare_number_delay_is_refused(tmp_path: Path, loader: str, delay: str) -> None:
    """`delay: 500` was read as seconds; the spec's delays are milliseconds."""
    problem = the_problem(
        f"jobs:\n  p:\n{OK_JOB}  a:\n    command: 'true'\n    dependence:\n      job: p\n"
        f"      delay: {delay}\n",
        tmp_path,
    )
    assert_names(problem, 10, "a", "dependence.delay")
    assert "is a bare number: write it with its unit, e.g. '" in problem.message
    assert "milliseconds" in problem.message


@pytest.mark.parametrize(
    ("written", "name"),
    [('"a\\vb"', "a\vb"), ('"a\\Nb"', "a\x85b"), ('"a\\Lb"', "a\u2028b"), ('"a\\0b"', "a\0b")],
)
def test_unprintable_job_and_group_names_are_refused(
    tmp_path: Path, loader: str, written: str, name: str
) -> None:
    problems = problems_of(
        f"jobs:\n  {written}:\n{OK_JOB}  ok:\n{OK_JOB}groups:\n  {written}:\n    jobs: [ok]\n",
        tmp_path,
    )
    by_key = {(p.job, p.group): p for p in problems if "not printable" in p.message}
    assert_names(by_key[(name, None)], 2, name, "name")
    group = by_key[(None, name)]
    assert (group.line, group.key) == (11, "name"), group


@pytest.mark.parametrize(
    "recipient", ['"ops@ex ample.com"', "'\"q\"@b.c'", '"a@[1.2.3.4]"', '"a\\tb@c.d"', '"a@b, c@d"']
)
def test_recipients_the_mailer_would_refuse_are_refused_at_validation(
    tmp_path: Path, loader: str, recipient: str
) -> None:
    """They passed `validate` and `add`, then the daemon refused to start."""
    problem = the_problem(
        "email:\n  from_address: s@example.com\n"
        f"jobs:\n  a:\n{OK_JOB}    messages:\n      failed: {{recipients: [{recipient}]}}\n",
        tmp_path,
    )
    assert_names(problem, 9, "a", "messages.failed.recipients")
    assert "recipient" in problem.message


def test_pyyaml_refuses_the_characters_it_always_refused() -> None:
    """PyYAML is imported (by `yamlnodes`, in a fresh process) with its pattern of characters
    a document may not hold compiled from `_NOT_PRINTABLE`, which holds exactly the set of
    PyYAML's own pattern; a file with such a character is refused by either parser, at its
    line (the pure one, used without libyaml, raised PyYAML's own error before)."""
    every_character = "".join(map(chr, range(0x110000)))
    ours = re.compile(config_yaml._NOT_PRINTABLE)
    pyyaml = re.compile(config_yaml._PYYAML_NOT_PRINTABLE)
    assert [m.start() for m in ours.finditer(every_character)] == [
        m.start() for m in pyyaml.finditer(every_character)
    ]
    probe = (
        "import sys\n"
        "import jobscheduler.config.yamlnodes as nodes\n"
        "import yaml.reader\n"
        "pattern = yaml.reader.Reader.NON_PRINTABLE.pattern\n"
        "print('OURS' if pattern == nodes._NOT_PRINTABLE else 'OTHER', 'yaml' in sys.modules)\n"
        "try:\n"
        "    nodes.compose('jobs:\\n  a: \\x07\\n')\n"
        "except nodes.YamlProblem as exc:\n"
        "    print('LINE', exc.line)\n"
        "nodes._LOADER = yaml.SafeLoader\n"
        "try:\n"
        "    nodes.compose('jobs:\\n  a: \\x07\\n')\n"
        "except nodes.YamlProblem as exc:\n"
        "    print('LINE', exc.line)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.stdout.split("\n") == ["OURS True", "LINE 2", "LINE 2", ""], done.stderr
