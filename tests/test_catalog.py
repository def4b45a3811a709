"""Catalog: the rules that span jobs — unique names, known dependence targets, no cycles,
groups of known jobs, and no removal of a job others need."""

from __future__ import annotations

from datetime import datetime

import pytest

from jobscheduler import (
    Catalog,
    Dependence,
    DuplicateNameError,
    InvalidJobError,
    Job,
    JobActionError,
    JobGroup,
    Problem,
    UnknownNameError,
)


def scheduled(name: str) -> Job:
    return Job(name, command="true", start=datetime(2024, 1, 1), interval="1 day", timezone="UTC")


def dependent(name: str, parent: str) -> Job:
    return Job(name, command="true", dependence=Dependence(parent))


def test_build_keeps_definition_order() -> None:
    catalog = Catalog.build(
        [scheduled("b"), scheduled("a"), dependent("c", "a")], [JobGroup("ops", ("c", "a"))]
    )
    assert list(catalog.jobs) == ["b", "a", "c"]
    assert list(catalog.groups) == ["ops"]
    assert [j.name for j in catalog.dependents("a")] == ["c"]
    assert [g.name for g in catalog.groups_of("a")] == ["ops"]
    assert catalog.groups_of("b") == []


def test_catalog_operations_return_new_catalogs() -> None:
    empty = Catalog()
    one = empty.add_jobs([scheduled("a")])
    assert list(empty.jobs) == [] and list(one.jobs) == ["a"]
    two = one.add_group(JobGroup("g", ("a",)))
    assert list(one.groups) == [] and list(two.groups) == ["g"]
    changed = two.modify_job(scheduled("a").with_changes(interval="2 days"))
    assert str(changed.job("a").interval) == "2 days"
    assert str(two.job("a").interval) == "1 day"
    assert list(changed.remove_group("g").groups) == []


# -- duplicate names ---------------------------------------------------------------------


def test_duplicate_job_in_build() -> None:
    with pytest.raises(InvalidJobError) as caught:
        Catalog.build([scheduled("a"), scheduled("a")])
    assert caught.value.problems == (
        Problem("a job with this name is defined twice", job="a", key="name"),
    )


def test_duplicate_group_in_build() -> None:
    with pytest.raises(InvalidJobError) as caught:
        Catalog.build([scheduled("a")], [JobGroup("g", ("a",)), JobGroup("g", ("a",))])
    assert caught.value.problems == (
        Problem("a group with this name is defined twice", group="g", key="name"),
    )


def test_add_existing_job_refused() -> None:
    catalog = Catalog.build([scheduled("a")])
    with pytest.raises(DuplicateNameError) as caught:
        catalog.add_jobs([scheduled("a")])
    assert caught.value.problem == Problem(
        "a job with this name exists already", job="a", key="name"
    )
    with pytest.raises(DuplicateNameError):
        Catalog().add_jobs([scheduled("b"), scheduled("b")])


def test_add_existing_group_refused() -> None:
    catalog = Catalog.build([scheduled("a")], [JobGroup("g", ("a",))])
    with pytest.raises(DuplicateNameError) as caught:
        catalog.add_group(JobGroup("g", ("a",)))
    assert caught.value.problem == Problem(
        "a group with this name exists already", group="g", key="name"
    )


def test_group_and_job_share_one_name_space() -> None:
    catalog = Catalog.build([scheduled("a")], [JobGroup("g", ("a",))])
    with pytest.raises(InvalidJobError) as caught:
        catalog.add_group(JobGroup("a", ("a",)))
    assert caught.value.problems == (
        Problem("a group cannot have the name of a job", group="a", key="name"),
    )
    with pytest.raises(DuplicateNameError) as dup:
        catalog.add_jobs([scheduled("g")])
    assert dup.value.problem == Problem("a group has this name already", job="g", key="name")
    with pytest.raises(InvalidJobError):
        Catalog.build([scheduled("a")], [JobGroup("a", ("a",))])


def test_add_jobs_refuses_what_is_not_a_job() -> None:
    with pytest.raises(InvalidJobError, match="add_job expects a Job, not str"):
        Catalog().add_jobs(["a"])  # type: ignore[list-item]


# -- dependences -------------------------------------------------------------------------


def test_unknown_dependence_target() -> None:
    with pytest.raises(InvalidJobError) as caught:
        Catalog.build([dependent("b", "ghost")])
    assert caught.value.problems == (
        Problem("depends on unknown job 'ghost'", job="b", key="dependence.job"),
    )
    with pytest.raises(InvalidJobError) as caught:
        Catalog.build([scheduled("a")]).add_jobs([dependent("b", "ghost")])
    assert caught.value.problem.job == "b"


def test_jobs_added_together_may_depend_on_each_other() -> None:
    catalog = Catalog().add_jobs([dependent("b", "a"), scheduled("a")])
    assert [j.name for j in catalog.dependents("a")] == ["b"]


def test_chains_are_fine() -> None:
    catalog = Catalog.build([scheduled("a"), dependent("b", "a"), dependent("c", "b")])
    assert [j.name for j in catalog.dependents("b")] == ["c"]


def test_two_job_cycle() -> None:
    with pytest.raises(InvalidJobError) as caught:
        Catalog.build([dependent("a", "b"), dependent("b", "a")])
    assert caught.value.problems == (
        Problem("dependence cycle: a -> b -> a", job="a", key="dependence.job"),
    )


def test_longer_cycle_reported_once_with_its_path() -> None:
    jobs = [
        scheduled("root"),
        dependent("a", "b"),
        dependent("b", "c"),
        dependent("c", "d"),
        dependent("d", "a"),
        dependent("leaf", "a"),  # hangs off the cycle: not part of it
    ]
    with pytest.raises(InvalidJobError) as caught:
        Catalog.build(jobs)
    assert caught.value.problems == (
        Problem("dependence cycle: a -> b -> c -> d -> a", job="a", key="dependence.job"),
    )


def test_modify_cannot_close_a_cycle() -> None:
    catalog = Catalog.build([scheduled("a"), dependent("b", "a"), dependent("c", "b")])
    with pytest.raises(InvalidJobError) as caught:
        catalog.modify_job(dependent("a", "c"))
    assert "dependence cycle: a -> c -> b -> a" in caught.value.problem.message
    assert catalog.job("a").dependence is None  # unchanged


def test_modify_unknown_job() -> None:
    with pytest.raises(UnknownNameError) as caught:
        Catalog().modify_job(scheduled("nope"))
    assert caught.value.problem == Problem("no job has this name", job="nope")
    assert str(caught.value) == "job 'nope': no job has this name"
    assert isinstance(caught.value, JobActionError)


# -- groups ------------------------------------------------------------------------------


def test_group_with_unknown_job() -> None:
    with pytest.raises(InvalidJobError) as caught:
        Catalog.build([scheduled("a")], [JobGroup("ops", ("a", "ghost"))])
    assert caught.value.problems == (Problem("lists unknown job 'ghost'", group="ops", key="jobs"),)
    with pytest.raises(InvalidJobError):
        Catalog.build([scheduled("a")]).add_group(JobGroup("ops", ("ghost",)))


def test_a_job_may_be_in_several_groups() -> None:
    catalog = Catalog.build([scheduled("a")], [JobGroup("x", ("a",)), JobGroup("y", ("a",))])
    assert [g.name for g in catalog.groups_of("a")] == ["x", "y"]


def test_modify_and_remove_unknown_group() -> None:
    with pytest.raises(UnknownNameError) as caught:
        Catalog().remove_group("g")
    assert caught.value.problem == Problem("no group has this name", group="g")
    with pytest.raises(UnknownNameError):
        Catalog().modify_group(JobGroup("g", ("a",)))


# -- removal -----------------------------------------------------------------------------


def test_removal_of_a_depended_on_job_names_its_dependents() -> None:
    catalog = Catalog.build([scheduled("a"), dependent("b", "a"), dependent("c", "a")])
    with pytest.raises(InvalidJobError) as caught:
        catalog.remove_job("a")
    assert caught.value.problem == Problem(
        "cannot remove: jobs 'b', 'c' depend on it (remove or change them first)", job="a"
    )
    assert list(catalog.remove_job("c").remove_job("b").remove_job("a").jobs) == []


def test_removal_of_the_last_job_of_a_group_names_its_groups() -> None:
    catalog = Catalog.build(
        [scheduled("a"), dependent("b", "a")],
        [JobGroup("ops", ("a",)), JobGroup("all", ("a", "b"))],
    )
    with pytest.raises(InvalidJobError) as caught:
        catalog.remove_job("a")
    assert caught.value.problem.message == (
        "cannot remove: jobs 'b' depend on it; it is the only job of groups 'ops', which would"
        " be left empty (remove or change them first)"
    )


def test_removing_a_job_takes_it_out_of_its_groups() -> None:
    """DESIGN: groups hold names, not jobs; a removed job leaves every group listing it."""
    catalog = Catalog.build(
        [scheduled("a"), scheduled("b"), scheduled("c")],
        [JobGroup("ops", ("a", "b")), JobGroup("all", ("a", "b", "c")), JobGroup("solo", ("c",))],
    )
    after = catalog.remove_job("b")
    assert list(after.jobs) == ["a", "c"]
    assert [(g.name, g.job_names) for g in after.groups.values()] == [
        ("ops", ("a",)),
        ("all", ("a", "c")),
        ("solo", ("c",)),
    ]
    assert after.groups_of("b") == [] and after.problems() == []
    assert catalog.groups["ops"].job_names == ("a", "b")  # unchanged
    with pytest.raises(InvalidJobError, match="only job of groups 'ops'"):
        after.remove_job("a")


def test_remove_unknown_job() -> None:
    with pytest.raises(UnknownNameError):
        Catalog().remove_job("nope")


def test_removing_a_group_keeps_its_jobs() -> None:
    catalog = Catalog.build([scheduled("a")], [JobGroup("g", ("a",))])
    assert list(catalog.remove_group("g").jobs) == ["a"]
    assert list(catalog.remove_group("g").remove_job("a").jobs) == []
