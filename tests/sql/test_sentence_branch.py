"""The sentence branch (issue 11): rag._sentences finds paragraphs through the chapter-summary
sentences that cite them, and rag.search places them in a hybrid list (rag._search_hits)."""

from __future__ import annotations

import json

import psycopg
import pytest
from psycopg import sql

BOOK = "traite-des-echanges"
C = f"corpus/{BOOK}"
BOULANGER = f"{C}/premiere-partie/chapitre-01-le-boulanger/source.md"
ROUTES = f"{C}/premiere-partie/chapitre-02-les-routes/source.md"
QUERY = "Pourquoi la spécialisation des artisans rend-elle le village plus riche ?"


def test_a_paragraph_is_found_through_the_sentence_that_cites_it(corpus, e5):
    v = e5.query(QUERY)
    hits = corpus.execute(
        "SELECT source_file, level, rank, score, sentence_rank, sentence_score, bm25_rank, vector_rank "
        "FROM (SELECT (x.hit).* FROM rag._sentences((SELECT model FROM rag.embedding_models), ARRAY[%s::vector], 4, NULL, NULL) x)",
        (v,),
    ).fetchall()
    # the boulanger summary's sentence cites its paragraphs 2 and 3: both come first, level-0 rows
    assert [h[0] for h in hits[:2]] == [BOULANGER, BOULANGER]
    assert all(h[1] == 0 for h in hits)
    assert [h[2] for h in hits] == [h[4] for h in hits] == list(range(1, len(hits) + 1))
    assert all(h[3] == h[5] for h in hits) and hits[0][5] >= hits[-1][5]
    assert all(h[6] is None and h[7] is None for h in hits)
    paragraphs = corpus.execute(
        "SELECT n.paragraph FROM (SELECT (x.hit).* FROM rag._sentences((SELECT model FROM rag.embedding_models), ARRAY[%s::vector], 2, NULL, NULL) x) s "
        "JOIN rag.hierarchical_content_nodes n ON n.id = s.id",
        (v,),
    ).fetchall()
    assert sorted(p for (p,) in paragraphs) == [2, 3]


def test_a_tie_at_the_cut_goes_to_the_paragraph_closest_to_the_query(corpus, e5):
    # the boulanger sentence cites paragraphs 2 and 3: the same sentence score, so with k = 1 the
    # paragraph's own similarity decides, though only one of them can be kept
    v = e5.query(QUERY)
    closest = corpus.execute(
        "SELECT paragraph FROM rag.hierarchical_content_nodes WHERE source_file = %s "
        "AND paragraph IN (2, 3) ORDER BY embedding <=> %s LIMIT 1",
        (BOULANGER, v),
    ).fetchone()[0]
    for k in (1, 2):
        rows = corpus.execute(
            "SELECT n.source_file, n.paragraph, s.sentence_score FROM (SELECT (x.hit).* FROM rag._sentences((SELECT model FROM rag.embedding_models), ARRAY[%s::vector], %s, NULL, NULL) x) s "
            "JOIN rag.hierarchical_content_nodes n ON n.id = s.id ORDER BY s.rank",
            (v, k),
        ).fetchall()
        assert rows[0][:2] == (BOULANGER, closest)
        assert len(rows) == k and rows[-1][2] == pytest.approx(rows[0][2])


def test_sentence_scores_are_the_best_citing_sentence_similarity(corpus, e5):
    v = e5.query(QUERY)
    before = corpus.execute(
        "SELECT max(1 - (embedding <=> %s)) FROM rag.sentences WHERE cited_source_file = %s "
        "AND 2 = ANY(cited_paragraphs)",
        (v, BOULANGER),
    ).fetchone()[0]
    top = corpus.execute(
        "SELECT sentence_score FROM (SELECT (x.hit).* FROM rag._sentences((SELECT model FROM rag.embedding_models), ARRAY[%s::vector], 1, NULL, NULL) x)",
        (v,),
    ).fetchone()[0]
    assert top == pytest.approx(before)
    # a second sentence citing the routes' paragraph 3 alone, worded as the query: it now leads,
    # with its own similarity (1), and the paragraph's other citing sentence does not lower it
    corpus.execute(
        "INSERT INTO rag.sentences (source_file, chunk_index, sentence_index, content, cited_source_file, "
        "cited_paragraphs, embedding_model, embedding) SELECT source_file, chunk_index, 1, %s, "
        "cited_source_file, '{3}', embedding_model, %s FROM rag.sentences WHERE cited_source_file = %s",
        (QUERY, v, ROUTES),
    )
    top = corpus.execute(
        "SELECT s.sentence_score, n.source_file, n.paragraph FROM (SELECT (x.hit).* FROM rag._sentences((SELECT model FROM rag.embedding_models), ARRAY[%s::vector], 1, NULL, NULL) x) s "
        "JOIN rag.hierarchical_content_nodes n ON n.id = s.id",
        (v,),
    ).fetchone()
    assert top[0] == pytest.approx(1.0, abs=1e-6) and top[1:] == (ROUTES, 3)


def test_the_sentences_are_searched_through_their_hnsw_index(corpus, e5):
    # rag._ensure_vector_index (run by the load) made the sentences' index; rag._sentences scans
    # it (this transaction's own index-scan counts), with or without a book; within a subtree it
    # ranks that subtree's sentences exactly, found through rag.sentences_cited_idx instead
    hnsw = corpus.execute(
        "SELECT 'rag.sent_halfvec_' || substr(md5(model), 1, 12) FROM rag.embedding_models"
    ).fetchone()[0]

    def scans(index: str) -> int:
        return corpus.execute("SELECT pg_stat_get_xact_numscans(%s::regclass)", (index,)).fetchone()[0]

    v = e5.query(QUERY)
    corpus.execute("SET enable_seqscan = off")  # as rag._search_hits runs it
    before = scans(hnsw)
    assert (
        corpus.execute(
            "SELECT count(*) FROM (SELECT (x.hit).* FROM rag._sentences((SELECT model FROM rag.embedding_models), ARRAY[%s::vector], 3, NULL, NULL) x)",
            (v,),
        ).fetchone()[0]
        == 3
    )
    after_all = scans(hnsw)
    assert after_all > before
    corpus.execute(
        "SELECT * FROM (SELECT (x.hit).* FROM rag._sentences((SELECT model FROM rag.embedding_models), ARRAY[%s::vector], 3, %s, NULL) x)",
        (v, BOOK),
    ).fetchall()
    assert scans(hnsw) > after_all
    hnsw_before, cited_before = scans(hnsw), scans("rag.sentences_cited_idx")
    top = corpus.execute(
        "SELECT sentence_score FROM (SELECT (x.hit).* FROM rag._sentences((SELECT model FROM rag.embedding_models), ARRAY[%s::vector], 3, %s, rag._subtree_ids(%s)) x)",
        (v, BOOK, ROUTES.replace("source.md", "summary.md")),
    ).fetchone()[0]
    assert scans(hnsw) == hnsw_before and scans("rag.sentences_cited_idx") > cited_before
    exact = corpus.execute(
        "SELECT max(1 - (embedding <=> %s)) FROM rag.sentences WHERE cited_source_file = %s", (v, ROUTES)
    ).fetchone()[0]
    assert top == pytest.approx(exact)


def test_the_sentences_index_is_half_precision_and_replaces_the_old_one(corpus, e5):
    # migration 0018 (decision 27): rag._ensure_vector_index, which the migration runs for every
    # registered model, drops a database's full-precision sentences index and makes the halfvec one;
    # the distances rag._sentences reports stay the full-precision ones
    model, dim, tag = corpus.execute(
        "SELECT model, dimension, substr(md5(model), 1, 12) FROM rag.embedding_models"
    ).fetchone()
    corpus.execute(f"DROP INDEX rag.sent_halfvec_{tag}")
    corpus.execute(
        sql.SQL(
            "CREATE INDEX {} ON rag.sentences USING hnsw ((embedding::vector({})) vector_cosine_ops) "
            "WHERE embedding_model = {}"
        ).format(sql.Identifier(f"sent_hnsw_{tag}"), dim, sql.Literal(model))
    )
    corpus.execute("SELECT rag._ensure_vector_index(%s, %s)", (model, dim))
    indexes = dict(
        corpus.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'rag' "
            "AND tablename = 'sentences' AND indexdef LIKE %s",
            ("%USING hnsw%",),
        ).fetchall()
    )
    assert list(indexes) == [f"sent_halfvec_{tag}"]
    assert (
        f"halfvec({dim})" in indexes[f"sent_halfvec_{tag}"]
        and "halfvec_cosine_ops" in indexes[f"sent_halfvec_{tag}"]
    )
    v = e5.query(QUERY)
    got = corpus.execute(
        "SELECT n.source_file, n.paragraph, s.sentence_score FROM (SELECT (x.hit).* FROM rag._sentences((SELECT model FROM rag.embedding_models), ARRAY[%s::vector], 3, NULL, NULL) x) s "
        "JOIN rag.hierarchical_content_nodes n ON n.id = s.id ORDER BY s.rank",
        (v,),
    ).fetchall()
    exact = dict(
        ((f, n), sim)
        for f, n, sim in corpus.execute(
            "SELECT st.cited_source_file, p.n, max(1 - (st.embedding <=> %s)) FROM rag.sentences st, "
            "unnest(st.cited_paragraphs) AS p(n) GROUP BY 1, 2",
            (v,),
        ).fetchall()
    )
    best = sorted(exact.values(), reverse=True)[:3]
    assert [score for *_, score in got] == pytest.approx(best, abs=1e-12)  # the best three, full precision
    assert all(exact[(f, n)] == pytest.approx(score, abs=1e-12) for f, n, score in got)


def test_the_default_search_scans_the_sentences_halfvec_index(corpus, e5):
    # the scan written for the corpus model (rag._knn_sentences) names the index's expression
    # (halfvec of the model's dimension): the default search scans that index (this
    # transaction's own index-scan counts)
    tag = corpus.execute("SELECT substr(md5(model), 1, 12) FROM rag.embedding_models").fetchone()[0]

    def scans() -> int:
        return corpus.execute(
            "SELECT pg_stat_get_xact_numscans(%s::regclass)", (f"rag.sent_halfvec_{tag}",)
        ).fetchone()[0]

    before = scans()
    rows = corpus.execute(
        "SELECT sentence_rank FROM rag.search(%s, %s, p_k => 5)", (QUERY, e5.query(QUERY))
    ).fetchall()
    assert any(r[0] is not None for r in rows)  # the branch placed a paragraph
    assert scans() > before


def test_filters_book_and_within(corpus, e5):
    v = e5.query(QUERY)
    inside = corpus.execute(
        "SELECT DISTINCT source_file FROM (SELECT (x.hit).* FROM rag._sentences((SELECT model FROM rag.embedding_models), ARRAY[%s::vector], 10, NULL, rag._subtree_ids(%s)) x)",
        (v, ROUTES.replace("source.md", "summary.md")),
    ).fetchall()
    assert inside == [(ROUTES,)]


def ids(conn, v, mode="hybrid", within=None, **settings):
    return conn.execute(
        "SELECT id, sentence_rank FROM rag.search(%(q)s, %(v)s, %(mode)s, 6, p_within => %(w)s, "
        "p_tuning => %(t)s)",
        {"q": QUERY, "v": v, "mode": mode, "w": within, "t": json.dumps(settings) if settings else None},
    ).fetchall()


def paragraph(conn, row_id):
    return conn.execute(
        "SELECT source_file, paragraph FROM rag.hierarchical_content_nodes WHERE id = %s", (row_id,)
    ).fetchone()


def expected_merge(conn, fused, branch, after, every, k=6):
    """The documented merge, computed here: with n rows placed, the next place is the branch's when
    n >= after and (n - after) % every == 0, the fused list's otherwise; each place takes its
    list's next row whose paragraph is not placed yet (a fused row: not placed by the branch); a
    list that runs out leaves the places to the other. Returns the merged ids and those taken
    from the branch."""
    queues = {"fused": list(fused), "branch": list(branch)}
    out, from_branch = [], []
    while len(out) < k and (queues["fused"] or queues["branch"]):
        n = len(out)
        turn = (
            "branch"
            if (queues["branch"] and n >= after and (n - after) % every == 0) or not queues["fused"]
            else "fused"
        )
        taken = {paragraph(conn, i) for i in (out if turn == "branch" else from_branch)}
        queue = queues[turn]
        while queue and paragraph(conn, queue[0]) in taken:
            queue.pop(0)
        if queue:
            out.append(queue.pop(0))
            if turn == "branch":
                from_branch.append(out[-1])
    return out, from_branch


MODE_LISTS = {
    "hybrid": "rag.search(%s, %s, 'hybrid', 6, p_within => %s, p_tuning => '{\"sentence_every\": 0}')",
    "two-stage": "rag.search(%s, %s, 'two-stage', 6, p_within => %s, p_tuning => '{\"sentence_every\": 0}')",
}


@pytest.mark.parametrize(
    "mode,after,every,within",
    [
        ("hybrid", 1, 2, None),
        ("hybrid", 1, 3, None),
        ("hybrid", 0, 1, None),
        ("hybrid", 2, 1, None),
        # inside a part: both lists keep to its subtree
        ("hybrid", 1, 3, f"{C}/premiere-partie/summary.md"),
        # two-stage's list (sections first) takes the branch's places the same way
        ("two-stage", 1, 3, None),
        ("two-stage", 0, 1, None),
        ("two-stage", 1, 3, f"{C}/premiere-partie/summary.md"),
    ],
)
def test_the_sentence_branch_takes_its_places_after_n_then_one_in_every_m(
    corpus, e5, mode, after, every, within
):
    v = e5.query(QUERY)
    fused = [r[0] for r in corpus.execute(f"SELECT id FROM {MODE_LISTS[mode]}", (QUERY, v, within))]
    assert [i for (i, _) in ids(corpus, v, mode, sentence_every=0, within=within)] == fused
    branch = [
        r[0]
        for r in corpus.execute(
            "SELECT id FROM (SELECT (x.hit).* FROM rag._sentences((SELECT model FROM rag.embedding_models), ARRAY[%s::vector], 12, NULL, rag._subtree_ids(%s)) x)",
            (v, within),
        )
    ]
    expected, from_branch = expected_merge(corpus, fused, branch, after, every)
    assert from_branch, "the branch must place at least one paragraph"
    merged = ids(corpus, v, mode, sentence_after=after, sentence_every=every, within=within)
    assert [i for (i, _) in merged] == expected
    assert all((r is not None) == (i in from_branch) for (i, r) in merged)
    placed = [paragraph(corpus, i) for (i, r) in merged if r is not None]
    assert not set(placed) & {paragraph(corpus, i) for (i, r) in merged if r is None}
    if within:
        inside = {r[0] for r in corpus.execute("SELECT unnest(rag._subtree_ids(%s))", (within,))}
        assert {i for (i, _) in merged} <= inside


def test_a_paragraph_both_lists_hold_takes_the_better_of_its_two_places(corpus, e5):
    # the branch's best paragraph is also in the fused list, below the first place: with the
    # branch given the first place, it moves up there and is not listed twice
    v = e5.query(QUERY)
    fused = [
        paragraph(corpus, r[0])
        for r in corpus.execute(
            "SELECT id FROM rag.search(%s, %s, 'hybrid', 6, p_tuning => '{\"sentence_every\": 0}')",
            (QUERY, v),
        )
    ]
    best = paragraph(
        corpus,
        corpus.execute(
            "SELECT id FROM (SELECT (x.hit).* FROM rag._sentences((SELECT model FROM rag.embedding_models), ARRAY[%s::vector], 1, NULL, NULL) x)",
            (v,),
        ).fetchone()[0],
    )
    assert best in fused[1:], "the fixture query's best cited paragraph must be in the fused list, not first"
    merged = [paragraph(corpus, i) for (i, _) in ids(corpus, v, sentence_after=0, sentence_every=2)]
    assert merged[0] == best and merged.count(best) == 1
    assert merged[1] == fused[0]
    # the moved row keeps the fused row's branch columns when the fused list held the same chunk
    cols = "bm25_rank, bm25_score, vector_rank, vector_score, section_score"
    rows = corpus.execute(
        f"SELECT id, sentence_rank, {cols} FROM rag.search(%s, %s, 'hybrid', 6, "
        'p_tuning => \'{"sentence_after": 0, "sentence_every": 2}\')',
        (QUERY, v),
    ).fetchall()
    same = corpus.execute(
        f"SELECT {cols} FROM rag.search(%s, %s, 'hybrid', 6, p_tuning => '{{\"sentence_every\": 0}}') WHERE id = %s",
        (QUERY, v, rows[0][0]),
    ).fetchone()
    assert rows[0][1] == 1 and same is not None and rows[0][2:] == same and same[0] is not None
    # a branch row the fused list does not hold has no branch columns
    fused_ids = {
        r[0]
        for r in corpus.execute(
            "SELECT id FROM rag.search(%s, %s, 'hybrid', 6, p_tuning => '{\"sentence_every\": 0}')",
            (QUERY, v),
        )
    }
    alone = [r for r in rows if r[1] is not None and r[0] not in fused_ids]
    assert alone and all(r[2:] == (None,) * 5 for r in alone)
    # and a paragraph only the branch holds enters the list
    assert set(paragraph(corpus, i) for (i, _) in ids(corpus, v, sentence_after=1, sentence_every=2)) - set(
        fused
    )


def test_the_chunks_of_one_long_paragraph(corpus, e5):
    # two more chunks of the routes chapter's paragraph 3 (as a long paragraph is cut), worded
    # and embedded as the query, so that the fused list holds both
    v = e5.query(QUERY)
    new = [
        r[0]
        for r in corpus.execute(
            "INSERT INTO rag.hierarchical_content_nodes (level, parent_source_file, node_type, source_file, source_file_hash, "
            "chunk_index, heading_path, content, content_token_count, embedding_model, embedding, node_order, paragraph) "
            "SELECT level, parent_source_file, node_type, source_file, source_file_hash, 10 + i, heading_path, %s, 12, "
            "embedding_model, %s, node_order, 3 FROM rag.hierarchical_content_nodes, generate_series(0, 1) i "
            "WHERE source_file = %s AND chunk_index = 2 RETURNING id",
            (QUERY, v, ROUTES),
        )
    ]
    fused = [
        r[0]
        for r in corpus.execute(
            "SELECT id FROM rag.search(%s, %s, 'hybrid', 6, p_tuning => '{\"sentence_every\": 0}')",
            (QUERY, v),
        )
    ]
    assert set(new) <= set(fused)
    # no sentence cites paragraph 3: both chunks stay, in their fused order
    merged = [i for (i, _) in ids(corpus, v, sentence_after=1, sentence_every=3)]
    assert [i for i in merged if i in new] == [i for i in fused if i in new]
    # a sentence worded as the query cites it: the branch places the paragraph first, by its chunk
    # closest to the query, and the fused list's chunks of that paragraph are not listed again
    corpus.execute(
        "INSERT INTO rag.sentences (source_file, chunk_index, sentence_index, content, cited_source_file, "
        "cited_paragraphs, embedding_model, embedding) SELECT source_file, chunk_index, 1, %s, "
        "cited_source_file, '{3}', embedding_model, %s FROM rag.sentences WHERE cited_source_file = %s",
        (QUERY, v, ROUTES),
    )
    merged = ids(corpus, v, sentence_after=0, sentence_every=3)
    assert merged[0][0] in new and merged[0][1] == 1
    assert [i for (i, _) in merged].count(merged[0][0]) == 1
    assert not set(new) - {merged[0][0]} & {i for (i, _) in merged}
    assert {paragraph(corpus, i) for (i, _) in merged[1:]}.isdisjoint({(ROUTES, 3)})


def test_the_branch_is_skipped_when_filters_exclude_paragraphs(corpus, e5):
    v = e5.query(QUERY)
    summaries = corpus.execute(
        "SELECT level, sentence_rank FROM rag.search(%s, %s, p_levels => '{1}')", (QUERY, v)
    ).fetchall()
    assert summaries and all(lvl == 1 and r is None for lvl, r in summaries)
    bm25_only = corpus.execute(
        "SELECT sentence_rank FROM rag.search(%s, NULL, 'hybrid')", (QUERY,)
    ).fetchall()
    assert bm25_only and all(r is None for (r,) in bm25_only)


@pytest.mark.parametrize(
    "args,message",
    [
        ('{"sentence_after": -1}', "sentence_after and sentence_every must be within 0..1000, got -1 and 3"),
        (
            '{"sentence_every": 1001}',
            "sentence_after and sentence_every must be within 0..1000, got 1 and 1001",
        ),
    ],
)
def test_bad_sentence_settings_are_refused_by_name(corpus, e5, args, message):
    with pytest.raises(psycopg.errors.InvalidParameterValue) as info:
        corpus.execute(
            "SELECT * FROM rag.search(%s, %s, p_tuning => %s::jsonb)", (QUERY, e5.query(QUERY), args)
        )
    assert info.value.diag.message_primary == message
    corpus.rollback()
    assert corpus.execute("SELECT 1").fetchone() == (1,)


def test_the_branch_stays_out_of_summary_only_searches(corpus, e5):
    v = e5.query(QUERY)
    rows = corpus.execute(
        "SELECT node_type, sentence_rank FROM rag.search(%s, %s, p_levels => '{1,2,3}')", (QUERY, v)
    ).fetchall()
    assert rows and all(t == "summary" and r is None for t, r in rows)


def test_two_stage_takes_the_branch_by_default(corpus, e5):
    # the defaults (rag._settings) place the branch in a two-stage list as in a hybrid one;
    # sentence_every 0 gives back the sections-only list
    v = e5.query(QUERY)
    default = ids(corpus, v, "two-stage")
    assert default == ids(corpus, v, "two-stage", sentence_after=1, sentence_every=3)
    assert any(r is not None for (_, r) in default)
    sections_only = [
        r[0]
        for r in corpus.execute(
            "SELECT id FROM rag.search(%s, %s, 'two-stage', 6, p_tuning => '{\"sentence_every\": 0}')",
            (QUERY, v),
        )
    ]
    assert (
        [i for (i, _) in ids(corpus, v, "two-stage", sentence_every=0)]
        == sections_only
        != [i for (i, _) in default]
    )


@pytest.mark.parametrize("within", [None, f"{C}/premiere-partie/summary.md"])
def test_several_vectors_in_one_call_give_each_its_own_rows(corpus, e5, within):
    # rag._search_hits sends every wording's vector in one call: each gets exactly the rows a
    # call with its vector alone returns, a NULL vector none
    vectors = [
        e5.query(QUERY),
        None,
        e5.query("Les routes et le commerce entre les villages"),
        e5.query("le prix du pain"),
    ]
    call = (
        "SELECT x.wording, (x.hit).id, (x.hit).rank, (x.hit).sentence_score FROM rag._sentences("
        "(SELECT model FROM rag.embedding_models), %s::vector[], 5, NULL, rag._subtree_ids(%s)) x"
    )
    together = corpus.execute(call, (vectors, within)).fetchall()
    assert together, "the sentence branch found nothing"
    for w, v in enumerate(vectors, start=1):
        alone = [] if v is None else [(w, *r[1:]) for r in corpus.execute(call, ([v], within)).fetchall()]
        assert [r for r in together if r[0] == w] == alone
    assert not [r for r in together if r[0] == 2]
