"""The SQL stores' named queries (``state/sql/*.sql``) and their loader."""

from __future__ import annotations

import re
import sqlite3
from importlib import resources

import pytest

from jobscheduler.state.sqlqueries import OWN, QUERIES, SHARED, QueryFileError, load, parse

FRAGMENTS = """\
-- fragment: now
clock()
-- fragment: greatest
MAX
-- fragment: waited
({now} - submitted)
-- fragment: skip_locked
"""


def shared_text() -> str:
    return resources.files("jobscheduler.state").joinpath("sql", "queries.sql").read_text()


@pytest.mark.parametrize("engine", sorted(OWN))
def test_every_named_query_exists_for_each_engine(engine: str) -> None:
    queries = QUERIES[engine]
    assert set(queries) == SHARED | OWN[engine]
    for name, sql in queries.items():
        assert sql.strip(), name
        assert not re.search(r"\{(now|greatest|waited|skip_locked)\}", sql), name
        assert not sql.rstrip().endswith(";"), name
        assert "--" not in sql, name  # comments are dropped (psycopg reads %(x)s in them)
        if engine == "sqlite":
            assert "%(" not in sql, name
        else:
            assert not re.search(r"(?<!:):[a-z]", sql), name


def test_sqlite_reads_every_shared_query_with_its_named_parameters() -> None:
    # Compiled against the real schema: a typo in a file fails here, not in a store.
    from jobscheduler.state.sqlmigrate import migrations, statements

    db = sqlite3.connect(":memory:")
    for _, script in migrations("sqlite"):
        for statement in statements(script):
            db.execute(statement)
    lists = {
        "{rows}": "(:job_0, :last_slot_0, 0, NULL)",
        "{jobs}": "1 = 1",
        "{ids}": ":id_0",
        "{cases}": "NULL",
    }
    for name, sql in QUERIES["sqlite"].items():
        for slot, text in lists.items():
            sql = sql.replace(slot, text)
        names = set(re.findall(r":([a-z][a-z0-9_]*)", sql))
        try:
            db.execute(f"EXPLAIN {sql}", dict.fromkeys(names)).fetchall()  # compiled, not run
        except sqlite3.Error as exc:
            pytest.fail(f"query {name!r}: {exc}")


def test_a_query_defined_twice_is_refused_with_its_file_and_line() -> None:
    text = "-- name: now\nSELECT 1;\n\n-- name: now\nSELECT 2;\n"
    with pytest.raises(QueryFileError, match=r"my\.sql, line 4: name 'now' is defined twice"):
        parse(text, "my.sql")


def test_a_name_repeated_across_the_shared_and_an_engine_file_is_refused() -> None:
    own = FRAGMENTS + "-- name: claim\nSELECT 1\n"
    with pytest.raises(QueryFileError, match=r"sql/sqlite/queries.sql: unknown query 'claim'"):
        load("sqlite", shared_text(), own)


def test_an_unknown_or_missing_name_is_refused() -> None:
    extra = shared_text() + "\n-- name: claim_evrything\nSELECT 1;\n"
    with pytest.raises(QueryFileError, match=r"unknown query 'claim_evrything'"):
        load("sqlite", extra, FRAGMENTS)
    missing = shared_text().replace("-- name: kill_done", "-- name: kill_dune")
    with pytest.raises(QueryFileError, match=r"unknown query 'kill_dune'"):
        load("sqlite", missing, FRAGMENTS)
    gone = re.sub(r"-- name: kill_done\n[^\n]*\n", "", shared_text())
    with pytest.raises(QueryFileError, match=r"sql/queries.sql: no query 'kill_done'"):
        load("sqlite", gone, FRAGMENTS)
    with pytest.raises(QueryFileError, match=r"no fragment 'skip_locked'"):
        load("sqlite", shared_text(), FRAGMENTS.replace("-- fragment: skip_locked\n", ""))


def test_a_malformed_block_is_refused() -> None:
    with pytest.raises(QueryFileError, match=r"x.sql: query 'now' is empty"):
        parse("-- name: now\n-- only a comment\n;\n", "x.sql")
    with pytest.raises(QueryFileError, match=r"x.sql, line 1: 'Now!' is not a name"):
        parse("-- name: Now!\nSELECT 1\n", "x.sql")
    shared = shared_text().replace("SELECT {now}", "SELECT {nwo}")
    with pytest.raises(QueryFileError, match=r"query 'now': unknown \{nwo\}"):
        load("sqlite", shared, FRAGMENTS)


def test_parameters_are_named_once_and_converted_for_sqlite() -> None:
    shared = shared_text()
    queries = load("sqlite", shared, FRAGMENTS)
    assert queries["now"] == "SELECT clock()"
    assert "(clock() - submitted)" in queries["take_candidates"]
    assert (
        queries["leave"]
        == "UPDATE jobscheduler_nodes SET state = 'left' WHERE name = :name AND state = 'up'"
    )
    postgres = load(
        "postgres",
        shared,
        FRAGMENTS + "\n".join(f"-- name: {name}\nSELECT 1" for name in sorted(OWN["postgres"])),
    )
    assert "WHERE name = %(name)s AND" in postgres["leave"]
