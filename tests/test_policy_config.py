"""The run policies' keys: the Job constructor, the YAML file (file:line, job, key), dump."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobscheduler import Job
from jobscheduler.config import dump_config, parse_config
from jobscheduler.errors import ConfigFileError, InvalidJobError
from jobscheduler.model.policies import PauseAfterFailures, Retry

T0 = datetime(2024, 1, 1, tzinfo=UTC)

BASE = """\
jobs:
  parent:
    command: "true"
    start: 2024-01-01 00:00:00
    interval: 1 minute
  j:
    command: "true"
    start: 2024-01-01 00:00:00
    interval: 1 minute
"""


def scheduled(**fields: Any) -> Job:
    return Job("j", command="true", start=T0, interval="1 minute", **fields)


def test_defaults() -> None:
    job = scheduled()
    assert (job.overlap, job.catch_up, job.catch_up_window) == ("allow", "none", timedelta(days=1))
    assert job.retry is None and job.pause_after_failures is None and job.host is None


def test_every_key_reads_back_from_the_file() -> None:
    text = BASE + (
        "    overlap: Replace\n"
        "    catch_up: all\n"
        "    catch_up_window: 1h30m\n"
        "    retry: {attempts: 4, backoff: 2s, max_backoff: 1m, alert_each_attempt: true}\n"
        "    pause_after_failures: {failures: 2, resume_after: 5m}\n"
        "    host: 'worker-[0-9]*'\n"
    )
    job = parse_config(text).job("j")
    assert job.overlap == "replace" and job.catch_up == "all"
    assert job.catch_up_window == timedelta(hours=1, minutes=30)
    assert job.retry == Retry(4, timedelta(seconds=2), timedelta(minutes=1), True)
    assert job.pause_after_failures == PauseAfterFailures(2, timedelta(minutes=5))
    assert job.host == "worker-[0-9]*"
    again = parse_config(dump_config(parse_config(text)))
    assert again.job("j") == job


def test_pause_after_failures_as_a_count_or_a_mapping_and_written_back() -> None:
    assert parse_config(BASE + "    pause_after_failures: 3\n").job("j").pause_after_failures == (
        PauseAfterFailures(3)
    )
    assert scheduled(pause_after_failures=3).pause_after_failures == PauseAfterFailures(3)
    made = scheduled(pause_after_failures={"failures": 2, "resume_after": timedelta(minutes=5)})
    assert made.pause_after_failures == PauseAfterFailures(2, timedelta(minutes=5))
    text = dump_config(parse_config(BASE + "    pause_after_failures: 3\n"))
    assert "pause_after_failures: 3\n" in text
    text = dump_config(
        parse_config(BASE + "    pause_after_failures: {failures: 2, resume_after: 90s}\n")
    )
    assert "resume_after: 1m30s" in text or "resume_after: 90s" in text
    with pytest.raises(InvalidJobError, match="resume_after"):
        scheduled(pause_after_failures={"failures": 2, "resume_after": 300})


def test_retry_as_a_bare_count_and_as_a_mapping_in_code() -> None:
    assert parse_config(BASE + "    retry: 3\n").job("j").retry == Retry(3)
    assert scheduled(retry={"attempts": 2}).retry == Retry(2)


@pytest.mark.parametrize(
    ("line", "key", "message"),
    [
        ("overlap: sometimes", "overlap", "allow, skip, queue, replace"),
        ("catch_up: yes", "catch_up", "none, latest, all"),
        ("catch_up_window: 600", "catch_up_window", "bare number"),
        ("catch_up_window: 0s", "catch_up_window", "above 0"),
        ("retry: {attempts: 3, backoff: 10}", "retry.backoff", "bare number"),
        ("retry: {attempts: 3, max_backoff: '5'}", "retry.max_backoff", "bare number"),
        ("retry: {attempts: 0}", "retry.attempts", "from 1 to 100"),
        ("retry: {backoff: 1s}", "retry", "needs attempts"),
        ("retry: {attempts: 3, tries: 2}", "retry.tries", "unknown key"),
        ("retry: {attempts: 2, backoff: 1m, max_backoff: 10s}", "retry.max_backoff", "below"),
        ("retry: {attempts: 2, alert_each_attempt: maybe}", "retry.alert_each_attempt", "true"),
        ("pause_after_failures: 0", "pause_after_failures", "at least 1"),
        ("pause_after_failures: many", "pause_after_failures", "whole number"),
        ("pause_after_failures: {failures: 0}", "pause_after_failures.failures", "at least 1"),
        ("pause_after_failures: {failures: x}", "pause_after_failures.failures", "whole number"),
        (
            "pause_after_failures: {failures: 3, resume_after: 300}",
            "pause_after_failures.resume_after",
            "bare number",
        ),
        (
            "pause_after_failures: {failures: 3, resume_after: soon}",
            "pause_after_failures.resume_after",
            "duration",
        ),
        ("pause_after_failures: {resume_after: 5m}", "pause_after_failures", "needs failures"),
        ("pause_after_failures: {failures: 3, cool: 1m}", "pause_after_failures.cool", "unknown"),
        ("host: 'db-[12'", "host", "never closed"),
        ("host: ''", "host", "non-empty"),
    ],
)
def test_bad_values_are_refused_with_file_line_job_and_key(
    line: str, key: str, message: str
) -> None:
    with pytest.raises(ConfigFileError) as caught:
        parse_config(BASE + f"    {line}\n", filename="jobs.yaml")
    problems = caught.value.problems
    assert len(problems) == 1
    problem = problems[0]
    assert (problem.file, problem.line, problem.job, problem.key) == ("jobs.yaml", 10, "j", key)
    assert message in problem.message


DEPENDENT = """\
jobs:
  parent:
    command: "true"
    start: 2024-01-01 00:00:00
    interval: 1 minute
  child:
    command: "true"
    dependence: parent
"""


@pytest.mark.parametrize(
    ("line", "key"), [("catch_up: latest", "catch_up"), ("overlap: skip", "overlap")]
)
def test_slot_policies_are_refused_on_a_dependent_job(line: str, key: str) -> None:
    with pytest.raises(ConfigFileError) as caught:
        parse_config(DEPENDENT + f"    {line}\n", filename="jobs.yaml")
    (problem,) = caught.value.problems
    assert (problem.line, problem.job, problem.key) == (9, "child", key)
    assert "dependent job" in problem.message


def test_retry_pause_and_host_are_accepted_on_a_dependent_job() -> None:
    text = DEPENDENT + "    retry: 2\n    pause_after_failures: 3\n    host: 'db-*'\n"
    child = parse_config(text).job("child")
    assert child.retry == Retry(2) and child.pause_after_failures == PauseAfterFailures(3)


def test_a_host_pattern_that_matches_no_node_is_valid() -> None:
    # DESIGN: validation checks the pattern's syntax only (nodes are known only when they run)
    assert scheduled(host="no-such-machine-*").host == "no-such-machine-*"


def test_bare_numbers_are_refused_in_code_too() -> None:
    with pytest.raises(InvalidJobError, match="bare number") as caught:
        scheduled(retry={"attempts": 2, "backoff": 10})
    assert caught.value.problem.key == "retry.backoff"
    with pytest.raises(InvalidJobError, match="bare number"):
        scheduled(catch_up_window=60)


def test_the_validate_command_agrees(tmp_path: Any) -> None:
    from jobscheduler.app.cli import main

    path = tmp_path / "jobs.yaml"
    path.write_text(BASE + "    overlap: sometimes\n")
    assert main(["validate", str(path)]) != 0
    path.write_text(BASE + "    overlap: skip\n    retry: {attempts: 2, backoff: 1s}\n")
    assert main(["validate", str(path)]) == 0
