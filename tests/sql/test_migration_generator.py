"""`bookrag new-function-migration`: what it writes for each kind of change, and that the
migration it writes leaves the database with exactly the files' definitions (issue 12)."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from bookrag.functions import FUNCTIONS_DIR, MIGRATIONS_DIR, names_type, write_function_migration
from bookrag.migrate import apply_migrations
from tests.conftest import _conninfo

PROBE_TYPE = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
                   WHERE n.nspname = 'rag' AND t.typname = 'zz_row') THEN
        CREATE TYPE rag.zz_row AS ({attrs});
    END IF;
END
$$;
"""
PROBE_ROWS = """-- rag.zz_rows: a probe returning the probe row type.
CREATE OR REPLACE FUNCTION rag.zz_rows()
RETURNS SETOF rag.zz_row
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    r rag.zz_row;
BEGIN
    r.a := 1;
    RETURN NEXT r;
END
$$;
"""
PROBE = """-- rag.zz_probe: a probe function.
CREATE OR REPLACE FUNCTION rag.zz_probe(
    p_a INT{extra}
) RETURNS {result}
LANGUAGE sql IMMUTABLE
AS $$
    SELECT {body};
$$;
"""


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    functions, migrations = tmp_path / "functions", tmp_path / "migrations"
    shutil.copytree(FUNCTIONS_DIR, functions)
    shutil.copytree(MIGRATIONS_DIR, migrations)
    return functions, migrations


@pytest.fixture
def fresh_db(postgresql_proc):
    name = "bookrag_generator_test"
    admin = _conninfo(postgresql_proc, "postgres")
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield _conninfo(postgresql_proc, name)
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def generate(tree, slug: str) -> str:
    functions, migrations = tree
    path = write_function_migration(slug, f"test: {slug}", folder=migrations, functions=functions)
    assert path is not None
    return path.read_text(encoding="utf-8")


def overloads(url: str, name: str) -> list[str]:
    with psycopg.connect(url) as c:
        return [
            r[0]
            for r in c.execute(
                "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n "
                "ON n.oid = p.pronamespace WHERE n.nspname = 'rag' AND p.proname = %s",
                (name,),
            )
        ]


@pytest.mark.parametrize(
    "text,uses",
    [
        ("RETURNS SETOF rag.zz_row", True),
        ("RETURNS SETOF RAG.ZZ_ROW", True),
        ('RETURNS SETOF "rag"."zz_row"', True),
        ('x rag."zz_row";', True),
        ("rag.zz_row[]", True),
        ("-- was rag.zz_row\nRETURNS INT", False),
        ("/* returns rag.zz_row */ SELECT 1", False),
        ("rag.zz_rows()", False),
        ("rag.zz_row_x", False),
        ("rag._zz_row", False),
    ],
)
def test_a_type_is_named_in_code_only(text, uses):
    assert names_type("rag.zz_row", text) is uses


def test_nothing_changed_writes_nothing(tree):
    functions, migrations = tree
    write_function_migration(
        "first", "sync", folder=migrations, functions=functions
    )  # files not yet in a migration
    assert write_function_migration("again", "nothing", folder=migrations, functions=functions) is None


def test_each_kind_of_change(tree, fresh_db):
    functions, migrations = tree
    write_function_migration("sync", "files not yet migrated", folder=migrations, functions=functions)

    # a new function (and a new row type): installed, nothing dropped
    (functions / "_types.sql").write_text(
        (functions / "_types.sql").read_text() + PROBE_TYPE.format(attrs="a INT")
    )
    (functions / "zz_probe.sql").write_text(PROBE.format(extra="", result="INT", body="p_a"))
    (functions / "zz_rows.sql").write_text(PROBE_ROWS)
    text = generate(tree, "new_function")
    assert (
        "-- function: zz_probe sha256:" in text
        and "-- function: zz_rows sha256:" in text
        and "DROP" not in text
    )
    assert text.index("CREATE OR REPLACE FUNCTION rag.zz_probe") < text.index(
        "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;"
    )
    apply_migrations(fresh_db, migrations)
    assert overloads(fresh_db, "zz_probe") == ["rag.zz_probe(integer)"]
    with psycopg.connect(fresh_db) as c:  # the reader may run it, PUBLIC may not
        assert c.execute(
            "SELECT has_function_privilege('bookrag_reader', 'rag.zz_probe(int)', 'EXECUTE'), "
            "has_function_privilege('public', 'rag.zz_probe(int)', 'EXECUTE')"
        ).fetchone() == (True, False)

    # a changed body: replaced in place
    (functions / "zz_probe.sql").write_text(PROBE.format(extra="", result="INT", body="p_a + 1"))
    text = generate(tree, "changed_body")
    assert "DROP" not in text and "SELECT p_a + 1;" in text
    apply_migrations(fresh_db, migrations)
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT rag.zz_probe(1)").fetchone() == (2,)

    # changed arguments: the old overload is dropped first, the new one granted to the reader
    (functions / "zz_probe.sql").write_text(
        PROBE.format(extra=",\n    p_b INT DEFAULT 10", result="INT", body="p_a + p_b")
    )
    text = generate(tree, "changed_arguments")
    assert "DROP FUNCTION IF EXISTS rag.zz_probe(int);" in text
    assert "GRANT EXECUTE ON FUNCTION rag.zz_probe(int, int) TO bookrag_reader;" in text
    assert text.index("DROP FUNCTION") < text.index("CREATE OR REPLACE FUNCTION rag.zz_probe")
    apply_migrations(fresh_db, migrations)
    assert overloads(fresh_db, "zz_probe") == ["rag.zz_probe(integer,integer)"]

    # a changed result type
    (functions / "zz_probe.sql").write_text(
        PROBE.format(extra=",\n    p_b INT DEFAULT 10", result="TEXT", body="(p_a + p_b)::text")
    )
    text = generate(tree, "changed_result")
    assert "DROP FUNCTION IF EXISTS rag.zz_probe(int, int);" in text
    apply_migrations(fresh_db, migrations)
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT pg_typeof(rag.zz_probe(1))::text").fetchone() == ("text",)

    # a changed row type: dropped with its dependants, re-created, dependants re-installed unchanged
    (functions / "_types.sql").write_text(
        (functions / "_types.sql")
        .read_text()
        .replace("CREATE TYPE rag.zz_row AS (a INT);", "CREATE TYPE rag.zz_row AS (a INT, b TEXT);")
    )
    text = generate(tree, "changed_row_type")
    assert (
        "DROP TYPE IF EXISTS rag.zz_row CASCADE;" in text
        and "CREATE TYPE rag.zz_row AS (a int, b text);" in text
    )
    assert "-- function: zz_rows sha256:" in text  # unchanged, but the cascade dropped it
    assert "GRANT EXECUTE ON FUNCTION rag.zz_rows() TO bookrag_reader;" in text
    apply_migrations(fresh_db, migrations)
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT * FROM rag.zz_rows()").fetchall() == [(1, None)]
        assert c.execute(
            "SELECT has_function_privilege('bookrag_reader', 'rag.zz_rows()', 'EXECUTE')"
        ).fetchone() == (True,)
        assert c.execute(
            "SELECT has_function_privilege('public', 'rag.zz_rows()', 'EXECUTE')"
        ).fetchone() == (False,)

    # a removed row type: refused while a function still names it, then dropped; the function that
    # returned it, now returning another type, is re-created and granted
    (functions / "_types.sql").write_text(
        (functions / "_types.sql").read_text().replace(PROBE_TYPE.format(attrs="a INT, b TEXT"), "")
    )
    assert "zz_row" not in (functions / "_types.sql").read_text()
    (functions / "zz_rows.sql").write_text(
        PROBE_ROWS.replace("RETURNS SETOF rag.zz_row", "RETURNS SETOF RAG.ZZ_ROW")
    )
    with pytest.raises(ValueError, match=r"rag.zz_row is removed from _types.sql but zz_rows still name it"):
        generate(tree, "removed_row_type")
    (functions / "zz_rows.sql").write_text(
        PROBE_ROWS.replace("RETURNS SETOF rag.zz_row", "RETURNS SETOF INT  -- was rag.zz_row")
        .replace("    r rag.zz_row;", "    r INT := 1;")
        .replace("    r.a := 1;\n", "")
    )
    text = generate(tree, "removed_row_type")
    assert "DROP TYPE IF EXISTS rag.zz_row CASCADE;" in text and "CREATE TYPE rag.zz_row" not in text
    assert "GRANT EXECUTE ON FUNCTION rag.zz_rows() TO bookrag_reader;" in text
    apply_migrations(fresh_db, migrations)
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT * FROM rag.zz_rows()").fetchall() == [(1,)]
        assert c.execute("SELECT to_regtype('rag.zz_row')").fetchone() == (None,)

    # changed OUT parameters (a result without RETURNS): the old function is dropped by its input
    # arguments only (DROP FUNCTION ignores OUT parameters; naming them as inputs would drop nothing)
    out_probe = """-- rag.zz_out: a probe with OUT parameters.
CREATE OR REPLACE FUNCTION rag.zz_out(
    p_a INT,
    OUT a INT{extra}
)
LANGUAGE sql IMMUTABLE
AS $$
    SELECT p_a{body};
$$;
"""
    (functions / "zz_out.sql").write_text(out_probe.format(extra="", body=""))
    generate(tree, "out_new")
    apply_migrations(fresh_db, migrations)
    (functions / "zz_out.sql").write_text(out_probe.format(extra=",\n    OUT b INT", body=", p_a + 1"))
    text = generate(tree, "out_changed")
    assert "DROP FUNCTION IF EXISTS rag.zz_out(int);" in text
    apply_migrations(fresh_db, migrations)
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT * FROM rag.zz_out(1)").fetchone() == (1, 2)
    # a renamed OUT parameter is a changed result too
    (functions / "zz_out.sql").write_text(out_probe.format(extra=",\n    OUT c INT", body=", p_a + 1"))
    assert "DROP FUNCTION IF EXISTS rag.zz_out(int);" in generate(tree, "out_renamed")
    apply_migrations(fresh_db, migrations)
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT c FROM rag.zz_out(1)").fetchone() == (2,)

    # a deleted function file: its function is dropped, and the next migration does not drop it again
    (functions / "zz_probe.sql").unlink()
    text = generate(tree, "deleted_function")
    assert "-- dropped: zz_probe" in text and "DROP FUNCTION IF EXISTS rag.zz_probe(int, int);" in text
    assert "INSERT INTO rag.function_versions" not in text
    apply_migrations(fresh_db, migrations)
    assert overloads(fresh_db, "zz_probe") == []
    with psycopg.connect(fresh_db) as c:
        assert c.execute("SELECT count(*) FROM rag.function_versions WHERE name = 'zz_probe'").fetchone() == (
            0,
        )
    assert write_function_migration("again", "nothing", folder=migrations, functions=functions) is None
