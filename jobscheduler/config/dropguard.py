"""A reload that would drop every job: refused unless the file says so (``jobs: {}``).

An emptied or truncated file (an editor that saved nothing, a failed copy, a config
management run that wrote a blank template) reads as a valid configuration with no jobs; a
reload would then silently stop all scheduling. So a reload that finds no job where there
were some is refused, unless the file's top level says ``jobs: {}`` in so many words. So is
a file that now defines a name a job defined in code has (`reread`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import ConfigFileError, DuplicateNameError, Problem
from ..model.catalog import Catalog
from .base import DefinitionStore
from .codejobs import CodeJobStore
from .load import read_config_text
from .yamlnodes import YamlProblem, compose

__all__ = ["check_reload_keeps_jobs", "read_existing", "reread", "says_no_jobs"]

log = logging.getLogger("jobscheduler.config")


def says_no_jobs(text: str) -> bool:
    """True when the top level of `text` holds ``jobs:`` with an empty mapping (``jobs: {}``).

    ``jobs:`` with no value (null), no ``jobs`` key, an empty file or one of comments only
    do not count: they are what an accident leaves.
    """
    try:
        root = compose(text)
    except YamlProblem:
        return False
    if root is None or root.kind != "map":
        return False
    for key, value in root.pairs:
        if key.kind == "scalar" and key.value == "jobs":
            return value.kind == "map" and not value.pairs
    return False


def check_reload_keeps_jobs(path: Path | None, old: Catalog, new: Catalog) -> None:
    """Refuse (`ConfigFileError`) a reload from `old` to `new` that drops every job, unless
    the file at `path` explicitly says ``jobs: {}``; in that case log it at WARNING."""
    if path is None or not old.jobs or new.jobs:
        return
    try:
        explicit = says_no_jobs(read_config_text(path))
    except (OSError, ConfigFileError):
        explicit = False
    if not explicit:
        raise ConfigFileError(
            Problem(
                f"the file defines no job, and a reload would drop all {len(old.jobs)}; the "
                "current jobs are kept (write `jobs: {}` to remove every job on purpose)",
                str(path),
            )
        )
    log.warning("%s says `jobs: {}`: the reload drops all %d jobs", path, len(old.jobs))


def read_existing(store: DefinitionStore) -> Catalog:
    """Read the definitions again (`reload`, `start` after `stop`); a file that has gone is
    an error (the current jobs are kept), not an empty schedule."""
    path = store.path
    if path is not None and not path.exists():
        raise ConfigFileError(
            Problem("the configuration file is missing; the current jobs are kept", file=str(path))
        )
    return store.read()


def reread(store: CodeJobStore, in_force: Catalog) -> Catalog:
    """The definitions for `reload`: read again (`read_existing`), refused (raised, and a
    name the file shares with a job defined in code logged) for a broken file, one that
    clashes with the code, or one that drops every job of the file (`check_reload_keeps_jobs`).
    `in_force`: the definitions in force."""
    try:
        new = read_existing(store)
    except DuplicateNameError as exc:
        log.error("reload refused, the definitions in force are kept: %s", exc)
        raise
    in_file = Catalog({name: job for name, job in in_force.jobs.items() if job.source == "file"})
    check_reload_keeps_jobs(store.path, in_file, store.file_catalog)
    return new
