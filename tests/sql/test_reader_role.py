"""The reader role is the wall (issue 13): logged in as bookrag_reader without the MCP server's
guard, even with its read-only default lifted, it can create nothing anywhere, run no side-effect
function, and execute exactly the volatile functions in the committed allowlist."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from bookrag import db

ALLOWLIST = Path(__file__).parent / "reader_volatile_functions.txt"


@pytest.fixture(scope="module")
def migrated_url(postgresql_proc):
    """A database migrated from empty (not copied from the template: CREATE DATABASE … TEMPLATE
    does not copy database-level privileges such as the TEMPORARY revoke)."""
    from psycopg import sql

    from bookrag.migrate import apply_migrations
    from tests.conftest import _conninfo

    name = "bookrag_role_test"
    admin = _conninfo(postgresql_proc, "postgres")
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = _conninfo(postgresql_proc, name)
    apply_migrations(url)
    yield url
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(params=[db.READER_ROLE, db.MCP_ROLE])
def reader_rw(migrated_url: str, request):
    """bookrag_reader (and bookrag_mcp, its member) in a read-write session: only privileges stand in the way."""
    url = psycopg.conninfo.make_conninfo(
        db.with_user(migrated_url, request.param), options="-c default_transaction_read_only=off"
    )
    c = psycopg.connect(url, autocommit=True)
    yield c
    c.close()


ATTEMPTS = {
    "CREATE FUNCTION pdb.score(integer) RETURNS float8 LANGUAGE sql AS 'SELECT 1.0'": "permission denied for schema pdb",
    "CREATE FUNCTION paradedb.x() RETURNS int LANGUAGE sql AS 'SELECT 1'": "permission denied for schema paradedb",
    "CREATE FUNCTION public.x() RETURNS int LANGUAGE sql AS 'SELECT 1'": "permission denied for schema public",
    "CREATE TABLE rag.x (a int)": "permission denied for schema rag",
    "CREATE TABLE x (a int)": "permission denied for schema public",
    "CREATE TEMP TABLE x (a int)": 'permission denied to create temporary tables in database "{db}"',
    "CREATE SCHEMA x": "permission denied for database {db}",
    "DO $$BEGIN RAISE NOTICE 'x'; END$$": "permission denied for language plpgsql",
    "SELECT set_config('statement_timeout', '0', false)": "permission denied for function set_config",
    "SELECT pg_advisory_lock(4242001)": "permission denied for function pg_advisory_lock",
    "SELECT pg_advisory_xact_lock(4242001)": "permission denied for function pg_advisory_xact_lock",
    "SELECT pg_try_advisory_lock(4242001)": "permission denied for function pg_try_advisory_lock",
    "SELECT pg_sleep(0)": "permission denied for function pg_sleep",
    "SELECT lo_creat(-1)": "permission denied for function lo_creat",
    "SELECT lo_from_bytea(0, 'x')": "permission denied for function lo_from_bytea",
    "SELECT pg_notify('x', 'y')": "permission denied for function pg_notify",
    "SELECT query_to_xml('SELECT 1', true, true, '')": "permission denied for function query_to_xml",
    "SELECT pg_cancel_backend(1)": "permission denied for function pg_cancel_backend",
    "SELECT paradedb.force_merge('rag.hcn_bm25_idx'::regclass, 1::bigint)": "permission denied for function force_merge",
    "SELECT rag._ensure_vector_index('x', 3)": "permission denied for function _ensure_vector_index",
    "SELECT rag._install_model_scans('x', 3)": "permission denied for function _install_model_scans",
    "INSERT INTO rag.books (book, title) VALUES ('x', 'x')": "permission denied for table books",
    "DELETE FROM rag.hierarchical_content_nodes": "permission denied for table hierarchical_content_nodes",
}


@pytest.mark.parametrize("statement", list(ATTEMPTS))
def test_the_reader_cannot(reader_rw, statement):
    dbname = reader_rw.info.dbname
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as err:
        reader_rw.execute(statement)
    assert err.value.diag.message_primary == ATTEMPTS[statement].format(db=dbname)
    assert reader_rw.execute("SELECT 1").fetchone() == (1,)  # still usable


def test_the_readers_limits(migrated_url):
    reader = psycopg.connect(db.with_user(migrated_url, db.READER_ROLE), autocommit=True)
    settings = {
        name: reader.execute(f"SHOW {name}").fetchone()[0]
        for name in (
            "default_transaction_read_only",
            "statement_timeout",
            "lock_timeout",
            "idle_in_transaction_session_timeout",
            "work_mem",
            "temp_file_limit",
        )
    }
    assert settings == {
        "default_transaction_read_only": "on",
        "statement_timeout": "5s",
        "lock_timeout": "2s",
        "idle_in_transaction_session_timeout": "30s",
        "work_mem": "16MB",
        "temp_file_limit": "256MB",
    }
    assert reader.execute("SELECT rolconnlimit FROM pg_roles WHERE rolname = current_user").fetchone() == (
        24,
    )
    # and it can still search: the HNSW settings go through the bounded definer helper
    assert reader.execute(
        "SELECT count(*) FROM rag.search(NULL, array_fill(0.1, ARRAY[384])::vector, 'vector', 3)"
    ).fetchone() == (0,)
    reader.close()


@pytest.mark.parametrize("role", [db.READER_ROLE, db.MCP_ROLE])
@pytest.mark.parametrize("other", ["postgres", "template1"])
def test_the_reader_may_connect_to_no_other_database(migrated_url, role, other):
    """In the maintenance database and template1, none of migration 0003's revokes apply: a login
    there could create temp tables and functions. Migration 0021 revokes CONNECT from PUBLIC."""
    url = psycopg.conninfo.make_conninfo(db.with_user(migrated_url, role), dbname=other)
    with pytest.raises(psycopg.OperationalError) as err:
        psycopg.connect(url).close()
    assert f'permission denied for database "{other}"' in str(err.value)
    # what must pass: the same role in the corpus database, and the owner in the other one
    with psycopg.connect(db.with_user(migrated_url, role)) as c:
        assert c.execute("SELECT count(*) FROM rag.books").fetchone() == (0,)
    with psycopg.connect(psycopg.conninfo.make_conninfo(migrated_url, dbname=other)) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_the_mcp_role_has_the_readers_limits_and_connections_of_its_own(migrated_url):
    mcp = psycopg.connect(db.with_user(migrated_url, db.MCP_ROLE), autocommit=True)
    settings = {
        name: mcp.execute(f"SHOW {name}").fetchone()[0]
        for name in (
            "default_transaction_read_only",
            "lock_timeout",
            "idle_in_transaction_session_timeout",
            "work_mem",
            "temp_file_limit",
        )
    }
    assert settings == {
        "default_transaction_read_only": "on",
        "lock_timeout": "2s",
        "idle_in_transaction_session_timeout": "30s",
        "work_mem": "16MB",
        "temp_file_limit": "256MB",
    }
    assert mcp.execute("SELECT rolconnlimit FROM pg_roles WHERE rolname = current_user").fetchone() == (12,)
    assert mcp.execute(
        "SELECT count(*) FROM rag.search(NULL, array_fill(0.1, ARRAY[384])::vector, 'vector', 3)"
    ).fetchone() == (0,)
    mcp.close()


def test_direct_logins_cannot_starve_the_mcp_servers_connections(migrated_url):
    """bookrag_reader holding every connection it may open leaves bookrag_mcp's budget whole."""
    with psycopg.connect(
        migrated_url, autocommit=True
    ) as admin:  # earlier tests' backends may still be exiting
        deadline = time.monotonic() + 30
        while (
            admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename IN (%s, %s)",
                (db.READER_ROLE, db.MCP_ROLE),
            ).fetchone()[0]
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
    url = db.with_user(migrated_url, db.READER_ROLE)
    held = [psycopg.connect(url) for _ in range(24)]
    try:
        with pytest.raises(psycopg.OperationalError, match='too many connections for role "bookrag_reader"'):
            psycopg.connect(url).close()
        servers = [psycopg.connect(db.with_user(migrated_url, db.MCP_ROLE)) for _ in range(8)]
        assert [c.execute("SELECT count(*) FROM rag.list_books()").fetchone() for c in servers] == [(0,)] * 8
        for c in servers:
            c.close()
    finally:
        for c in held:
            c.close()


def test_no_rag_function_is_executable_by_public(conn):
    # every migration that creates functions revokes PUBLIC's default EXECUTE again
    rows = conn.execute("""
        SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'rag' AND has_function_privilege('public', p.oid, 'EXECUTE') ORDER BY 1""").fetchall()
    assert rows == []


def executable_volatile_functions(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute("""
        SELECT DISTINCT n.nspname || '.' || p.proname
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE p.provolatile = 'v' AND p.prokind IN ('f', 'p')
          AND has_function_privilege('bookrag_reader', p.oid, 'EXECUTE')
        ORDER BY 1""").fetchall()
    return [r[0] for r in rows]


def test_volatile_functions_the_reader_can_execute_are_the_allowlist(conn):
    """Every function with possible side effects the role may run, against the reviewed list in
    reader_volatile_functions.txt (what remains is harmless without privileges: catalog probes,
    random, index/trigger handlers that need ownership, replication calls that need REPLICATION)."""
    allowed = [line.split("#")[0].strip() for line in ALLOWLIST.read_text().splitlines()]
    allowed = [a for a in allowed if a]
    actual = executable_volatile_functions(conn)
    assert sorted(set(actual) - set(allowed)) == [], (
        "newly executable by bookrag_reader: review, then add to the allowlist"
    )
    assert sorted(set(allowed) - set(actual)) == [], "no longer executable: remove from the allowlist"
