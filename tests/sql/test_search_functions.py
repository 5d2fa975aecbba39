"""Ranking behaviour of rag.search_branch (bm25, vector) / search_hybrid / search_two_stage on
the fixture corpus (tests/fixtures/corpus)."""

from __future__ import annotations

import psycopg
import pytest

BOOK = "traite-des-echanges"
C = f"corpus/{BOOK}"
BOULANGER = f"{C}/premiere-partie/chapitre-01-le-boulanger/source.md"
ROUTES = f"{C}/premiere-partie/chapitre-02-les-routes/source.md"
MONNAIE = f"{C}/deuxieme-partie/chapitre-01-la-monnaie/source.md"
PARAPHRASE = "Qui confectionne la nourriture quotidienne à l'aurore ?"


def rows(conn, query, *params):
    return conn.execute(query, params).fetchall()


def test_bm25_query_matching_one_paragraph_returns_it_first(corpus):
    hits = rows(corpus, "SELECT source_file, chunk_index, rank, bm25_rank, vector_rank FROM rag.search_branch('ornière', NULL, 'bm25')")
    assert hits[0][:3] == (ROUTES, 0, 1)
    assert hits[0][3] == 1 and hits[0][4] is None
    assert len(hits) == 1


def test_bm25_stems_and_folds_french(corpus):
    # "ornieres" (plural, no accent) reaches "ornière" through the French stemmer and ASCII folding.
    hits = rows(corpus, "SELECT source_file, chunk_index FROM rag.search_branch('ornieres', NULL, 'bm25')")
    assert hits[0] == (ROUTES, 0)


def test_paraphrase_without_shared_word_is_found_by_the_vector_branch(corpus, e5):
    lexical = rows(corpus, "SELECT source_file FROM rag.search_branch(%s, NULL, 'bm25', 50, p_levels => '{0}')", PARAPHRASE)
    assert BOULANGER not in {r[0] for r in lexical}
    dense = rows(corpus, "SELECT source_file FROM rag.search_branch(NULL, %s, 'vector', 2, p_levels => '{0}')", e5.query(PARAPHRASE))
    assert BOULANGER in {r[0] for r in dense}
    fused = rows(corpus, "SELECT source_file, bm25_rank, vector_rank FROM rag.search_hybrid(%s, %s, 3, p_levels => '{0}')",
                 PARAPHRASE, e5.query(PARAPHRASE))
    assert any(r[0] == BOULANGER and r[1] is None and r[2] is not None for r in fused)


def test_rrf_order_and_scores_match_a_hand_computation(corpus, e5):
    q = "le péage du pont et le prix du pain"
    v = e5.query(q)
    bm = rows(corpus, "SELECT id, rank FROM rag.search_branch(%s, NULL, 'bm25', 100)", q)
    ve = rows(corpus, "SELECT id, rank FROM rag.search_branch(NULL, %s, 'vector', 100)", v)
    expected: dict[int, float] = {}
    for ranking in (bm, ve):
        for id_, rank in ranking:
            expected[id_] = expected.get(id_, 0.0) + 1.0 / (60 + rank)
    best = dict(bm), dict(ve)
    order = sorted(expected, key=lambda i: (-expected[i], min(best[0].get(i, 10**6), best[1].get(i, 10**6)), i))
    fused = rows(corpus, "SELECT id, score, rank, bm25_rank, vector_rank FROM rag.search_hybrid(%s, %s, 10, p_pool => 100, "
                         "p_fusion => 'rrf', p_bm25_weight => 1, p_vector_weight => 1, p_chapter_weight => 0)", q, v)
    assert [r[0] for r in fused] == order[:10]
    for id_, score, rank, br, vr in fused:
        assert score == pytest.approx(expected[id_])
        assert br == best[0].get(id_) and vr == best[1].get(id_)
    assert [r[2] for r in fused] == list(range(1, 11))


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
    bm = {r[0]: r[1] for r in rows(corpus, "SELECT id, score FROM rag.search_branch(%s, NULL, 'bm25', %s)", q, pool)}
    ve = {r[0]: r[1] for r in rows(corpus, "SELECT id, score FROM rag.search_branch(NULL, %s, 'vector', %s)", v, pool)}
    nb, nv = normalised(bm, how), normalised(ve, how)
    fb, fv = min(min(nb.values()), 0), min(min(nv.values()), 0)
    fused = {i: (0.3 * nb.get(i, fb) + 0.7 * nv.get(i, fv)) / 1.0 for i in set(bm) | set(ve)}
    meta = {r[0]: (r[1], r[2], r[3]) for r in rows(corpus, "SELECT id, level, source_file, parent_source_file "
                                                           "FROM rag.hierarchical_content_nodes")}
    chapters: dict[str, float] = {}
    for i, f in fused.items():
        if meta[i][0] == 1:
            chapters[meta[i][1]] = max(chapters.get(meta[i][1], f), f)
    expected = {i: (1 - chapter) * f + chapter * chapters.get(meta[i][2], 0.3 * fb + 0.7 * fv)
                if meta[i][0] == 0 and chapter else f for i, f in fused.items()}
    got = rows(corpus, "SELECT id, score, section_score FROM rag.search_hybrid(%s, %s, %s, p_pool => %s, p_fusion => 'convex', "
                       "p_normalisation => %s, p_bm25_weight => 0.3, p_vector_weight => 0.7, p_chapter_weight => %s)",
               q, v, pool, pool, how, chapter)
    assert len(got) == pool
    assert [g[1] for g in got] == pytest.approx(sorted(expected.values(), reverse=True)[:pool])
    for id_, score, section in got:
        assert score == pytest.approx(expected[id_])
        assert (section is not None) == (chapter > 0 and meta[id_][0] == 0)


def test_a_strong_single_branch_hit_is_not_buried(corpus, e5):
    """The issue's case: the BM25 #1 that the kNN branch does not return (this paragraph has no
    vector) ranks first under the default fusion when its lexical match is clear-cut; RRF
    puts rows seen by both branches above it."""
    q = "écus coffre siège"
    v = e5.query(q)
    default = rows(corpus, "SELECT source_file, bm25_rank, vector_rank FROM rag.search_hybrid(%s, %s, 3, p_normalisation => 'minmax', p_bm25_weight => 0.6, "
                           "p_vector_weight => 0.4, p_chapter_weight => 0)", q, v)
    assert default[0] == (MONNAIE, 1, None)
    rrf = rows(corpus, "SELECT source_file FROM rag.search_hybrid(%s, %s, 3, p_fusion => 'rrf', p_chapter_weight => 0)", q, v)
    assert rrf[0][0] != MONNAIE
    # z-score's known weakness (docs/decisions/0011): a branch's lone candidate gets 1, below the
    # best z-scores of a full kNN pool, so the lone BM25 match falls out of the top 3
    zscore = rows(corpus, "SELECT source_file FROM rag.search_hybrid(%s, %s, 3, p_normalisation => 'zscore', "
                          "p_bm25_weight => 0.6, p_vector_weight => 0.4, p_chapter_weight => 0)", q, v)
    assert MONNAIE not in {r[0] for r in zscore}


def test_branch_weights_change_the_fusion(corpus, e5):
    q = "écus coffre siège"
    v = e5.query(q)
    only_bm25 = rows(corpus, "SELECT source_file, chunk_index FROM rag.search_hybrid(%s, %s, 1, p_vector_weight => 0)", q, v)
    assert only_bm25 == [(MONNAIE, 1)]


def test_row_without_embedding_competes_on_bm25_only(corpus, e5):
    q = "écus coffre siège"
    hits = rows(corpus, "SELECT source_file, chunk_index, bm25_rank, vector_rank FROM rag.search_hybrid(%s, %s, 10, "
                        "p_normalisation => 'minmax')", q, e5.query(q))
    monnaie = [h for h in hits if h[0] == MONNAIE]
    assert monnaie and monnaie[0][2] == 1 and monnaie[0][3] is None
    embedded = rows(corpus, "SELECT count(*) FROM rag.hierarchical_content_nodes WHERE source_file = %s AND embedding IS NOT NULL", MONNAIE)
    assert embedded == [(0,)]


def test_hybrid_without_query_embedding_is_bm25(corpus):
    fused = rows(corpus, "SELECT id FROM rag.search_hybrid('péage pont', NULL, 5)")
    lexical = rows(corpus, "SELECT id FROM rag.search_branch('péage pont', NULL, 'bm25', 5)")
    assert fused == lexical and fused


@pytest.mark.parametrize("fn", ["bm25", "vector", "hybrid"])
def test_filters_apply_to_every_branch(corpus, e5, fn):
    v = e5.query("le pain du village")
    call = {
        "bm25": "rag.search_branch('pain village', NULL, 'bm25', 50, %(book)s, %(levels)s, %(nt)s)",
        "vector": "rag.search_branch(NULL, %(v)s, 'vector', 50, %(book)s, %(levels)s, %(nt)s)",
        "hybrid": "rag.search_hybrid('pain village', %(v)s, 50, %(book)s, %(levels)s, %(nt)s)",
    }[fn]
    for levels, nt in (([1], "summary"), ([0], None), ([2, 3], None)):
        hits = corpus.execute(f"SELECT level, node_type, book FROM {call}",
                              {"v": v, "book": BOOK, "levels": levels, "nt": nt}).fetchall()
        assert hits, (levels, nt)
        assert all(h[0] in levels and (nt is None or h[1] == nt) and h[2] == BOOK for h in hits)


ROUTES_CHAPTER = f"{C}/premiere-partie/chapitre-02-les-routes/summary.md"
PART_ONE = f"{C}/premiere-partie/summary.md"


@pytest.mark.parametrize("within,allowed", [
    (ROUTES_CHAPTER, {ROUTES_CHAPTER, ROUTES}),
    (ROUTES, {ROUTES}),
    (PART_ONE, {PART_ONE, f"{C}/premiere-partie/chapitre-01-le-boulanger/summary.md", BOULANGER, ROUTES_CHAPTER, ROUTES}),
])
def test_within_keeps_a_nodes_subtree_in_every_function(corpus, e5, within, allowed):
    q = "le prix du pain et le péage"
    v = e5.query(q)
    calls = ["rag.search_branch(%(q)s, NULL, 'bm25', 50, p_within => %(w)s)", "rag.search_branch(NULL, %(v)s, 'vector', 50, p_within => %(w)s)",
             "rag.search_hybrid(%(q)s, %(v)s, 50, p_within => %(w)s)", "rag.search(%(q)s, %(v)s, 'hybrid', 50, p_within => %(w)s)"]
    for call in calls:
        hits = {r[0] for r in corpus.execute(f"SELECT source_file FROM {call}", {"q": q, "v": v, "w": within}).fetchall()}
        assert hits and hits <= allowed, call
    two = {r[0] for r in corpus.execute("SELECT source_file FROM rag.search_two_stage(%s, %s, 20, p_within => %s)",
                                        (q, v, within)).fetchall()}
    assert two and two <= allowed
    # k above the subtree's paragraphs: the second search runs, and its kNN branch brings every
    # paragraph of the kept sections inside the subtree
    n = corpus.execute("SELECT count(*) FROM rag.search_two_stage(%s, %s, 1000, p_within => %s)", (q, v, within)).fetchone()[0]
    kept = corpus.execute("SELECT count(*) FROM rag.hierarchical_content_nodes WHERE level = 0 AND id = ANY(rag._subtree_ids(%s))",
                          (within,)).fetchone()[0]
    assert 0 < n <= kept and (within == PART_ONE or n == kept)
    ctx = corpus.execute("SELECT source_file, role FROM rag.build_context(%s, %s, 3000, p_within => %s)", (q, v, within)).fetchall()
    assert ctx and {r[0] for r in ctx if r[1] == "hit"} <= allowed


def test_search_runs_every_mode_the_product_lists(corpus, e5):
    """rag.search is the one list of modes: each name in bookrag.search.MODES runs the function it names."""
    from bookrag.search import MODES

    q = "péage pont"
    v = e5.query(q)
    direct = {"hybrid": "rag.search_hybrid(%(q)s, %(v)s, 5)", "bm25": "rag.search_branch(%(q)s, NULL, 'bm25', 5)",
              "vector": "rag.search_branch(NULL, %(v)s, 'vector', 5)", "two-stage": "rag.search_two_stage(%(q)s, %(v)s, 5)",
              "auto": "rag.search_two_stage(%(q)s, %(v)s, 5)"}  # without a filter asking for summaries
    assert set(direct) == set(MODES) and MODES[0] == "auto"
    for mode in MODES:
        # (hybrid and two-stage without the sentence branch's places: tests/sql/test_sentence_branch.py checks them)
        via = corpus.execute("SELECT id, rank FROM rag.search(%(q)s, %(v)s, %(m)s, 5, p_sentence_every => 0)",
                             {"q": q, "v": v, "m": mode}).fetchall()
        assert via and via == corpus.execute(f"SELECT id, rank FROM {direct[mode]}", {"q": q, "v": v}).fetchall(), mode


def test_the_default_is_auto_two_stage_for_paragraphs_and_hybrid_for_summaries(corpus, e5):
    """rag.search's default mode, 'auto' (decision 23): two-stage when the filters allow
    paragraphs, hybrid when they ask for summaries, hybrid when two-stage finds no paragraph."""
    q = "la monnaie et l'impôt"  # a query whose two-stage list is not hybrid's, filtered to paragraphs or not
    v = e5.query(q)

    def ids(call: str, *args) -> list[int]:
        return [r[0] for r in corpus.execute(f"SELECT id FROM {call} ORDER BY rank", (q, v, *args)).fetchall()]

    two_stage = ids("rag.search(%s, %s, 'two-stage', 6)")
    hybrid = ids("rag.search(%s, %s, 'hybrid', 6)")
    # so the comparisons below tell the two apart, with and without the paragraph filters
    assert two_stage and two_stage != hybrid
    assert ids("rag.search(%s, %s, 'hybrid', 6, p_levels => '{0}')") != two_stage
    assert ids("rag.search(%s, %s, 'hybrid', 6, p_node_type => 'source')") != two_stage
    assert ids("rag.search(%s, %s, p_k => 6)") == ids("rag.search(%s, %s, 'auto', 6)") == two_stage
    assert ids("rag.search(%s, %s, 'auto', 6, p_levels => '{0}')") == two_stage
    assert ids("rag.search(%s, %s, 'auto', 6, p_node_type => 'source')") == two_stage
    for levels in (["{1}"], ["{0,1}"], ["{1,2,3}"]):
        assert ids("rag.search(%s, %s, 'auto', 6, p_levels => %s::int[])", *levels) == \
            ids("rag.search(%s, %s, 'hybrid', 6, p_levels => %s::int[])", *levels), levels
    assert ids("rag.search(%s, %s, 'auto', 6, p_node_type => 'summary')") == \
        ids("rag.search(%s, %s, 'hybrid', 6, p_node_type => 'summary')")
    # 'pain' is only in summaries of the fixture: without a query vector two-stage finds no
    # paragraph, and the default gives hybrid's summaries instead of nothing
    assert corpus.execute("SELECT count(*) FROM rag.search('pain', NULL, 'two-stage', 5)").fetchone()[0] == 0
    for k in (2, 5):
        bm25_only = [r[0] for r in corpus.execute("SELECT id FROM rag.search('pain', NULL, 'hybrid', %s) ORDER BY rank", (k,))]
        assert len(bm25_only) == min(k, 4)
        assert [r[0] for r in corpus.execute("SELECT id FROM rag.search('pain', NULL, p_k => %s) ORDER BY rank", (k,))] == bm25_only
    # the filters still hold in the fallback: levels {0} finds nothing either way
    assert corpus.execute("SELECT count(*) FROM rag.search('pain', NULL, p_levels => '{0}')").fetchone()[0] == 0


def test_chapter_term_lifts_paragraphs_of_the_matching_chapter(corpus, e5):
    q = "les routes et les ornières"
    v = e5.query(q)
    hits = rows(corpus, "SELECT source_file, level, section_score FROM rag.search_hybrid(%s, %s, 10, p_levels => '{0}', "
                        "p_chapter_weight => 0.5)", q, v)
    assert hits and all(h[1] == 0 for h in hits)  # the chapter summaries competed, only paragraphs come back
    assert hits[0][0] == ROUTES and hits[0][2] == pytest.approx(max(h[2] for h in hits))


def test_parent_files_filter_restricts_to_children(corpus):
    parent = f"{C}/premiere-partie/chapitre-02-les-routes/summary.md"
    hits = rows(corpus, "SELECT DISTINCT parent_source_file FROM rag.search_hybrid('prix', NULL, 50, p_parent_files => ARRAY[%s])", parent)
    assert hits == [(parent,)]


def test_two_stage_boosts_paragraphs_of_the_best_sections(corpus, e5):
    q = "péage sur le pont et réverbère"
    hits = corpus.execute("SELECT source_file, parent_source_file, level, score, section_score, rank "
                          "FROM rag.search_two_stage(%s, %s, 5, p_sections => 1)", (q, e5.query(q))).fetchall()
    assert hits and all(h[2] == 0 for h in hits)
    assert {h[1] for h in hits} == {f"{C}/premiere-partie/chapitre-02-les-routes/summary.md"}
    assert hits[0][4] == pytest.approx(1.0)
    assert [h[5] for h in hits] == list(range(1, len(hits) + 1))
    assert all(a[3] >= b[3] for a, b in zip(hits, hits[1:]))


def test_two_stage_ranks_paragraphs_among_its_one_hybrid_search(corpus, e5):
    # both stages read one rag.search_hybrid (k = greatest(pool, k, 10 x sections)): the kept
    # section's paragraphs among its rows, min-max normalised over them, 0.7 x that + 0.3 x the
    # section's score (1 for the only section kept)
    q = "le prix du pain augmente"
    v = e5.query(q)
    read = corpus.execute("SELECT id, level, parent_source_file, score FROM rag.search_hybrid(%s, %s, 10, p_pool => 2, "
                          "p_chapter_weight => 0, p_vector_pool => 10)", (q, v)).fetchall()
    hits = corpus.execute("SELECT id, parent_source_file, score FROM rag.search_two_stage(%s, %s, 2, p_sections => 1, p_pool => 2, "
                          "p_vector_pool => 10)", (q, v)).fetchall()
    section = hits[0][1]
    among = [r for r in read if r[1] == 0 and r[2] == section]
    assert len(among) == 2 and [h[0] for h in hits] == [r[0] for r in sorted(among, key=lambda r: -r[3])]
    assert [h[2] for h in hits] == pytest.approx([1.0, 0.3])
    # asked for more paragraphs than those rows hold, it searches inside the kept section: all
    # three of its paragraphs, not the two it read
    full = corpus.execute("SELECT id, parent_source_file FROM rag.search_two_stage(%s, %s, 10, p_sections => 1, p_pool => 2, "
                          "p_vector_pool => 10)", (q, v)).fetchall()
    in_section = corpus.execute("SELECT count(*) FROM rag.hierarchical_content_nodes WHERE parent_source_file = %s AND level = 0",
                                (section,)).fetchone()[0]
    assert {f[1] for f in full} == {section} and len(full) == in_section == 3


def test_the_vector_branch_reads_its_own_pool(corpus, e5):
    """p_vector_pool sets the kNN branch's candidates apart from BM25's (two-stage's first
    search reads 100 and 40 since migration 0017): no row beyond it carries a vector rank, and
    rows that only the larger pool reaches change the fused list."""
    q = "le prix du pain et la monnaie"
    v = e5.query(q)
    sql = ("SELECT id, bm25_rank, vector_rank FROM rag.search_hybrid(%s, %s, 30, p_pool => 30, "
           "p_chapter_weight => 0, p_vector_pool => %s)")
    small = corpus.execute(sql, (q, v, 3)).fetchall()
    same = corpus.execute(sql, (q, v, None)).fetchall()
    assert max(r[2] for r in small if r[2] is not None) == 3
    assert max(r[1] for r in small if r[1] is not None) > 3  # BM25 keeps its pool
    assert max(r[2] for r in same if r[2] is not None) > 3  # NULL: BM25's pool
    assert {r[0] for r in small} != {r[0] for r in same}
    # two-stage passes its own to its first search
    two = "SELECT vector_rank FROM rag.search_two_stage(%s, %s, 3, p_sections => 3, p_vector_pool => %s)"
    narrow, wide = (corpus.execute(two, (q, v, n)).fetchall() for n in (2, None))
    assert narrow and all(h[0] is None or h[0] <= 2 for h in narrow)
    assert any(h[0] is not None and h[0] > 2 for h in wide)


SETTINGS = ({}, {"p_normalisation": "minmax"}, {"p_fusion": "rrf"}, {"p_bm25_weight": 0.8, "p_vector_weight": 0.2})


@pytest.mark.parametrize("settings", SETTINGS, ids=("default", "minmax", "rrf", "weights"))
def test_the_second_search_ranks_what_hybrid_ranks_inside_the_sections(corpus, e5, settings):
    """rag._search_in_sections (two-stage's second search) fuses the BM25 rows it is given with
    the exact kNN over the kept sections' paragraphs, as rag.search_hybrid fuses its branches:
    given the BM25 rows rag.search_hybrid reads inside the sections (its pool), it returns
    what that search returns (k and pool greatest(k, pool)), scored 0.7 x its score min-max
    normalised + 0.3 x the section's score, ranked by that, then the hybrid rank, then id. Same
    rows in the same order, same branch ranks and scores, same final scores; with and without a
    query vector (without one it reads pg_search inside the sections itself, as that search
    does), a pool smaller than the sections, and every fusion setting."""
    sections = [f"{C}/premiere-partie/chapitre-01-le-boulanger/summary.md", ROUTES_CHAPTER,
                f"{C}/deuxieme-partie/chapitre-01-la-monnaie/summary.md"]
    section_scores = dict(zip(sections, (1.0, 0.4, 0.0)))
    model = corpus.execute("SELECT model FROM rag.embedding_models").fetchone()[0]
    st = corpus.execute("SELECT fusion, normalisation, bm25_weight, vector_weight FROM rag._fusion_settings("
                        "%(p_fusion)s, %(p_normalisation)s, %(p_bm25_weight)s, %(p_vector_weight)s, 0)",
                        {"p_fusion": None, "p_normalisation": None, "p_bm25_weight": None, "p_vector_weight": None,
                         **settings}).fetchone()
    named = "".join(f", {name} => %({name})s" for name in settings)
    hybrid = ("SELECT id, parent_source_file, score, rank, bm25_rank, bm25_score, vector_rank, vector_score "
              "FROM rag.search_hybrid(%(q)s, %(v)s, p_k => %(n)s, p_levels => '{0}', p_parent_files => %(s)s, "
              f"p_pool => %(pool)s, p_chapter_weight => 0{named})")
    compared = 0
    for q in ("le prix du pain et la monnaie", "les routes et le boulanger", PARAPHRASE):
        for v in (e5.query(q), None):
            for k, pool in ((2, 2), (5, 100), (10, 3)):
                args = {"q": q, "v": v, "s": sections, "pool": max(k, pool), **settings}
                # every row of both pools, so the BM25 branch's whole pool shows
                bm25 = sorted((r for r in corpus.execute(hybrid, {**args, "n": 1000}).fetchall() if r[4] is not None),
                              key=lambda r: r[4])
                read = corpus.execute(hybrid, {**args, "n": max(k, pool)}).fetchall()
                got = corpus.execute("SELECT id, score, rank, bm25_rank, bm25_score, vector_rank, vector_score, "
                                     "section_score FROM rag._search_in_sections(%s, %s, %s, %s, %s, %s, %s, %s, %s, 0.3, "
                                     "%s, %s, %s, %s)",
                                     (q, v, model, sections, [section_scores[f] for f in sections],
                                      [r[0] for r in bm25], [r[5] for r in bm25], k, pool, *st)).fetchall()
                if not read:  # no word of the query in the sections, and no vector
                    assert got == []
                    continue
                lo, hi = min(r[2] for r in read), max(r[2] for r in read)
                final = {r[0]: 0.7 * ((r[2] - lo) / (hi - lo) if hi > lo else 1.0) + 0.3 * section_scores[r[1]]
                         for r in read}
                want = sorted(read, key=lambda r: (-final[r[0]], r[3], r[0]))[:k]
                assert [g[0] for g in got] == [w[0] for w in want], (q, v is None, k, pool)
                assert [g[1] for g in got] == pytest.approx([final[w[0]] for w in want])
                assert [g[2] for g in got] == list(range(1, len(got) + 1))
                assert [g[3:7] for g in got] == [w[4:8] for w in want]
                assert [g[7] for g in got] == [section_scores[w[1]] for w in want]
                compared += len(got)
    assert compared > 0


def test_the_second_search_reads_the_rows_it_is_given(corpus, e5):
    """With a query vector its BM25 branch is the rows given (two-stage passes the first
    search's): rows of other sections or outside `within` are ignored, an id given twice counts
    once with its best score, a paragraph not given gets no BM25 rank (it may still come from the
    kNN branch). Without a vector it reads pg_search inside the sections, since the rows given
    are then all it would have."""
    sections = [ROUTES_CHAPTER]
    model = corpus.execute("SELECT model FROM rag.embedding_models").fetchone()[0]
    paras = [r[0] for r in corpus.execute(
        "SELECT id FROM rag.hierarchical_content_nodes WHERE parent_source_file = %s "
        "AND level = 0 ORDER BY node_order, chunk_index", (ROUTES_CHAPTER,)).fetchall()]
    para_file = corpus.execute("SELECT DISTINCT source_file FROM rag.hierarchical_content_nodes "
                               "WHERE parent_source_file = %s AND level = 0", (ROUTES_CHAPTER,)).fetchall()
    other = corpus.execute("SELECT id FROM rag.hierarchical_content_nodes WHERE level = 0 AND parent_source_file <> %s "
                           "LIMIT 1", (ROUTES_CHAPTER,)).fetchone()[0]
    summary = corpus.execute("SELECT id FROM rag.hierarchical_content_nodes WHERE source_file = %s LIMIT 1",
                             (ROUTES_CHAPTER,)).fetchone()[0]
    assert len(paras) >= 3 and len(para_file) == 1
    first, second = paras[0], paras[1]
    call = ("SELECT id, bm25_rank, bm25_score, vector_rank FROM rag._search_in_sections("
            "'le prix du péage sur la route', %s, %s, %s, '{1}', %s, %s, 10, 100, 0.3, NULL, NULL, NULL, NULL, %s)")
    v = e5.query("le prix du péage sur la route")
    rows = corpus.execute(call, (v, model, sections, [other, summary, second, first, second], [9.0, 8.0, 1.0, 2.0, 3.0],
                                 None)).fetchall()
    assert {r[0] for r in rows} == set(paras)  # the kNN branch brings every paragraph of the section
    assert sorted((r[1], r[0], r[2]) for r in rows if r[1] is not None) == [(1, second, 3.0), (2, first, 2.0)]
    # no BM25 row (NULL or empty arrays): the kNN branch alone
    for ids, scores in ((None, None), ([], []), (None, [])):
        rows = corpus.execute(call, (v, model, sections, ids, scores, None)).fetchall()
        assert {r[0] for r in rows} == set(paras) and all(r[1] is None for r in rows)
    # within the section's own subtree (its summary, or its paragraphs' file): the same rows
    for node in (ROUTES_CHAPTER, para_file[0][0]):
        assert corpus.execute(call, (v, model, sections, [first], [2.0], node)).fetchall() == \
            corpus.execute(call, (v, model, sections, [first], [2.0], None)).fetchall()
    # within another chapter's subtree: none of this section's paragraphs
    elsewhere = f"{C}/deuxieme-partie/chapitre-01-la-monnaie/summary.md"
    assert corpus.execute(call, (v, model, sections, [first], [2.0], elsewhere)).fetchall() == []
    # without a vector: pg_search's rows inside the sections, whatever rows are given
    text_only = corpus.execute(call, (None, model, sections, [first], [2.0], None)).fetchall()
    want = corpus.execute("SELECT id FROM rag.search_hybrid('le prix du péage sur la route', NULL, p_k => 100, p_levels => '{0}', "
                          "p_parent_files => %s, p_chapter_weight => 0)", (sections,)).fetchall()
    assert len(want) >= 2 and {r[0] for r in text_only} == {w[0] for w in want}
    assert all(r[1] is not None and r[3] is None for r in text_only)
    assert corpus.execute(call, (None, None, sections, [], [], None)).fetchall() == text_only


def test_two_stage_finds_a_section_by_its_paragraphs_words(corpus):
    # words of the routes chapter's text that no summary uses: stage 1 reads the paragraphs with
    # the summaries, so it finds that section (reading the summaries alone, it found none and fell
    # back to a flat search)
    q = "ornière charrette colline"
    notices: list[str] = []
    corpus.add_notice_handler(lambda d: notices.append(d.message_primary))
    assert corpus.execute("SELECT count(*) FROM rag.search_hybrid(%s, NULL, 10, p_levels => '{1}')", (q,)).fetchone()[0] == 0
    hits = corpus.execute("SELECT parent_source_file, section_score FROM rag.search_two_stage(%s, NULL, 3)", (q,)).fetchall()
    assert hits and hits[0][0] == f"{C}/premiere-partie/chapitre-02-les-routes/summary.md"
    assert hits[0][1] == pytest.approx(1.0)
    assert not notices
    # nothing matches at all: the fallback runs, says so, and returns nothing
    assert corpus.execute("SELECT count(*) FROM rag.search_two_stage('zzzqqq', NULL, 3)").fetchone()[0] == 0
    assert any("falling back to a flat hybrid search" in n for n in notices)


def test_every_search_function_returns_the_citation_columns(corpus, e5):
    cols = {"id", "source_file", "chunk_index", "level", "node_type", "heading_path", "content", "content_token_count", "score"}
    for call in ("rag.search_branch('pain', NULL, 'bm25')", "rag.search_branch(NULL, %(v)s, 'vector')", "rag.search_hybrid('pain', %(v)s)",
                 "rag.search_two_stage('pain', %(v)s)", "rag.search_sentences(%(v)s)"):
        cur = corpus.execute(f"SELECT * FROM {call}", {"v": e5.query("pain")})
        names = {d.name for d in cur.description}
        assert cols <= names, call
        assert cur.fetchall()
        # cites, parent and cited are rag.search's to fill
        assert corpus.execute(f"SELECT count(*), count(cites) + count(parent) + count(cited) FROM {call}",
                              {"v": e5.query("pain")}).fetchone()[1] == 0, call
    for mode in ("auto", "hybrid"):  # auto: paragraphs (cites '[]'); hybrid: summaries too (their anchors)
        filled = corpus.execute("SELECT count(*), count(cites), count(parent), count(*) FILTER (WHERE cites::text <> '[]') "
                                "FROM rag.search('pain', %s, %s, p_expand => '{parent}')", (e5.query("pain"), mode)).fetchone()
        assert filled[0] > 0 and filled[1] == filled[0] and filled[2] > 0, mode
        assert (filled[3] > 0) == (mode == "hybrid"), mode


def test_two_models_are_never_compared(corpus, e5):
    """Two models registered: the branch refuses, and so does the default search (its generated
    function, rag._default_search, answers nothing when the models are not exactly its own, and
    the general functions name the problem)."""
    v = e5.query("pain")
    assert corpus.execute("SELECT count(*) FROM rag._default_search('pain', %s, 5)", (v,)).fetchone()[0] > 0
    corpus.execute("INSERT INTO rag.embedding_models (model, dimension, index_name) VALUES ('other/model', 384, 'x')")
    assert corpus.execute("SELECT count(*) FROM rag._default_search('pain', %s, 5)", (v,)).fetchone()[0] == 0
    for call in ("rag.search_branch(NULL, %s, 'vector')", "rag.search('pain', %s)"):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="several embedding models are registered"):
            with corpus.transaction():
                corpus.execute(f"SELECT * FROM {call}", (v,))


def test_every_search_argument_is_bound_from_one_python_definition(corpus):
    """rag.search's arguments are all reachable from SearchRequest (its fields name them); a new
    SQL parameter without its field, or a field naming no argument, fails. rag.build_context's
    search arguments are rag.search's, so the Python composition (CONTEXT) covers it."""
    from dataclasses import fields

    from bookrag.search import CONTEXT, SEARCH_CALL, SearchRequest

    def args_of(function):
        return {r[0] for r in corpus.execute("SELECT unnest(proargnames) FROM pg_proc WHERE oid = %s::regproc", (function,))}

    named = {f.metadata["sql"] for f in fields(SearchRequest) if f.metadata}
    bound = {a.split(" => ")[0] for a in SEARCH_CALL[SEARCH_CALL.index("(") + 1:-1].split(", ")}
    assert bound == args_of("rag.search") - {"p_node_type"}
    assert named <= args_of("rag.search")
    assert args_of("rag.build_context") - {"p_budget", "p_expand"} <= args_of("rag.search")
    assert SEARCH_CALL in CONTEXT


def test_rag_search_is_inlined_into_the_callers_statement(corpus, e5):
    """rag.search is a SQL function without settings: the planner inlines it, so a caller's
    prepared statement caches one plan and an expansion not asked for never runs."""
    plan = "\n".join(r[0] for r in corpus.execute(
        "EXPLAIN (COSTS OFF) SELECT * FROM rag.search('pain', %s, 'hybrid', 5, p_expand => '{parent}')", (e5.query("pain"),)))
    assert "Function Scan on _search_hits" in plan
    assert "Function Scan on search" not in plan
    assert "hierarchical_content_nodes" in plan  # the parents' rows, read by the caller's statement
    plain = "\n".join(r[0] for r in corpus.execute(
        "EXPLAIN (COSTS OFF) SELECT * FROM rag.search('pain', %s, 'hybrid', 5)", (e5.query("pain"),)))
    assert "Function Scan on _search_hits" in plain and "hierarchical_content_nodes" not in plain
