"""Every rag function names its own search_path (issue 43): a client whose session or role says
`search_path = pg_catalog` still gets every search mode and every reading function, and a
function's body never resolves a name through the caller's path."""

from __future__ import annotations

import pytest


def test_every_plpgsql_function_sets_its_search_path(corpus):
    # SQL functions are left out: a SET clause would stop the planner inlining them into their
    # caller's statement (rag.search, rag._dress, the cached kNN scans of decision 29). Their
    # callers set the path, and the calls below run them under a client's pg_catalog-only path.
    rows = corpus.execute(
        """SELECT p.proname, coalesce(array_to_string(p.proconfig, ','), '')
             FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             JOIN pg_language l ON l.oid = p.prolang
            WHERE n.nspname = 'rag' AND l.lanname = 'plpgsql'"""
    ).fetchall()
    assert len(rows) > 20
    assert sorted(name for name, config in rows if "search_path=" not in config) == []


@pytest.mark.parametrize("mode", ["auto", "two-stage", "hybrid", "bm25", "vector"])
def test_a_client_with_only_pg_catalog_on_its_path_searches(corpus, e5, mode):
    query = "le libre-échange et le travail national"
    expected = corpus.execute(
        "SELECT source_file, chunk_index FROM rag.search(%s, %s, %s, 5)", (query, e5.query(query), mode)
    ).fetchall()
    assert expected
    corpus.execute("SET LOCAL search_path = pg_catalog")
    got = corpus.execute(
        "SELECT source_file, chunk_index FROM rag.search(%s, %s::public.vector, %s, 5)",
        (query, e5.query(query), mode),
    ).fetchall()
    assert got == expected


def test_reading_functions_ignore_the_callers_path(corpus, e5):
    node = corpus.execute(
        "SELECT source_file FROM rag.hierarchical_content_nodes WHERE level = 0 LIMIT 1"
    ).fetchone()[0]
    book = corpus.execute("SELECT book FROM rag.books LIMIT 1").fetchone()[0]
    calls = [
        ("SELECT count(*) FROM rag.get_node(%s)", (node,)),
        ("SELECT count(*) FROM rag.get_parent(%s)", (node,)),
        ("SELECT count(*) FROM rag.outline(%s)", (book,)),
        ("SELECT count(*) FROM rag.list_books()", ()),
        ("SELECT count(*) FROM rag.build_context(%s, NULL, 800)", ("travail national",)),
        ("SELECT count(*) FROM rag.paragraphs WHERE source_file = %s", (node,)),
        ("SELECT count(*) FROM rag.check_quotes(%s::jsonb)", ('["le travail national"]',)),
    ]
    before = [corpus.execute(q, p).fetchone()[0] for q, p in calls]
    assert all(n > 0 for n in before)
    corpus.execute("SET LOCAL search_path = pg_catalog")
    assert [corpus.execute(q, p).fetchone()[0] for q, p in calls] == before
