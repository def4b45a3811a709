"""A reload that would drop every job: refused unless the file says so (``jobs: {}``).

An emptied or truncated file (an editor that saved nothing, a failed copy, a config
management run that wrote a blank template) reads as a valid configuration with no jobs; a
reload would then silently stop all scheduling. So a reload that finds no job where there
were some is refused, unless the file's top level says ``jobs: {}`` in so many words.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import ConfigFileError, Problem
from ..model.catalog import Catalog
from .base import DefinitionStore
from .load import read_config_text
from .yamlnodes import YamlProblem, compose

__all__ = ["check_reload_keeps_jobs", "read_existing", "says_no_jobs"]

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
