"""Schema versions of the SQL stores: numbered files ``sql/<engine>/NNN_name.sql``.

A store opened on a database applies, in one transaction under the engine's write lock, every
file numbered above the version the database has (none: all), and records each in
``jobscheduler_schema``. A database with a version above the newest file was written by a
newer jobscheduler: it is refused with a `StoreError` (nothing is changed), since this code
could not keep what that version keeps.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .base import StoreError
from .sqlqueries import SQL_FOLDER

__all__ = ["migrations", "schema_version", "upgrade"]

_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


def migrations(engine: str) -> list[tuple[int, str]]:
    """The (version, SQL text) of `engine`'s schema files, in order."""
    folder = SQL_FOLDER / engine
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text(encoding="utf-8")))
    found.sort()
    if [v for v, _ in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"the {engine} schema files are not numbered 001, 002, …")
    return found


def statements(script: str) -> list[str]:
    """The statements of a schema file (comments dropped; no ``;`` inside a statement)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def schema_version(execute: Callable[[str], Any], exists_sql: str) -> int:
    """The version the database has (0: no schema yet)."""
    if not execute(exists_sql).fetchone()[0]:
        return 0
    return int(execute("SELECT COALESCE(MAX(version), 0) FROM jobscheduler_schema").fetchone()[0])


def upgrade(
    execute: Callable[[str], Any], engine: str, exists_sql: str, masked_url: str
) -> tuple[int, int]:
    """Bring the schema to the newest version, in the caller's transaction (which holds the
    engine's write lock). Returns (version found, version now)."""
    files = migrations(engine)
    newest = files[-1][0]
    found = schema_version(execute, exists_sql)
    if found > newest:
        raise StoreError(
            f"state store {masked_url!r} has schema version {found}, newer than this "
            f"jobscheduler knows (up to {newest}): upgrade jobscheduler to use it"
        )
    for version, script in files:
        if version > found:
            for statement in statements(script):
                execute(statement)
            execute(f"INSERT INTO jobscheduler_schema (version) VALUES ({version})")
    return found, newest
