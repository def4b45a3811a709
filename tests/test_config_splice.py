"""In-place edits of hand-written files: layouts the writer must handle, and its safety net."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from jobscheduler import Catalog, EmailConfiguration, Job
from jobscheduler.config import ConfigStore, dump_config, load_config, parse_config
from jobscheduler.config import store as store_module
from jobscheduler.config.load import parse_document
from jobscheduler.config.splice import splice
from jobscheduler.config.store import same_catalog

JOB = "    command: 'true'\n    start: 2024-01-01\n    interval: 1 day\n"
LAYOUTS = {
    "kept block scalar": (
        "email: {from_address: a@b.c}\njobs:\n  a:\n" + JOB + "    messages:\n      failed:\n"
        "        recipients: [x@y.z]\n        template: |+\n          hello\n\n"
    ),
    "four-space indent": "jobs:\n    a:\n        command: 'true'\n        start: 2024-01-01\n"
    "        interval: 1 day\n",
    "no newline at the end": "jobs:\n  a:\n" + JOB.rstrip("\n"),
    "CRLF line ends": ("jobs:\n  a:\n" + JOB).replace("\n", "\r\n"),
    "document markers": "%YAML 1.1\n---\njobs:\n  a:\n" + JOB + "...\n",
    "anchors and merges": "jobs:\n  a: &base\n" + JOB + "  b:\n    <<: *base\n    priority: 2\n",
    "commented-out job": "jobs:\n  a:\n" + JOB + "  # b: disabled\ngroups:\n  g: {jobs: [a]}\n",
    "flow jobs": "jobs: {a: {command: 'true', start: 2024-01-01, interval: 1 day}}\n",
    "literal templates": (
        "email:\n  from_address: a@b.c\n  default_template: |\n    Job {{ JobName }}\n\n"
        "    is {{ JobStatus }}\n\njobs:\n  a:\n" + JOB
    ),
    "comments everywhere": (
        "# head\n\n# before jobs\njobs:  # the jobs\n  # before a\n  a:  # job a\n"
        "    # before command\n    command: 'true'  # a command\n    start: 2024-01-01\n"
        "    interval: 1 day\n    # after a\n\n# tail\n"
    ),
}


def _new_job(name: str) -> Job:
    return Job(name, command="true", start=datetime(2024, 1, 1), interval="1 day")


CHANGES: dict[str, Callable[[Catalog], Catalog]] = {
    "add": lambda c: c.add_jobs([_new_job("new")]),
    "modify": lambda c: c.modify_job(c.jobs["a"].with_changes(priority=7, enabled=False)),
    "remove": lambda c: c.remove_job("b") if "b" in c.jobs else c.add_jobs([_new_job("z")]),
    "email": lambda c: c.with_email(EmailConfiguration("new@example.com", subject="S")),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("change", list(CHANGES))
def test_layouts_are_edited_in_place(layout: str, change: str) -> None:
    text = LAYOUTS[layout]
    doc = parse_document(text)
    new = CHANGES[change](doc.catalog)
    result = splice(doc, new)
    if (layout, change) == ("anchors and merges", "modify"):
        assert result is None  # 'b' merges 'a': editing a's text would change b too
        return
    assert result is not None
    assert same_catalog(parse_config(result), new), result
    if layout != "flow jobs":  # a flow section is rewritten as blocks; elsewhere text stays
        kept = [line for line in text.splitlines() if line.strip().startswith("#")]
        assert all(line in result.splitlines() for line in kept if "job a" not in line)


def test_comments_and_blank_lines_stay_where_they_were() -> None:
    text = LAYOUTS["comments everywhere"]
    doc = parse_document(text)
    result = splice(doc, doc.catalog.modify_job(doc.catalog.jobs["a"].with_changes(priority=1)))
    assert result == text.replace("    # after a\n", "    priority: 1\n    # after a\n")


def test_crlf_files_keep_their_line_ends() -> None:
    doc = parse_document(LAYOUTS["CRLF line ends"])
    result = splice(doc, doc.catalog.add_jobs([_new_job("new")]))
    assert result is not None
    assert "\n" not in result.replace("\r\n", "")


def test_an_unchanged_catalog_gives_back_the_same_text() -> None:
    for text in LAYOUTS.values():
        doc = parse_document(text)
        assert splice(doc, doc.catalog) == text


def test_a_wrong_splice_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("# a comment\njobs:\n  a:\n" + JOB)
    store = ConfigStore(path)
    store.read()
    monkeypatch.setattr(store_module, "splice", lambda doc, new: doc.text)  # loses the change
    with caplog.at_level(logging.WARNING, logger="jobscheduler.config"):
        store.add_job(_new_job("b"))
    assert "rewriting the whole file" in caplog.text
    assert list(load_config(path).jobs) == ["a", "b"]
    assert path.read_text() == dump_config(store.catalog)

    def broken(doc: object, new: object) -> str:
        raise RuntimeError("bug")

    monkeypatch.setattr(store_module, "splice", broken)
    store.add_job(_new_job("c"))
    assert list(load_config(path).jobs) == ["a", "b", "c"]


def test_a_file_of_comments_only_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("# jobs of the reporting team\n# (empty for now)\n")
    store = ConfigStore(path)
    store.read()
    store.add_job(_new_job("a"))
    assert path.read_text().startswith("# jobs of the reporting team\n# (empty for now)\n\njobs:\n")
    assert list(load_config(path).jobs) == ["a"]
