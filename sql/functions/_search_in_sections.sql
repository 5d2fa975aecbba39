-- rag._search_in_sections: two-stage's second search, the kept sections' paragraphs ranked from static statements.
CREATE OR REPLACE FUNCTION rag._search_in_sections(
    p_query           TEXT,
    p_query_embedding vector,
    p_model           TEXT,
    p_sections        TEXT[],
    p_section_scores  FLOAT8[],
    p_k               INT,
    p_pool            INT,
    p_section_weight  FLOAT8,
    p_fusion          TEXT,
    p_normalisation   TEXT,
    p_bm25_weight     FLOAT8,
    p_vector_weight   FLOAT8
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
/*
Returns the p_k best paragraphs (level 0) whose parent is one of p_sections (rag.search_hit,
best first): rag.search_two_stage's stage 2 when the first search's rows hold fewer than p_k
of them. The two branches read the sections' paragraphs only, each its greatest(p_k, p_pool)
best:
  bm25    the pg_search top rows, the sections given to the index as a filter (the scan's limit
          is the constant 1000, the largest pool, cut to the pool after: with a parameter
          as its LIMIT, a generic plan loses pg_search's top-N scan and scores every match,
          12 against 3 ms for one query at 100k rows, EXPLAIN ANALYZE);
  vector  the exact nearest among the sections' paragraphs embedded with p_model, read
          through the parent index (OFFSET 0 keeps the planner off the HNSW scan: sections are
          small, and a filtered HNSW scan can miss rows);
then rag.search_hybrid's fusion over them (its formulas, the RRF constant 60) and its ranking
(fused score, then the better branch rank, then id), the greatest(p_k, p_pool) best kept, and
two-stage's score over those: (1 - p_section_weight) * the fused score min-max normalised over
them + p_section_weight * the section's score (p_section_scores, in p_sections' order).
Parameters (rag.search_two_stage and the generated default search pass them checked; a value
out of bounds is an error naming it, the same as in those functions: bookrag_reader can call it):
  p_query, p_k   as rag._check_search_args takes them (k 1..1000)
  p_model        the corpus model (rag._corpus_model), NULL when no vector is loaded: BM25 alone
  p_sections     source_files of the kept level-1 sections, p_section_scores their scores
  p_pool         1..1000
  p_section_weight 0..1
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight: checked by rag._fusion_settings
                 (NULL = its defaults)
The rows are what rag.search_hybrid(p_levels => '{0}', p_parent_files => p_sections, p_pool)
returned for this search until migration 0016, which planned its two statements on every call,
whenever that planner read the sections' paragraphs exactly, as it did for the default's pool
of 100 (1,508 of 1,508 evalset calls equal: evaluation/experiments/latency/second_search.py).
With a pool of about 10 or less it could pick the HNSW scan instead (ef_search = the pool, no
iterative scan) and miss nearer paragraphs, which the exact read finds. The reported bm25_score
is pg_search's score, which adds a constant for each filter of its query (the level and the
sections here; that function's query also filtered by the book when given, one constant more);
ranks do not depend on it (min-max, z-score and RRF ignore a constant shift), the fused scores
only in their last digits.
Cost: a pg_search scan filtered to the sections, a parent-index read of the sections'
paragraphs and one distance each, a fusion in memory; the plan is cached (forced generic:
planning pg_search's statement with its values took 2.9 ms at 100k rows, EXPLAIN ANALYZE of
one query). At 100k synthetic
rows, where it runs on almost every query: 8.1 -> 4.0-4.3 ms inside the generated default search
(evaluation/experiments/latency/inside.py --synthetic 100000), and the default + parent over
bm25 + vector 1.98-1.99 -> 1.72-1.75 in alternate runs of bench/bench_search.py
(decision 25, evaluation/experiments/latency/README.md).
*/
DECLARE
    v_pool INT := greatest(p_k, p_pool);
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
    SELECT * INTO st FROM rag._fusion_settings(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, 0);
    RETURN QUERY
    WITH b AS (
        SELECT y.* FROM (
            SELECT x.id, x.s, row_number() OVER (ORDER BY x.s DESC, x.id)::int AS r, x.lvl, x.sf, x.pf FROM (
                SELECT n.id, pdb.score(n.id)::float8 AS s, n.level AS lvl, n.source_file AS sf, n.parent_source_file AS pf
                FROM rag.hierarchical_content_nodes n
                WHERE n.content ||| p_query AND n.level = ANY(ARRAY[0]) AND n.parent_source_file = ANY(p_sections)
                ORDER BY pdb.score(n.id) DESC LIMIT 1000) x  -- a constant: pg_search's top-N scan needs one
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
