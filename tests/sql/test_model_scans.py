"""The corpus model's kNN scans (rag._install_model_scans, migration 0023): written at load and
after migrations as inlinable SQL functions, the same rows as their stand-ins, out of the
reader's reach; they hold no ranking."""

from __future__ import annotations

import psycopg

from bookrag import db
from bookrag.functions import FUNCTIONS_DIR
from bookrag.migrate import apply_migrations, install_model_scans
from bookrag.search import vector_literal

KNN = "rag._knn(text,vector,integer,text,integer[],integer[])"
STAND_INS = [(FUNCTIONS_DIR / f"{name}.sql").read_text() for name in ("_knn", "_knn_sentences")]


def written_for(conn: psycopg.Connection) -> tuple[str, str | None]:
    """rag._knn's language and the model its text names ($1 = 'model'), None for the stand-in."""
    lang, src = conn.execute(
        "SELECT l.lanname, p.prosrc FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
        f"WHERE p.oid = '{KNN}'::regprocedure"
    ).fetchone()
    model = src.split("$1 = '", 1)[1].split("'", 1)[0] if "$1 = '" in src else None
    return lang, model


def test_the_written_scans_give_the_stand_ins_rows(corpus, e5):
    """The scans written for the corpus model (SQL) and the stand-ins (PL/pgSQL, EXECUTE of the
    same text) return the same rows, with filters and without; and so does the default search."""
    model = corpus.execute("SELECT model FROM rag.embedding_models").fetchone()[0]
    assert written_for(corpus) == ("sql", model)
    v = e5.query("le prix du pain")
    calls = [
        ("SELECT * FROM rag._knn(%s, %s, 40)", (model, v)),
        ("SELECT * FROM rag._knn(%s, %s, 10, p_levels => '{0}')", (model, v)),
        ("SELECT * FROM rag._knn_sentences(%s, %s, 20)", (model, v)),
        ("SELECT id, rank, score FROM rag.search('le prix du pain', %s, p_k => 8)", (v,)),
    ]
    written = [corpus.execute(q, a).fetchall() for q, a in calls]
    assert all(written), "every call finds rows in the fixture corpus"
    with corpus.transaction(force_rollback=True):
        for text in STAND_INS:
            corpus.execute(text)
        assert written_for(corpus) == ("plpgsql", None)
        assert [corpus.execute(q, a).fetchall() for q, a in calls] == written
    assert corpus.execute("SELECT count(*) FROM rag._knn('another/model', %s, 40)", (v,)).fetchone()[0] == 0


def test_the_default_search_plans_the_hnsw_scan_once(corpus, e5):
    """Inlined into a static statement, rag._knn is the model's HNSW index scan (its expression
    and predicate matched), which a prepared statement keeps in its cached generic plan."""
    model = corpus.execute("SELECT model FROM rag.embedding_models").fetchone()[0]
    corpus.execute("SET plan_cache_mode = force_generic_plan")
    corpus.execute("SET enable_seqscan = off")
    with psycopg.ClientCursor(
        corpus
    ) as cur:  # client-side binding: PREPARE's own $1 reaches the server as written
        cur.execute("PREPARE knn(text, vector, int) AS SELECT * FROM rag._knn($1, $2, $3)")
        plan = "\n".join(
            r[0]
            for r in cur.execute("EXPLAIN EXECUTE knn(%s, %s, 40)", (model, vector_literal(e5.query("pain"))))
        )
        cur.execute("DEALLOCATE knn")
    assert "Index Scan using hcn_hnsw_" in plan, plan
    assert "Function Scan" not in plan, plan


def test_registering_a_model_and_migrating_write_them(conn):
    """Before any model, rag._knn is its file's stand-in; rag._ensure_vector_index (the loader's
    call) writes the model's scans, readable by the reader role and not by PUBLIC; `bookrag
    migrate`'s installer writes them again over the stand-ins; a model name with a $ keeps them."""
    assert written_for(conn) == ("plpgsql", None)
    conn.execute("SELECT rag._ensure_vector_index('test/model', 3)")
    conn.commit()
    assert written_for(conn) == ("sql", "test/model")
    assert conn.execute(
        "SELECT has_function_privilege('bookrag_reader', %s, 'EXECUTE'), "
        "has_function_privilege('public', %s, 'EXECUTE')",
        (KNN, KNN),
    ).fetchone() == (True, False)
    for text in STAND_INS:
        conn.execute(text)
    conn.commit()
    assert written_for(conn) == ("plpgsql", None)
    install_model_scans(conn)
    assert written_for(conn) == ("sql", "test/model")
    assert conn.execute("SELECT rag._install_model_scans('a$body$b', 3)").fetchone()[0] is None
    assert written_for(conn) == ("sql", "test/model")
    assert (
        conn.execute("SELECT count(*) FROM rag.search('x', '[1,0,0]'::vector)").fetchone()[0] == 0
    )  # empty corpus


def test_migrate_writes_them_when_the_stand_ins_are_installed(pg_url):
    """`bookrag migrate` with nothing to apply still writes the registered model's scans over
    the stand-ins (a migration re-installs them whenever their files change)."""
    with db.connect(pg_url, autocommit=True) as c:
        c.execute("SELECT rag._ensure_vector_index('test/model', 3)")
        for text in STAND_INS:
            c.execute(text)
        assert written_for(c) == ("plpgsql", None)
    assert apply_migrations(pg_url) == []
    with db.connect(pg_url, autocommit=True) as c:
        assert written_for(c) == ("sql", "test/model")
