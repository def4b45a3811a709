"""Fuzzing the loader and the in-place writer: nothing but JobActionError ever escapes."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jobscheduler import Catalog, JobActionError
from jobscheduler.config import dump_config, parse_config
from jobscheduler.config.load import parse_document
from jobscheduler.config.splice import splice
from jobscheduler.config.store import same_catalog
from jobscheduler.config.values import EMAIL_KEYS, JOB_KEYS, SMTP_KEYS

REPO = Path(__file__).resolve().parent.parent
SAMPLE = (REPO / "sample_config.yaml").read_text()
SAMPLE_LINES = SAMPLE.splitlines(keepends=True)
# JOBSCHEDULER_FUZZ_EXAMPLES=5000 for a longer campaign; the default keeps the suite quick.
FUZZ = settings(
    max_examples=int(os.environ.get("JOBSCHEDULER_FUZZ_EXAMPLES", "250")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

KEYS = st.sampled_from(
    [
        *JOB_KEYS,
        *EMAIL_KEYS,
        *SMTP_KEYS,
        "jobs",
        "groups",
        "email",
        "job",
        "status",
        "delay",
        "recipients",
        "template",
        "template_file",
        "failed",
        "successful",
        "both",
        "<<",
        "x",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        [
            "1 day",
            "10s",
            "500ms",
            "external",
            "internal",
            "a:b",
            "m.mod:Cls",
            "Europe/Berlin",
            "2024-01-01 00:00:00",
            "2024-13-45",
            "{{ x }",
            "{% if %}",
            "ops@example.com",
            "ls -l",
            "successful",
            "failed",
            "both",
            "not_started",
            "templates/failed.txt",
            "/dev/null",
            "../../../etc/passwd",
            "*.tmp",
            "0 days",
            "-1 hour",
        ]
    ),
    st.dates(min_value=date(1, 1, 1)),
    st.datetimes(timezones=st.sampled_from([None, UTC])),
)


def data_trees() -> st.SearchStrategy[Any]:
    return st.recursive(
        SCALARS,
        lambda children: st.one_of(
            st.lists(children, max_size=5),
            st.dictionaries(st.one_of(KEYS, st.text(max_size=8)), children, max_size=6),
        ),
        max_leaves=15,
    )


def check(text: str) -> Catalog | None:
    """Parse; only JobActionError may escape. A success must dump and read back the same."""
    try:
        catalog = parse_config(text, filename="fuzz.yaml", base_dir=REPO)
    except JobActionError as exc:
        assert str(exc)
        for problem in exc.problems:
            assert problem.file == "fuzz.yaml"
        return None
    written = dump_config(catalog)
    again = parse_config(written, base_dir=REPO)
    assert same_catalog(again, catalog)
    assert dump_config(again) == written
    return catalog


@FUZZ
@given(st.dictionaries(st.sampled_from(["jobs", "groups", "email"]), data_trees(), max_size=3))
def test_random_structures(document: dict[str, Any]) -> None:
    check(yaml.safe_dump(document, allow_unicode=True))


@FUZZ
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=6),
        st.dictionaries(KEYS, data_trees(), max_size=6),
        max_size=3,
    )
)
def test_random_jobs(jobs: dict[str, Any]) -> None:
    check(yaml.safe_dump({"jobs": jobs}, allow_unicode=True))


@FUZZ
@given(st.text(max_size=300))
def test_random_text(text: str) -> None:
    check(text)


@st.composite
def mutations(draw: st.DrawFn) -> str:
    lines = list(SAMPLE_LINES)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        if not lines:
            break
        i = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        kind = draw(
            st.sampled_from(
                ["delete", "duplicate", "swap", "indent", "dedent", "char", "insert", "truncate"]
            )
        )
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "swap":
            j = draw(st.integers(min_value=0, max_value=len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "indent":
            lines[i] = "  " + lines[i]
        elif kind == "dedent":
            lines[i] = lines[i][2:] if lines[i].startswith("  ") else lines[i]
        elif kind == "char":
            line = lines[i]
            j = draw(st.integers(min_value=0, max_value=max(0, len(line) - 1)))
            char = draw(st.sampled_from(list(":-[]{}&*!|>'\"#%@`,? \t0aZ\\")))
            lines[i] = line[:j] + char + line[j + 1 :]
        elif kind == "insert":
            lines.insert(i, draw(st.text(max_size=40)) + "\n")
        else:
            lines = lines[:i]
    return "".join(lines)


@FUZZ
@given(mutations())
def test_mutations_of_the_sample(text: str) -> None:
    check(text)


@FUZZ
@given(mutations(), st.data())
def test_in_place_writes_on_mutated_files(text: str, data: st.DataObject) -> None:
    """Whenever the writer edits a file in place, the result reads back as intended."""
    try:
        doc = parse_document(text, filename="fuzz.yaml", base_dir=REPO)
    except JobActionError:
        assume(False)
        return
    catalog = doc.catalog
    names = list(catalog.jobs)
    action = data.draw(st.sampled_from(["modify", "remove", "add", "group", "email"]))
    try:
        if action == "modify" and names:
            name = data.draw(st.sampled_from(names))
            priority = data.draw(st.integers(min_value=-5, max_value=5))
            new = catalog.modify_job(catalog.jobs[name].with_changes(priority=priority))
        elif action == "remove" and names:
            new = catalog.remove_job(data.draw(st.sampled_from(names)))
        elif action == "group" and catalog.groups:
            new = catalog.remove_group(data.draw(st.sampled_from(list(catalog.groups))))
        elif action == "email" and catalog.email is not None:
            new = (
                catalog.with_email(None)
                if not any(j.messages for j in catalog.jobs.values())
                and not any(g.messages for g in catalog.groups.values())
                else catalog
            )
        else:
            from jobscheduler import Job

            new = catalog.add_jobs(
                [Job("fuzz-new", command="true", start=datetime(2024, 1, 1), interval="1 day")]
            )
    except JobActionError:
        assume(False)
        return
    result = splice(doc, new)
    if result is not None:
        edited = parse_config(result, base_dir=REPO)
        assert same_catalog(edited, new), result
