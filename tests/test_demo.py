"""``demo.py --fast`` runs the specification's demo to completion, for real (jobs, a dependence
chain, a group, e-mail to a local SMTP server), and prints what the spec's demo shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# One worker runs every test of this file: they read one run of the demo (`demo`), which
# another worker would run again (docs/testing.md).
pytestmark = pytest.mark.xdist_group("demo")


@pytest.fixture(scope="module")
def demo() -> subprocess.CompletedProcess[str]:
    sample = (ROOT / "sample_config.yaml").read_bytes()
    done = subprocess.run(
        [sys.executable, str(ROOT / "demo.py"), "--fast"],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert (ROOT / "sample_config.yaml").read_bytes() == sample, "the demo works on a copy"
    return done


def mails(stdout: str) -> list[dict[str, str]]:
    """The mails the demo printed: From, To, Subject and body of each."""
    printed = stdout.split("Mails received by the local SMTP server\n", 1)[1]
    found = []
    for block in re.split(r"^  --- mail \d+ ---$", printed, flags=re.MULTILINE)[1:]:
        fields = dict(re.findall(r"^    (From|To|Subject): +(.*?)$", block, re.MULTILINE))
        fields["body"] = "\n".join(re.findall(r"^    \| ?(.*)$", block, re.MULTILINE))
        found.append(fields)
    return found


def test_demo_runs_to_completion(demo: subprocess.CompletedProcess[str]) -> None:
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "Traceback" not in demo.stderr
    assert " ERROR " not in demo.stderr
    removed = re.search(r"^removed (\S+); the demo took [\d.]+ s$", demo.stdout, re.MULTILINE)
    assert removed, demo.stdout
    assert not Path(removed.group(1)).exists()


def test_demo_version_1_functions(demo: subprocess.CompletedProcess[str]) -> None:
    out = demo.stdout
    part = out.split("4.3.1 Functions in version 1.0\n", 1)[1].split("4.3.2")[0]
    assert "paused the sample's scheduled jobs (" in part
    executing = part.split("getJobExecutionList):\n", 1)[1]
    assert re.search(r"^    JOB +RUN +PID +STARTED +RUNNING FOR$", executing, re.MULTILINE)
    run_id = r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"  # a UUIDv7
    assert re.search(
        rf"^    archive-logs +{run_id} +\d+ +\d\d:\d\d:\d\d +[\d.]+ s$", executing, re.M
    )
    job_list = part.split("getJobList):\n", 1)[1]
    for name, kind in (("file-cleanup", "external"), ("heartbeat-demo", "internal")):
        assert re.search(
            rf"^    {name} +{kind} +scheduled +\d\d:\d\d:\d\d +succeeded +- +\d\d:\d\d:\d\d$",
            job_list,
            re.MULTILINE,
        ), job_list
    assert re.search(r"^    rotate-logs +external +paused +- +- +- +-$", job_list, re.M)
    assert re.search(r"^    \| .*/files/old-0\.tmp$", part, re.MULTILINE)  # find -print
    assert re.search(r"event: archive-logs SUCCESSFUL$", part, re.MULTILINE)


def test_demo_version_2_functions(demo: subprocess.CompletedProcess[str]) -> None:
    out = demo.stdout
    part = out.split("4.3.2 Functions in version 2.0\n", 1)[1]
    # the chain ran twice: on jobA's schedule, then by run_now, without the handlers
    for event in ("jobA SUCCESSFUL", "jobB SUCCESSFUL", "jobC FAILED (exit code 2)"):
        assert len(re.findall(rf"\] event: {re.escape(event)}$", part, re.MULTILINE)) == 2
    order = [m.group(1) for m in re.finditer(r"\] event: (job[ABC]) ", part)]
    assert order == ["jobA", "jobB", "jobC"] * 2
    assert "dependence: {job: jobA, status: successful, delay: 500ms}" in part
    assert re.search(r"^    jobA +internal +scheduled .* succeeded +successful ", part, re.M)
    assert re.search(r"^    jobC +external +after jobB .* failed ", part, re.MULTILINE)
    assert "no new mail: the handlers are gone" in part
    assert "refused, as it should be: job 'jobA': cannot remove: jobs 'jobB' depend on it" in part
    left = re.search(r"^  jobs left: (.*)$", part, re.MULTILINE)
    assert left is not None
    assert not {"jobA", "jobB", "jobC"} & set(left.group(1).split(", "))


def test_demo_mails(demo: subprocess.CompletedProcess[str]) -> None:
    received = {mail["Subject"]: mail for mail in mails(demo.stdout)}
    assert sorted(received) == ["[FAILED] jobC", "[SUCCESSFUL] jobA", "[SUCCESSFUL] jobB"]
    group = "name2@example.com, name3@example.com"
    assert received["[SUCCESSFUL] jobA"]["To"] == f"{group}   (envelope: {group})"
    assert received["[SUCCESSFUL] jobB"]["To"].startswith(group)
    assert received["[FAILED] jobC"]["To"].startswith("name1@example.com ")
    for mail in received.values():
        assert mail["From"].startswith("scheduler@example.com ")
    failed = received["[FAILED] jobC"]["body"]
    assert failed.startswith("The Job jobC is FAILED.\n")
    uuid7 = r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
    assert re.search(rf"^Run {uuid7} \(", failed, re.MULTILINE), failed  # execution.run_id
    assert "exit code 2" in failed and "no-such-directory" in failed
    assert "Files to archive: 1 file(s), 11 bytes." in received["[SUCCESSFUL] jobA"]["body"]
    assert "archive-2.tgz" in received["[SUCCESSFUL] jobB"]["body"]
