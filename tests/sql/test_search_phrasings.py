"""rag.search_phrasings on the fixture corpus: the question alone gives rag.search's own rows;
with phrasings, each wording is one rag.search and the fused list says who found what; bad
phrasings are one clear error each and change nothing."""

from __future__ import annotations

import psycopg
import pytest

from bookrag.search import SearchRequest, search

QUESTION = "Qui paie l'entretien des chemins ?"
KEYWORDS = "péage pont routes entretien voyageurs"
PASSAGE = "Le péage du pont paie l'entretien de la route, et les marchands le mettent dans leurs prix."
ROUTES = "corpus/traite-des-echanges/premiere-partie/chapitre-02-les-routes/source.md"
CALL = (
    "SELECT rank, score, found_by, phrasing_ranks, (hit).id, (hit).source_file FROM rag.search_phrasings("
    "%s, %s, %s, %s::vector[], p_k => %s, p_mode => %s, p_fusion => %s)"
)


def fused(conn, wordings, vectors, k=5, mode="auto", fusion="rrf"):
    return conn.execute(
        CALL, (wordings[0], vectors[0], wordings[1:] or None, vectors[1:] or None, k, mode, fusion)
    ).fetchall()


@pytest.mark.parametrize("mode", ["auto", "hybrid", "two-stage", "bm25"])
def test_the_question_alone_is_rag_search(corpus, e5, mode):
    for q in (QUESTION, "le prix du pain", "monnaie"):
        v = e5.query(q) if mode != "bm25" else None
        alone = corpus.execute(
            "SELECT rank, (hit).id FROM rag.search_phrasings(%s, %s, NULL, NULL, p_k => 5, p_mode => %s)",
            (q, v, mode),
        ).fetchall()
        assert (
            alone == corpus.execute("SELECT rank, id FROM rag.search(%s, %s, %s, 5)", (q, v, mode)).fetchall()
        )
        assert alone


@pytest.mark.parametrize("fusion", ["rrf", "best"])
def test_each_hit_names_the_wordings_that_found_it_and_their_ranks(corpus, e5, fusion):
    wordings = [QUESTION, KEYWORDS, PASSAGE]
    vectors = [e5.query(w) for w in wordings]
    rows = fused(corpus, wordings, vectors, fusion=fusion)
    assert [r[0] for r in rows] == [1, 2, 3, 4, 5]
    assert [r[1] for r in rows] == sorted((r[1] for r in rows), reverse=True)
    lists = {
        i: [h[0] for h in corpus.execute("SELECT id FROM rag.search(%s, %s, 'auto', 20)", (w, v)).fetchall()]
        for i, (w, v) in enumerate(zip(wordings, vectors))
    }
    for _, score, found_by, ranks, hit_id, _ in rows:
        assert found_by == [i for i in lists if hit_id in lists[i]]
        assert ranks == [lists[i].index(hit_id) + 1 for i in found_by]
        expected = (sum if fusion == "rrf" else max)(1 / (60 + r) for r in ranks)
        assert score == pytest.approx(expected)
    assert ROUTES in {r[5] for r in rows}


def test_python_search_embeds_the_phrasings_in_one_batch_and_gives_the_same_rows(corpus, e5):
    hits = search(corpus, SearchRequest(QUESTION, k=5, phrasings=(KEYWORDS, PASSAGE)))
    wordings = [QUESTION, KEYWORDS, PASSAGE]
    rows = fused(corpus, wordings, [e5.query(w) for w in wordings])
    assert [(h["rank"], h["id"], h["found_by"]) for h in hits] == [(r[0], r[4], r[2]) for r in rows]


BAD = [
    (["a", "b", "c", "d", "e"], "at most 4 phrasings besides the query, got 5"),
    (["pain", "  "], "phrasing 2 is empty"),
    (
        ["Qui paie L'ENTRETIEN des chemins ? "],
        'phrasing 1 repeats the query: "Qui paie L\'ENTRETIEN des chemins ? "',
    ),
    (["pain cher", "route", "Pain cher"], 'phrasing 3 repeats phrasing 1: "Pain cher"'),
    (["x" * 10001], "phrasing 1 is 10001 characters long; the limit is 10000"),
]


@pytest.mark.parametrize("phrasings,message", BAD)
def test_bad_phrasings_are_one_clear_error_and_the_connection_stays_usable(corpus, phrasings, message):
    with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        corpus.execute(
            "SELECT * FROM rag.search_phrasings(%s, NULL, %s, NULL, p_mode => 'bm25')", (QUESTION, phrasings)
        )
    assert err.value.diag.message_primary == message
    corpus.rollback()
    assert corpus.execute(
        "SELECT count(*) > 0 FROM rag.search_phrasings(%s, NULL, %s, NULL, p_mode => 'bm25')",
        (QUESTION, ["péage"]),
    ).fetchone() == (True,)


def test_vectors_must_come_with_the_phrasings(corpus, e5):
    v = e5.query(QUESTION)
    for vectors, message in (
        (
            None,
            "the phrasings have no vectors (p_phrasing_embeddings) while the query has one: "
            "mode auto compares vectors",
        ),
        ([v, v], "p_phrasing_embeddings has 2 vectors for 1 phrasings"),
    ):
        with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
            corpus.execute(
                "SELECT * FROM rag.search_phrasings(%s, %s, %s, %s::vector[])",
                (QUESTION, v, [KEYWORDS], vectors),
            )
        assert err.value.diag.message_primary == message
        corpus.rollback()
    with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        corpus.execute(
            "SELECT * FROM rag.search_phrasings(%s, NULL, %s, NULL, p_mode => 'bm25', p_fusion => 'borda')",
            (QUESTION, [KEYWORDS]),
        )
    assert err.value.diag.message_primary == "fusion of phrasings must be 'rrf' or 'best', got \"borda\""


def test_tuning_settings_are_refused_with_phrasings_not_ignored(corpus):
    from bookrag.errors import BookragError

    with pytest.raises(BookragError) as err:
        search(corpus, SearchRequest(QUESTION, mode="bm25", tuning={"fusion": "rrf"}, phrasings=(KEYWORDS,)))
    assert str(err.value) == (
        "tuning (fusion) tunes one wording's ranking; with phrasings every wording is searched "
        "with the defaults: drop one or the other"
    )
    with pytest.raises(BookragError, match="phrasing 1 is empty"):
        search(corpus, SearchRequest(QUESTION, mode="bm25", phrasings=("\u00a0",)))
    assert search(corpus, SearchRequest(QUESTION, mode="bm25", k=2, phrasings=(KEYWORDS,)))  # what must pass


HIT_COLUMNS = "id, rank, score, bm25_rank, vector_rank, section_score, sentence_rank"


@pytest.mark.parametrize("mode", ["auto", "hybrid", "two-stage", "bm25", "vector"])
@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"book": "traite-des-echanges"},
        {"within": "corpus/traite-des-echanges/premiere-partie/summary.md"},
    ],
)
def test_several_wordings_in_one_call_each_get_what_a_search_of_it_alone_returns(corpus, e5, mode, filters):
    """rag._search_hits reads every wording's BM25 list in one statement; each wording's rows
    are still rag.search's for that wording alone, in every mode, with and without filters."""
    wordings = [QUESTION, KEYWORDS, PASSAGE]
    vectors = [e5.query(w) for w in wordings]
    together = corpus.execute(
        f"SELECT s.wording, {', '.join(f'(s.hit).{c}' for c in HIT_COLUMNS.split(', '))} "
        "FROM rag._search_hits(%s, %s::vector[], %s, 7, %s, NULL, %s, NULL, NULL, NULL) s",
        (wordings, vectors, mode, filters.get("book"), filters.get("within")),
    ).fetchall()
    for w, (text, vector) in enumerate(zip(wordings, vectors), start=1):
        alone = corpus.execute(
            f"SELECT {HIT_COLUMNS} FROM rag.search(%s, %s, %s, 7, p_book => %s, p_within => %s)",
            (text, vector, mode, filters.get("book"), filters.get("within")),
        ).fetchall()
        assert alone, (mode, text)
        assert [r[1:] for r in together if r[0] == w] == alone


def test_the_core_takes_one_vector_or_null_per_wording(corpus, e5):
    with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        corpus.execute(
            "SELECT * FROM rag._search_hits(%s, %s::vector[], 'auto', 5, NULL, NULL, NULL, NULL, NULL, NULL)",
            ([QUESTION, KEYWORDS], [e5.query(QUESTION)]),
        )
    assert err.value.diag.message_primary == "give one vector (or NULL) per wording: 2 wordings, 1 vectors"
    corpus.rollback()
    rows = corpus.execute(
        "SELECT s.wording, (s.hit).id FROM rag._search_hits(%s, ARRAY[NULL, NULL]::vector[], 'bm25', 3, "
        "NULL, NULL, NULL, NULL, NULL, NULL) s",
        ([QUESTION, KEYWORDS],),
    ).fetchall()
    assert {w for w, _ in rows} == {1, 2}
