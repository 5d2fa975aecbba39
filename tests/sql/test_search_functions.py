"""Ranking behaviour of rag.search in each mode (bm25, vector, hybrid, two-stage, auto) on the
fixture corpus (tests/fixtures/corpus): the formulas of rag._fuse, rag._hybrid and rag._two_stage
checked against hand computations, the filters, the settings (p_tuning)."""

from __future__ import annotations

import json

import psycopg
import pytest

BOOK = "traite-des-echanges"
C = f"corpus/{BOOK}"
BOULANGER = f"{C}/premiere-partie/chapitre-01-le-boulanger/source.md"
ROUTES = f"{C}/premiere-partie/chapitre-02-les-routes/source.md"
MONNAIE = f"{C}/deuxieme-partie/chapitre-01-la-monnaie/source.md"
PARAPHRASE = "Qui confectionne la nourriture quotidienne à l'aurore ?"
#: the sentence branch off: these tests check one mode's own list (tests/sql/test_sentence_branch.py checks the merge)
ALONE = {"sentence_every": 0}


def rows(conn, query, *params):
    return conn.execute(query, params).fetchall()


def tune(**settings) -> str:
    """p_tuning's JSON: the settings given, the sentence branch off."""
    return json.dumps({**ALONE, **settings})


def test_bm25_query_matching_one_paragraph_returns_it_first(corpus):
    hits = rows(
        corpus,
        "SELECT source_file, chunk_index, rank, bm25_rank, vector_rank FROM rag.search('ornière', NULL, 'bm25')",
    )
    assert hits[0][:3] == (ROUTES, 0, 1)
    assert hits[0][3] == 1 and hits[0][4] is None
    assert len(hits) == 1


def test_bm25_stems_and_folds_french(corpus):
    # "ornieres" (plural, no accent) reaches "ornière" through the French stemmer and ASCII folding.
    hits = rows(corpus, "SELECT source_file, chunk_index FROM rag.search('ornieres', NULL, 'bm25')")
    assert hits[0] == (ROUTES, 0)


def test_paraphrase_without_shared_word_is_found_by_the_vector_branch(corpus, e5):
    lexical = rows(
        corpus, "SELECT source_file FROM rag.search(%s, NULL, 'bm25', 50, p_levels => '{0}')", PARAPHRASE
    )
    assert BOULANGER not in {r[0] for r in lexical}
    dense = rows(
        corpus,
        "SELECT source_file FROM rag.search(NULL, %s, 'vector', 2, p_levels => '{0}')",
        e5.query(PARAPHRASE),
    )
    assert BOULANGER in {r[0] for r in dense}
    fused = rows(
        corpus,
        "SELECT source_file, bm25_rank, vector_rank FROM rag.search(%s, %s, 'hybrid', 3, p_levels => '{0}', "
        "p_tuning => %s)",
        PARAPHRASE,
        e5.query(PARAPHRASE),
        tune(),
    )
    assert any(r[0] == BOULANGER and r[1] is None and r[2] is not None for r in fused)


def test_rrf_order_and_scores_match_a_hand_computation(corpus, e5):
    q = "le péage du pont et le prix du pain"
    v = e5.query(q)
    bm = rows(corpus, "SELECT id, rank FROM rag.search(%s, NULL, 'bm25', 100)", q)
    ve = rows(corpus, "SELECT id, rank FROM rag.search(NULL, %s, 'vector', 100)", v)
    expected: dict[int, float] = {}
    for ranking in (bm, ve):
        for id_, rank in ranking:
            expected[id_] = expected.get(id_, 0.0) + 1.0 / (60 + rank)
    best = dict(bm), dict(ve)
    order = sorted(
        expected, key=lambda i: (-expected[i], min(best[0].get(i, 10**6), best[1].get(i, 10**6)), i)
    )
    fused = rows(
        corpus,
        "SELECT id, score, rank, bm25_rank, vector_rank FROM rag.search(%s, %s, 'hybrid', 10, p_tuning => %s)",
        q,
        v,
        tune(hybrid_pool=100, fusion="rrf", bm25_weight=1, vector_weight=1, chapter_weight=0),
    )
    assert [r[0] for r in fused] == order[:10]
    for id_, score, _rank, br, vr in fused:
        assert score == pytest.approx(expected[id_])
        assert br == best[0].get(id_) and vr == best[1].get(id_)
    assert [r[2] for r in fused] == list(range(1, 11))
    # the rrf constant is a setting
    k1 = rows(
        corpus,
        "SELECT id, score FROM rag.search(%s, %s, 'hybrid', 3, p_tuning => %s)",
        q,
        v,
        tune(hybrid_pool=100, fusion="rrf", bm25_weight=1, vector_weight=1, chapter_weight=0, rrf_k=1),
    )
    assert k1[0][1] == pytest.approx(
        sum(1.0 / (1 + dict(r)[k1[0][0]]) for r in (bm, ve) if k1[0][0] in dict(r))
    )


def normalised(scores: dict[int, float], how: str) -> dict[int, float]:
    vals = list(scores.values())
    if how == "minmax":
        lo, hi = min(vals), max(vals)
        return {i: (s - lo) / (hi - lo) if hi > lo else 1.0 for i, s in scores.items()}
    mean = sum(vals) / len(vals)
    sd = (sum((x - mean) ** 2 for x in vals) / len(vals)) ** 0.5
    return {i: (s - mean) / sd if sd else 1.0 for i, s in scores.items()}


@pytest.mark.parametrize("how,chapter", [("minmax", 0.0), ("zscore", 0.0), ("minmax", 0.3), ("zscore", 0.5)])
def test_convex_fusion_matches_a_hand_computation(corpus, e5, how, chapter):
    """Each branch normalised over its pool, a missing branch at its floor, weights summing to 1,
    then a paragraph takes `chapter` of its score from its chapter summary's fused score."""
    q = "le péage du pont et le prix du pain"
    v = e5.query(q)
    pool = 12
    bm = {r[0]: r[1] for r in rows(corpus, "SELECT id, score FROM rag.search(%s, NULL, 'bm25', %s)", q, pool)}
    ve = {
        r[0]: r[1] for r in rows(corpus, "SELECT id, score FROM rag.search(NULL, %s, 'vector', %s)", v, pool)
    }
    nb, nv = normalised(bm, how), normalised(ve, how)
    fb, fv = min(min(nb.values()), 0), min(min(nv.values()), 0)
    fused = {i: (0.3 * nb.get(i, fb) + 0.7 * nv.get(i, fv)) / 1.0 for i in set(bm) | set(ve)}
    meta = {
        r[0]: (r[1], r[2], r[3])
        for r in rows(
            corpus, "SELECT id, level, source_file, parent_source_file FROM rag.hierarchical_content_nodes"
        )
    }
    chapters: dict[str, float] = {}
    for i, f in fused.items():
        if meta[i][0] == 1:
            chapters[meta[i][1]] = max(chapters.get(meta[i][1], f), f)
    expected = {
        i: (1 - chapter) * f + chapter * chapters.get(meta[i][2], 0.3 * fb + 0.7 * fv)
        if meta[i][0] == 0 and chapter
        else f
        for i, f in fused.items()
    }
    got = rows(
        corpus,
        "SELECT id, score, section_score FROM rag.search(%s, %s, 'hybrid', %s, p_tuning => %s)",
        q,
        v,
        pool,
        tune(
            hybrid_pool=pool,
            fusion="convex",
            normalisation=how,
            bm25_weight=0.3,
            vector_weight=0.7,
            chapter_weight=chapter,
        ),
    )
    assert len(got) == pool
    assert [g[1] for g in got] == pytest.approx(sorted(expected.values(), reverse=True)[:pool])
    for id_, score, section in got:
        assert score == pytest.approx(expected[id_])
        assert (section is not None) == (chapter > 0 and meta[id_][0] == 0)


def test_a_strong_single_branch_hit_is_not_buried(corpus, e5):
    """The BM25 #1 that the kNN branch does not return (this paragraph has no vector) ranks first
    under convex min-max fusion when its lexical match is clear-cut; RRF puts rows seen by both
    branches above it."""
    q = "écus coffre siège"
    v = e5.query(q)
    hybrid = "SELECT source_file, bm25_rank, vector_rank FROM rag.search(%s, %s, 'hybrid', 3, p_tuning => %s)"
    default = rows(
        corpus,
        hybrid,
        q,
        v,
        tune(normalisation="minmax", bm25_weight=0.6, vector_weight=0.4, chapter_weight=0),
    )
    assert default[0] == (MONNAIE, 1, None)
    rrf = rows(corpus, hybrid, q, v, tune(fusion="rrf", chapter_weight=0))
    assert rrf[0][0] != MONNAIE
    # z-score's known weakness (docs/decisions/0011): a branch's lone candidate gets 1, below the
    # best z-scores of a full kNN pool, so the lone BM25 match falls out of the top 3
    zscore = rows(
        corpus,
        hybrid,
        q,
        v,
        tune(normalisation="zscore", bm25_weight=0.6, vector_weight=0.4, chapter_weight=0),
    )
    assert MONNAIE not in {r[0] for r in zscore}


def test_branch_weights_change_the_fusion(corpus, e5):
    q = "écus coffre siège"
    only_bm25 = rows(
        corpus,
        "SELECT source_file, chunk_index FROM rag.search(%s, %s, 'hybrid', 1, p_tuning => %s)",
        q,
        e5.query(q),
        tune(vector_weight=0),
    )
    assert only_bm25 == [(MONNAIE, 1)]


def test_row_without_embedding_competes_on_bm25_only(corpus, e5):
    q = "écus coffre siège"
    hits = rows(
        corpus,
        "SELECT source_file, chunk_index, bm25_rank, vector_rank FROM rag.search(%s, %s, 'hybrid', 10, "
        "p_tuning => %s)",
        q,
        e5.query(q),
        tune(normalisation="minmax"),
    )
    monnaie = [h for h in hits if h[0] == MONNAIE]
    assert monnaie and monnaie[0][2] == 1 and monnaie[0][3] is None
    embedded = rows(
        corpus,
        "SELECT count(*) FROM rag.hierarchical_content_nodes WHERE source_file = %s AND embedding IS NOT NULL",
        MONNAIE,
    )
    assert embedded == [(0,)]


def test_hybrid_without_query_embedding_is_bm25(corpus):
    fused = rows(corpus, "SELECT id FROM rag.search('péage pont', NULL, 'hybrid', 5)")
    lexical = rows(corpus, "SELECT id FROM rag.search('péage pont', NULL, 'bm25', 5)")
    assert fused == lexical and fused


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid"])
def test_filters_apply_to_every_branch(corpus, e5, mode):
    v = e5.query("le pain du village")
    for levels in ([1], [0], [2, 3]):
        hits = corpus.execute(
            "SELECT level, book FROM rag.search('pain village', %(v)s, %(m)s, 50, %(book)s, %(levels)s)",
            {"v": v, "m": mode, "book": BOOK, "levels": levels},
        ).fetchall()
        assert hits, levels
        assert all(h[0] in levels and h[1] == BOOK for h in hits)


ROUTES_CHAPTER = f"{C}/premiere-partie/chapitre-02-les-routes/summary.md"
PART_ONE = f"{C}/premiere-partie/summary.md"


@pytest.mark.parametrize(
    "within,allowed",
    [
        (ROUTES_CHAPTER, {ROUTES_CHAPTER, ROUTES}),
        (ROUTES, {ROUTES}),
        (
            PART_ONE,
            {
                PART_ONE,
                f"{C}/premiere-partie/chapitre-01-le-boulanger/summary.md",
                BOULANGER,
                ROUTES_CHAPTER,
                ROUTES,
            },
        ),
    ],
)
def test_within_keeps_a_nodes_subtree_in_every_mode(corpus, e5, within, allowed):
    q = "le prix du pain et le péage"
    v = e5.query(q)
    for mode in ("bm25", "vector", "hybrid", "two-stage", "auto"):
        hits = {
            r[0]
            for r in corpus.execute(
                "SELECT source_file FROM rag.search(%s, %s, %s, 50, p_within => %s)", (q, v, mode, within)
            ).fetchall()
        }
        assert hits and hits <= allowed, mode
    # k above the subtree's paragraphs: the search inside the kept sections runs, and its kNN
    # branch brings every paragraph of the kept sections inside the subtree
    n = corpus.execute(
        "SELECT count(*) FROM rag.search(%s, %s, 'two-stage', 1000, p_within => %s, p_tuning => %s)",
        (q, v, within, tune()),
    ).fetchone()[0]
    kept = corpus.execute(
        "SELECT count(*) FROM rag.hierarchical_content_nodes WHERE level = 0 AND id = ANY(rag._subtree_ids(%s))",
        (within,),
    ).fetchone()[0]
    assert 0 < n <= kept and (within == PART_ONE or n == kept)
    ctx = corpus.execute(
        "SELECT source_file, role FROM rag.build_context(%s, %s, 3000, p_within => %s)", (q, v, within)
    ).fetchall()
    assert ctx and {r[0] for r in ctx if r[1] == "hit"} <= allowed


def test_search_runs_every_mode_the_product_lists(corpus, e5):
    """rag.search is the one list of modes: each name in bookrag.search.MODES is accepted and
    answers; any other is refused by name."""
    from bookrag.search import MODES

    q = "péage pont"
    v = e5.query(q)
    assert MODES[0] == "auto" and set(MODES) == {"auto", "hybrid", "two-stage", "bm25", "vector"}
    lists = {
        m: corpus.execute("SELECT id FROM rag.search(%s, %s, %s, 5)", (q, v, m)).fetchall() for m in MODES
    }
    assert all(lists.values())
    assert lists["auto"] == lists["two-stage"] and len({tuple(x) for x in lists.values()}) >= 3
    with pytest.raises(
        psycopg.errors.InvalidParameterValue,
        match='mode must be auto, hybrid, two-stage, bm25 or vector, got "fast"',
    ):
        corpus.execute("SELECT * FROM rag.search(%s, %s, 'fast')", (q, v))
    corpus.rollback()


def test_the_default_is_auto_two_stage_for_paragraphs_and_hybrid_for_summaries(corpus, e5):
    """rag.search's default mode, 'auto' (decision 23): two-stage when the filters allow
    paragraphs, hybrid when they ask for summaries, hybrid when two-stage finds no paragraph."""
    q = "la monnaie et l'impôt"  # a query whose two-stage list is not hybrid's, filtered to paragraphs or not
    v = e5.query(q)

    def ids(call: str, *args) -> list[int]:
        return [
            r[0] for r in corpus.execute(f"SELECT id FROM {call} ORDER BY rank", (q, v, *args)).fetchall()
        ]

    two_stage = ids("rag.search(%s, %s, 'two-stage', 6)")
    hybrid = ids("rag.search(%s, %s, 'hybrid', 6)")
    # so the comparisons below tell the two apart, with and without the paragraph filter
    assert two_stage and two_stage != hybrid
    assert ids("rag.search(%s, %s, 'hybrid', 6, p_levels => '{0}')") != two_stage
    assert ids("rag.search(%s, %s, p_k => 6)") == ids("rag.search(%s, %s, 'auto', 6)") == two_stage
    assert ids("rag.search(%s, %s, 'auto', 6, p_levels => '{0}')") == two_stage
    for levels in (["{1}"], ["{0,1}"], ["{1,2,3}"]):
        assert ids("rag.search(%s, %s, 'auto', 6, p_levels => %s::int[])", *levels) == ids(
            "rag.search(%s, %s, 'hybrid', 6, p_levels => %s::int[])", *levels
        ), levels
    # 'pain' is only in summaries of the fixture: without a query vector two-stage finds no
    # paragraph, and the default gives hybrid's summaries instead of nothing
    assert corpus.execute("SELECT count(*) FROM rag.search('pain', NULL, 'two-stage', 5)").fetchone()[0] == 0
    for k in (2, 5):
        bm25_only = [
            r[0]
            for r in corpus.execute(
                "SELECT id FROM rag.search('pain', NULL, 'hybrid', %s) ORDER BY rank", (k,)
            )
        ]
        assert len(bm25_only) == min(k, 4)
        assert [
            r[0]
            for r in corpus.execute("SELECT id FROM rag.search('pain', NULL, p_k => %s) ORDER BY rank", (k,))
        ] == bm25_only
    # the filters still hold in the fallback: levels {0} finds nothing either way
    assert (
        corpus.execute("SELECT count(*) FROM rag.search('pain', NULL, p_levels => '{0}')").fetchone()[0] == 0
    )


def test_chapter_term_lifts_paragraphs_of_the_matching_chapter(corpus, e5):
    q = "les routes et les ornières"
    hits = rows(
        corpus,
        "SELECT source_file, level, section_score FROM rag.search(%s, %s, 'hybrid', 10, p_levels => '{0}', "
        "p_tuning => %s)",
        q,
        e5.query(q),
        tune(chapter_weight=0.5),
    )
    assert hits and all(h[1] == 0 for h in hits)  # the chapter summaries competed, only paragraphs come back
    assert hits[0][0] == ROUTES and hits[0][2] == pytest.approx(max(h[2] for h in hits))


def test_two_stage_boosts_paragraphs_of_the_best_sections(corpus, e5):
    q = "péage sur le pont et réverbère"
    hits = corpus.execute(
        "SELECT source_file, parent_source_file, level, score, section_score, rank "
        "FROM rag.search(%s, %s, 'two-stage', 5, p_tuning => %s)",
        (q, e5.query(q), tune(sections=1)),
    ).fetchall()
    assert hits and all(h[2] == 0 for h in hits)
    assert {h[1] for h in hits} == {f"{C}/premiere-partie/chapitre-02-les-routes/summary.md"}
    assert hits[0][4] == pytest.approx(1.0)
    assert [h[5] for h in hits] == list(range(1, len(hits) + 1))
    assert all(a[3] >= b[3] for a, b in zip(hits, hits[1:]))


def test_the_number_of_sections_kept_is_a_setting(corpus, e5):
    q = "le prix du pain et la monnaie"
    v = e5.query(q)

    def sections(n: int) -> set[str]:
        return {
            r[0]
            for r in corpus.execute(
                "SELECT parent_source_file FROM rag.search(%s, %s, 'two-stage', 1000, p_tuning => %s)",
                (q, v, tune(sections=n)),
            ).fetchall()
        }

    assert len(sections(1)) == 1 and len(sections(2)) == 2 and sections(1) < sections(2)


def test_two_stage_ranks_paragraphs_among_its_one_first_search(corpus, e5):
    # both stages read one first search (BM25 greatest(pool, k, 10 x sections) and kNN vector_pool
    # candidates, fused): hybrid reads the same with hybrid_pool 10 and no chapter term. The kept
    # section's paragraphs among its rows, min-max normalised over them, 0.7 x that + 0.3 x the
    # section's score (1 for the only section kept)
    q = "le prix du pain augmente"
    v = e5.query(q)
    read = corpus.execute(
        "SELECT id, level, parent_source_file, score FROM rag.search(%s, %s, 'hybrid', 10, p_tuning => %s)",
        (q, v, tune(hybrid_pool=10, chapter_weight=0)),
    ).fetchall()
    two_stage = (
        "SELECT id, parent_source_file, score FROM rag.search(%s, %s, 'two-stage', %s, p_tuning => %s)"
    )
    settings = tune(sections=1, pool=2, vector_pool=10)
    hits = corpus.execute(two_stage, (q, v, 2, settings)).fetchall()
    section = hits[0][1]
    among = [r for r in read if r[1] == 0 and r[2] == section]
    assert len(among) == 2 and [h[0] for h in hits] == [r[0] for r in sorted(among, key=lambda r: -r[3])]
    assert [h[2] for h in hits] == pytest.approx([1.0, 0.3])
    # asked for more paragraphs than those rows hold, it searches inside the kept section: all
    # three of its paragraphs, not the two it read
    full = corpus.execute(two_stage, (q, v, 10, settings)).fetchall()
    in_section = corpus.execute(
        "SELECT count(*) FROM rag.hierarchical_content_nodes WHERE parent_source_file = %s AND level = 0",
        (section,),
    ).fetchone()[0]
    assert {f[1] for f in full} == {section} and len(full) == in_section == 3
    # without a query vector the search inside the section is pg_search's, filtered to it
    text_only = corpus.execute(
        "SELECT id, parent_source_file, bm25_rank, vector_rank FROM rag.search(%s, NULL, 'two-stage', 10, "
        "p_tuning => %s)",
        (q, settings),
    ).fetchall()
    assert text_only and all(r[2] is not None and r[3] is None for r in text_only)


def test_the_vector_branch_reads_its_own_pool(corpus, e5):
    """vector_pool sets the kNN branch's candidates of two-stage's first search apart from BM25's:
    no row beyond it carries a vector rank."""
    q = "le prix du pain et la monnaie"
    v = e5.query(q)
    two = "SELECT vector_rank FROM rag.search(%s, %s, 'two-stage', 3, p_tuning => %s)"
    narrow, wide = (
        corpus.execute(two, (q, v, tune(sections=3, **pool))).fetchall() for pool in ({"vector_pool": 2}, {})
    )
    assert narrow and all(h[0] is None or h[0] <= 2 for h in narrow)
    assert any(h[0] is not None and h[0] > 2 for h in wide)


def test_two_stage_finds_a_section_by_its_paragraphs_words(corpus):
    # words of the routes chapter's text that no summary uses: stage 1 reads the paragraphs with
    # the summaries, so it finds that section
    q = "ornière charrette colline"
    notices: list[str] = []
    corpus.add_notice_handler(lambda d: notices.append(d.message_primary))
    assert (
        corpus.execute(
            "SELECT count(*) FROM rag.search(%s, NULL, 'hybrid', 10, p_levels => '{1}')", (q,)
        ).fetchone()[0]
        == 0
    )
    hits = corpus.execute(
        "SELECT parent_source_file, section_score FROM rag.search(%s, NULL, 'two-stage', 3)", (q,)
    ).fetchall()
    assert hits and hits[0][0] == f"{C}/premiere-partie/chapitre-02-les-routes/summary.md"
    assert hits[0][1] == pytest.approx(1.0)
    assert not notices
    # nothing matches at all: the fallback runs, says so, and returns nothing
    assert (
        corpus.execute("SELECT count(*) FROM rag.search('zzzqqq', NULL, 'two-stage', 3)").fetchone()[0] == 0
    )
    assert any("falling back to a flat hybrid search" in n for n in notices)


def test_every_mode_returns_the_citation_columns(corpus, e5):
    cols = {
        "id",
        "source_file",
        "chunk_index",
        "level",
        "node_type",
        "heading_path",
        "content",
        "content_token_count",
        "score",
    }
    v = e5.query("pain")
    for mode in ("bm25", "vector", "hybrid", "two-stage", "auto"):
        cur = corpus.execute("SELECT * FROM rag.search('pain', %s, %s)", (v, mode))
        assert cols <= {d.name for d in cur.description}, mode
        assert cur.fetchall(), mode
    for mode in ("auto", "hybrid"):  # auto: paragraphs (cites '[]'); hybrid: summaries too (their anchors)
        filled = corpus.execute(
            "SELECT count(*), count(cites), count(parent), count(*) FILTER (WHERE cites::text <> '[]') "
            "FROM rag.search('pain', %s, %s, p_expand => '{parent}')",
            (v, mode),
        ).fetchone()
        assert filled[0] > 0 and filled[1] == filled[0] and filled[2] > 0, mode
        assert (filled[3] > 0) == (mode == "hybrid"), mode


def test_two_models_are_never_compared(corpus, e5):
    """Two models registered: every search that reads vectors refuses, naming them."""
    v = e5.query("pain")
    corpus.execute(
        "INSERT INTO rag.embedding_models (model, dimension, index_name) VALUES ('other/model', 384, 'x')"
    )
    for mode in ("vector", "auto", "hybrid"):
        with pytest.raises(
            psycopg.errors.InvalidParameterValue, match="several embedding models are registered"
        ):
            with corpus.transaction():
                corpus.execute("SELECT * FROM rag.search('pain', %s, %s)", (v, mode))
    assert corpus.execute("SELECT count(*) FROM rag.search('pain', %s, 'bm25')", (v,)).fetchone()[0] > 0


def test_every_search_argument_is_bound_from_one_python_definition(corpus):
    """rag.search's arguments are all reachable from SearchRequest (its fields name them); a new
    SQL parameter without its field, or a field naming no argument, fails. rag.build_context takes
    every argument rag.search takes, by the same name and type, and its budget; CONTEXT_CALL binds
    them all."""
    from dataclasses import fields

    from bookrag.search import CONTEXT_CALL, SEARCH_CALL, SearchRequest

    def args_of(function):
        return {
            r[0]
            for r in corpus.execute(
                "SELECT unnest(proargnames) FROM pg_proc WHERE oid = %s::regproc", (function,)
            )
        }

    def typed_args_of(function):
        return set(
            corpus.execute(
                "SELECT a.name, format_type(a.type, NULL) FROM pg_proc p, "
                "unnest(p.proargnames, p.proargtypes::oid[]) AS a(name, type) WHERE p.oid = %s::regproc",
                (function,),
            ).fetchall()
        )

    def bound_by(call):
        return {a.split(" => ")[0] for a in call[call.index("(") + 1 : -1].split(", ")}

    named = {f.metadata["sql"] for f in fields(SearchRequest) if f.metadata}
    assert bound_by(SEARCH_CALL) == args_of("rag.search")
    assert named <= args_of("rag.search")
    assert typed_args_of("rag.build_context") - {("p_budget", "integer")} == typed_args_of("rag.search")
    assert bound_by(CONTEXT_CALL) == args_of("rag.build_context")
    # one type for p_expand in every public function that takes it
    expand_types = corpus.execute(
        "SELECT DISTINCT format_type(a.type, NULL) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace, "
        "unnest(p.proargnames, p.proargtypes::oid[]) AS a(name, type) "
        "WHERE n.nspname = 'rag' AND p.proname NOT LIKE '\\_%%' AND a.name = 'p_expand'"
    ).fetchall()
    assert expand_types == [("text[]",)]


def test_rag_search_is_inlined_into_the_callers_statement(corpus, e5):
    """rag.search is a SQL function without settings: the planner inlines it, so a caller's
    prepared statement caches one plan and an expansion not asked for never runs."""
    plan = "\n".join(
        r[0]
        for r in corpus.execute(
            "EXPLAIN (COSTS OFF) SELECT * FROM rag.search('pain', %s, 'hybrid', 5, p_expand => '{parent}')",
            (e5.query("pain"),),
        )
    )
    assert "Function Scan on _search_hits" in plan
    assert "Function Scan on search" not in plan
    assert "hierarchical_content_nodes" in plan  # the parents' rows, read by the caller's statement
    plain = "\n".join(
        r[0]
        for r in corpus.execute(
            "EXPLAIN (COSTS OFF) SELECT * FROM rag.search('pain', %s, 'hybrid', 5)", (e5.query("pain"),)
        )
    )
    assert "Function Scan on _search_hits" in plain and "hierarchical_content_nodes" not in plain
