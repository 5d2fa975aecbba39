-- rag._search_in_sections: two-stage's second search, the kept sections' paragraphs ranked from the first search's BM25 rows and their exact kNN.
CREATE OR REPLACE FUNCTION rag._search_in_sections(
    p_query           TEXT,
    p_query_embedding vector,
    p_model           TEXT,
    p_sections        TEXT[],
    p_section_scores  FLOAT8[],
    p_bm25_ids        INT[],
    p_bm25_scores     FLOAT8[],
    p_k               INT,
    p_pool            INT,
    p_section_weight  FLOAT8,
    p_fusion          TEXT,
    p_normalisation   TEXT,
    p_bm25_weight     FLOAT8,
    p_vector_weight   FLOAT8,
    p_within          TEXT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
/*
Returns the p_k best paragraphs (level 0) whose parent is one of p_sections (rag.search_hit,
best first): rag.search_two_stage's stage 2 when the first search's rows hold fewer than p_k
of them. Two branches over the sections' paragraphs, each its greatest(p_k, p_pool) best:
  bm25    with a query vector and a model: the rows given (p_bm25_ids, p_bm25_scores: the first
          search's rows, its fused top 100, that have a BM25 score, with their pg_search score)
          that are paragraphs of the sections, ranked by that score. The first search read them
          already, so there is no second pg_search query, which costs 4-5 ms at 100k rows whatever
          its filter (decision 28). A paragraph of a section outside those rows gets the BM25
          floor, as any row a branch did not read, and can come in through the kNN branch.
          Without a vector or a model the kNN branch is empty and the rows given are the
          ones the first search already ranked, so the branch is then pg_search's top rows
          for p_query inside the sections, as it always was until migration 0019 (the scan's
          limit is the constant 1000, cut to the pool after: with a parameter as its LIMIT a
          generic plan loses pg_search's top-N scan);
  vector  the exact nearest among the sections' paragraphs embedded with p_model, read
          through the parent index (OFFSET 0 keeps the planner off the HNSW scan: sections are
          small, and a filtered HNSW scan can miss rows);
then rag.search_hybrid's fusion over them (its formulas, the RRF constant 60) and its ranking
(fused score, then the better branch rank, then id), the greatest(p_k, p_pool) best kept, and
two-stage's score over those: (1 - p_section_weight) * the fused score min-max normalised over
them + p_section_weight * the section's score (p_section_scores, in p_sections' order).
Parameters (rag.search_two_stage and the generated default search pass them checked; a value
out of bounds is an error naming it, the same as in those functions: bookrag_reader can call it):
  p_query        as rag._check_search_args takes it (read only without a vector or a model)
  p_model        the corpus model (rag._corpus_model), NULL when no vector is loaded: BM25 alone
  p_sections     source_files of the kept level-1 sections, p_section_scores their scores
  p_bm25_ids, p_bm25_scores  the BM25 rows, same length (NULL or empty: none; an id given twice
                 counts with its best score; rows that are not paragraphs of the sections, or
                 are outside p_within's subtree, are ignored)
  p_k            1..1000 (rag._check_search_args)
  p_pool         1..1000
  p_section_weight 0..1
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight: checked by rag._fusion_settings
                 (NULL = its defaults)
  p_within       NULL or a source_file: only paragraphs inside its subtree (rag._subtree_ids)
Until migration 0019 the BM25 branch was always a pg_search query filtered to the sections,
whose top rows a paragraph outside the first search's rows could enter: the same quality on
both halves of the three evalsets (evaluation/experiments/two_stage/second_bm25.py: mean of
recall@5 and MRR@10, tuning 0.759 both, held-out 0.689 -> 0.690; the second search ran for 3
and 98 of the tuning halves' 84 book and 600 PIAF questions). When it ran,
the rows were rag.search_hybrid(p_levels => '{0}', p_parent_files => p_sections, p_pool)'s,
which still holds with the BM25 rows that search reads given here
(tests/sql/test_search_functions.py).
Cost: a parent-index read of the sections' paragraphs and one distance each, an index lookup
per BM25 row given (a pg_search scan filtered to the sections instead, without a vector), a
fusion in memory; the plans are cached (forced generic). At 100k synthetic rows, where it runs
on almost every query, inside the generated default search (evaluation/experiments/latency/
inside.py --synthetic 100000): 8.1 ms as rag.search_hybrid (until migration 0016), 4.0-4.3 ms
with a pg_search query from a static statement (until 0019), 1.5 ms since.
*/
DECLARE
    v_pool INT := greatest(p_k, p_pool);
    v_ids  INT[];              -- p_within's subtree, NULL for none
    b_ids  INT[] := p_bm25_ids;  -- the BM25 branch's rows
    b_s    FLOAT8[] := p_bm25_scores;
    st     RECORD;
BEGIN
    PERFORM rag._check_search_args(p_query, p_k);
    IF p_pool IS NULL OR p_pool < 1 OR p_pool > 1000 THEN
        RAISE EXCEPTION 'pool must be between 1 and 1000, got %', coalesce(p_pool::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_section_weight IS NULL OR p_section_weight < 0 OR p_section_weight > 1 THEN
        RAISE EXCEPTION 'section_weight must be within 0..1, got %', coalesce(p_section_weight::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(p_sections) IS DISTINCT FROM cardinality(p_section_scores) THEN
        RAISE EXCEPTION 'sections and section_scores must have the same length, got % and %',
            coalesce(cardinality(p_sections)::text, 'NULL'), coalesce(cardinality(p_section_scores)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(cardinality(p_bm25_ids), 0) <> coalesce(cardinality(p_bm25_scores), 0) THEN
        RAISE EXCEPTION 'bm25_ids and bm25_scores must have the same length, got % and %',
            coalesce(cardinality(p_bm25_ids)::text, 'NULL'), coalesce(cardinality(p_bm25_scores)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_ids := rag._subtree_ids(p_within);
    SELECT * INTO st FROM rag._fusion_settings(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, 0);
    IF p_query_embedding IS NULL OR p_model IS NULL THEN
        -- no kNN branch to add paragraphs: pg_search inside the sections (the index filters by them)
        SELECT array_agg(x.id), array_agg(x.s) INTO b_ids, b_s FROM (
            SELECT n.id, pdb.score(n.id)::float8 AS s
            FROM rag.hierarchical_content_nodes n
            WHERE n.content ||| p_query AND n.level = ANY(ARRAY[0]) AND n.parent_source_file = ANY(p_sections)
            ORDER BY pdb.score(n.id) DESC LIMIT 1000) x;  -- a constant: pg_search's top-N scan needs one
    END IF;
    RETURN QUERY
    WITH b AS (
        SELECT y.* FROM (
            SELECT x.id, x.s, row_number() OVER (ORDER BY x.s DESC, x.id)::int AS r, x.lvl, x.sf, x.pf FROM (
                SELECT n.id, u.s, n.level AS lvl, n.source_file AS sf, n.parent_source_file AS pf
                FROM (SELECT g.id, max(g.s) AS s FROM unnest(b_ids, b_s) AS g(id, s)
                      WHERE g.s IS NOT NULL GROUP BY g.id) u
                JOIN rag.hierarchical_content_nodes n ON n.id = u.id
                WHERE n.level = 0 AND n.parent_source_file = ANY(p_sections)
                  AND (v_ids IS NULL OR n.id = ANY(v_ids))) x
            ) y
        WHERE y.r <= v_pool
    ), v AS (
        SELECT y.id, 1 - y.d AS s, row_number() OVER (ORDER BY y.d, y.id)::int AS r, y.lvl, y.sf, y.pf FROM (
            SELECT z.* FROM (
                SELECT n.id, (n.embedding <=> p_query_embedding)::float8 AS d, n.level AS lvl,
                       n.source_file AS sf, n.parent_source_file AS pf
                FROM rag.hierarchical_content_nodes n
                WHERE n.level = 0 AND n.parent_source_file = ANY(p_sections) AND n.embedding_model = p_model
                  AND n.embedding IS NOT NULL AND p_query_embedding IS NOT NULL
                  AND (v_ids IS NULL OR n.id = ANY(v_ids))
                OFFSET 0) z
            ORDER BY z.d LIMIT v_pool) y
    ), bx AS (
        SELECT b.*, CASE WHEN st.fusion = 'rrf' THEN 1.0::float8 / (60 + b.r)
                         WHEN st.normalisation = 'minmax'
                         THEN coalesce((b.s - min(b.s) OVER ()) / nullif(max(b.s) OVER () - min(b.s) OVER (), 0), 1)
                         ELSE coalesce((b.s - avg(b.s) OVER ()) / nullif(stddev_pop(b.s) OVER (), 0), 1) END AS x
        FROM b
    ), vx AS (
        SELECT v.*, CASE WHEN st.fusion = 'rrf' THEN 1.0::float8 / (60 + v.r)
                         WHEN st.normalisation = 'minmax'
                         THEN coalesce((v.s - min(v.s) OVER ()) / nullif(max(v.s) OVER () - min(v.s) OVER (), 0), 1)
                         ELSE coalesce((v.s - avg(v.s) OVER ()) / nullif(stddev_pop(v.s) OVER (), 0), 1) END AS x
        FROM v
    ), fl AS (
        SELECT coalesce((SELECT least(min(bx.x), 0) FROM bx), 0) AS bf, coalesce((SELECT least(min(vx.x), 0) FROM vx), 0) AS vf
    ), f AS (
        SELECT coalesce(bx.id, vx.id) AS id, bx.r AS br, bx.s AS bs, vx.r AS vr, vx.s AS vs,
               coalesce(bx.pf, vx.pf) AS pf,
               CASE WHEN st.fusion = 'rrf' THEN st.bm25_weight * coalesce(bx.x, 0) + st.vector_weight * coalesce(vx.x, 0)
                    ELSE (st.bm25_weight * coalesce(bx.x, fl.bf) + st.vector_weight * coalesce(vx.x, fl.vf))
                         / (st.bm25_weight + st.vector_weight) END AS fused
        FROM bx FULL JOIN vx ON bx.id = vx.id CROSS JOIN fl
    ), top AS (
        SELECT f.*, row_number() OVER (ORDER BY f.fused DESC, least(f.br, f.vr), f.id)::int AS rk
        FROM f ORDER BY f.fused DESC, least(f.br, f.vr), f.id LIMIT v_pool
    ), sec AS (
        SELECT u.f, u.sc FROM unnest(p_sections, p_section_scores) AS u(f, sc)
    ), scored AS (
        SELECT t.*, sec.sc AS ssc,
               (1 - p_section_weight) * coalesce((t.fused - min(t.fused) OVER ())
                                                 / nullif(max(t.fused) OVER () - min(t.fused) OVER (), 0), 1)
               + p_section_weight * sec.sc AS final
        FROM top t JOIN sec ON sec.f = t.pf
    ), best AS (
        SELECT x.*, row_number() OVER (ORDER BY x.final DESC, x.rk, x.id)::int AS r2
        FROM scored x ORDER BY x.final DESC, x.rk, x.id LIMIT p_k
    )
    SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
           x.final, x.r2, x.br, x.bs, x.vr, x.vs, x.ssc, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json
    FROM best x JOIN rag.hierarchical_content_nodes n ON n.id = x.id
    ORDER BY x.r2;
END
$$;
