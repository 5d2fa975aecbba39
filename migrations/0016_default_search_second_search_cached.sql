-- 0016_default_search_second_search_cached: two-stage's second search inside the kept sections from static statements with cached plans (rag._search_in_sections), for the general functions and the generated default search
-- depends: 0015_default_search_cached_plans

-- function: _install_model_search sha256:3231ed00ee35e6374917de6a7e8b58d9a2abc66c157b9d5f8563f9ea5c1799a0
-- rag._install_model_search: generate the corpus model's default search, whose statements are static so their plans are cached (loader only).
CREATE OR REPLACE FUNCTION rag._install_model_search(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
AS $$
/*
(Re)creates rag._default_search_<md5(model), 12 hex digits>(p_query TEXT, p_query_embedding
vector, p_k INT) RETURNS SETOF rag.search_hit and returns its name. It is the default search
(rag.search's 'auto' resolved to two-stage) without filters or settings, for p_k 1..100: the
same rows as rag.search_two_stage merged with rag.search_sentences by rag._interleave, from
two static statements: the BM25 and kNN top 100 (rag._branch_sql's statements), their fusion
(rag.search_hybrid's formulas,
with rag._fusion_settings' defaults read at run time), both stages (5 sections, section
weight 0.3: rag.search_two_stage's defaults), then the 2k nearest summary sentences and their
paragraphs (rag.search_sentences' statement). PL/pgSQL caches a static statement's plan for the
session (forced generic, so that the planner never goes back to planning them per call), which
the general functions cannot have: the kNN statement must name the model and its
dimension as literals (the partial HNSW index's predicate and expression), so they build it
anew, planned on every call. Here the model and dimension are formatted in when the function is
generated (%L, a number; a model name with a $ gets no function, since %L does not escape
it), as rag._ensure_vector_index formats them into the index. Measured: evaluation/experiments/
latency/ (the same rows on every question of the two books' evalsets and 200 of PIAF's, at k
1-30) and decision 24: about a third less time on the books.
When the rows read hold fewer than p_k paragraphs of the kept sections it runs
rag.search_two_stage's second search inside them (rag._search_in_sections, as that function
does since migration 0016).
It returns no row, and rag._search_hits then runs the general functions, when no section is
found (their flat fallback), when no paragraph of the kept sections is found at all ('auto'
then falls back to hybrid), or when a default it assumes is not the default (cite weight other
than 0). tests/sql/test_default_search.py compares it with the general functions on the fixture
corpus (five queries, k 1-100, those hand-overs too), so a change of either shows.
Called by rag._ensure_vector_index (at each load of embedded rows) and by `bookrag migrate`
(every registered model after it applied migrations, and any registered model whose function
is missing), so the generated text follows the installed template. The old function is dropped
and the new one created in one transaction: other sessions see one or the other. Privileges: EXECUTE for bookrag_reader, not PUBLIC.
Cost: a DROP and a CREATE FUNCTION (milliseconds).
*/
DECLARE
    v_name TEXT := rag._model_search_name(p_model);
BEGIN
    IF p_model IS NULL OR p_dimension IS NULL OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'model and a dimension within 1..2000 are required, got "%" and %', p_model, p_dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF strpos(p_model, '$') > 0 THEN
        -- %L does not escape dollar signs, and the name is written inside the $body$ quotes below
        RAISE NOTICE 'model "%" has a $ in its name: no generated default search, the general functions serve it', p_model;
        RETURN NULL;
    END IF;
    IF to_regprocedure(format('rag.%I(text,vector,integer)', v_name)) IS NOT NULL THEN
        EXECUTE format('DROP FUNCTION rag.%I(text, vector, integer)', v_name);  -- and CREATE below, in one transaction
    END IF;
    EXECUTE format($f$
CREATE FUNCTION rag.%1$I(p_query TEXT, p_query_embedding vector, p_k INT)
RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET hnsw.ef_search = 100
SET hnsw.iterative_scan = relaxed_order
AS $body$
DECLARE
    st      RECORD;
    v_short BOOLEAN;
    f_rows  rag.search_hit[];
    s_rows  rag.search_hit[];
    c_file  TEXT[];
    c_par   INT[];
    c_dist  FLOAT8[];
    v_files TEXT[];            -- the kept sections, best first, and their normalised scores
    v_scores FLOAT8[];
BEGIN
    PERFORM rag._check_search_args(p_query, p_k, NULL, NULL, NULL);
    SELECT * INTO st FROM rag._fusion_settings(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    IF st.cite_weight <> 0 OR p_k NOT BETWEEN 1 AND 100 THEN
        RETURN;
    END IF;
    -- Both branches' top 100 (two-stage's pool, so ef_search 100), the fusion over them, the 100
    -- best (rag.search_hybrid's rows), the 5 best sections, their paragraphs and the k rows kept.
    WITH b AS (
        SELECT x.id, x.s, row_number() OVER (ORDER BY x.s DESC, x.id)::int AS r, x.lvl, x.sf, x.pf FROM (
            SELECT n.id, pdb.score(n.id)::float8 AS s, n.level AS lvl, n.source_file AS sf, n.parent_source_file AS pf
            FROM rag.hierarchical_content_nodes n
            WHERE n.content ||| p_query
            ORDER BY pdb.score(n.id) DESC LIMIT 100) x
    ), v AS (
        SELECT y.id, 1 - y.d AS s, row_number() OVER (ORDER BY y.d, y.id)::int AS r, y.lvl, y.sf, y.pf FROM (
            SELECT n.id, (n.embedding::vector(%2$s) <=> p_query_embedding::vector(%2$s))::float8 AS d, n.level AS lvl,
                   n.source_file AS sf, n.parent_source_file AS pf
            FROM rag.hierarchical_content_nodes n
            WHERE n.embedding_model = %3$L AND n.embedding IS NOT NULL
            ORDER BY n.embedding::vector(%2$s) <=> p_query_embedding::vector(%2$s) LIMIT 100) y
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
               coalesce(bx.lvl, vx.lvl) AS lvl, coalesce(bx.sf, vx.sf) AS sf, coalesce(bx.pf, vx.pf) AS pf,
               CASE WHEN st.fusion = 'rrf' THEN st.bm25_weight * coalesce(bx.x, 0) + st.vector_weight * coalesce(vx.x, 0)
                    ELSE (st.bm25_weight * coalesce(bx.x, fl.bf) + st.vector_weight * coalesce(vx.x, fl.vf))
                         / (st.bm25_weight + st.vector_weight) END AS fused
        FROM bx FULL JOIN vx ON bx.id = vx.id CROSS JOIN fl
    ), top AS (
        SELECT f.*, row_number() OVER (ORDER BY f.fused DESC, least(f.br, f.vr), f.id)::int AS rk
        FROM f ORDER BY f.fused DESC, least(f.br, f.vr), f.id LIMIT 100
    ), sec0 AS (
        SELECT h.section, max(h.fused) AS best
        FROM (SELECT CASE WHEN t.lvl = 1 THEN t.sf ELSE t.pf END AS section, t.fused FROM top t WHERE t.lvl <= 1) h
        WHERE h.section IS NOT NULL
        GROUP BY h.section ORDER BY best DESC, h.section LIMIT 5
    ), sec AS (
        SELECT s.section, s.best,
               coalesce((s.best - min(s.best) OVER ()) / nullif(max(s.best) OVER () - min(s.best) OVER (), 0), 1) AS sc
        FROM sec0 s
    ), para AS (
        SELECT t.*, coalesce((t.fused - min(t.fused) OVER ()) / nullif(max(t.fused) OVER () - min(t.fused) OVER (), 0), 1) AS norm
        FROM top t WHERE t.lvl = 0 AND t.pf IN (SELECT sec.section FROM sec)
    ), scored AS (
        SELECT p.*, (1 - 0.3::float8) * p.norm + 0.3::float8 * s.sc AS final, s.sc AS ssc
        FROM para p JOIN sec s ON s.section = p.pf
    ), best AS (
        SELECT x.*, row_number() OVER (ORDER BY x.final DESC, x.rk, x.id)::int AS r2
        FROM scored x ORDER BY x.final DESC, x.rk, x.id LIMIT p_k
    )
    SELECT (SELECT count(*) FROM para) < p_k,
           (SELECT array_agg(sec.section ORDER BY sec.best DESC, sec.section) FROM sec),
           (SELECT array_agg(sec.sc ORDER BY sec.best DESC, sec.section) FROM sec),
           array_agg(ROW(n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                         n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
                         x.final, x.r2, x.br, x.bs, x.vr, x.vs, x.ssc, NULL::int, NULL::float8,
                         NULL::json, NULL::json, NULL::json)::rag.search_hit ORDER BY x.r2)
    INTO v_short, v_files, v_scores, f_rows
    FROM best x JOIN rag.hierarchical_content_nodes n ON n.id = x.id;
    IF v_files IS NULL THEN  -- no section: the general functions' flat fallback
        RETURN;
    END IF;
    IF v_short THEN
        -- Fewer than k paragraphs of the kept sections among the rows read: rag.search_two_stage's
        -- second search inside them, and its scoring.
        SELECT array_agg(h ORDER BY h.rank) INTO f_rows
        FROM rag._search_in_sections(p_query, p_query_embedding, %3$L, v_files, v_scores, p_k, 100, 0.3,
                                     st.fusion, st.normalisation, st.bm25_weight, st.vector_weight) h;
    END IF;
    IF f_rows IS NULL THEN  -- no paragraph of the kept sections at all: the general functions ('auto' falls back to hybrid)
        RETURN;
    END IF;
    IF st.sentence_every = 0 OR st.sentence_after >= p_k THEN
        RETURN QUERY SELECT * FROM unnest(f_rows);
        RETURN;
    END IF;
    -- The sentence branch: the 2k nearest summary sentences, their paragraphs (one chunk each).
    PERFORM rag._set_hnsw(2 * p_k);
    SELECT array_agg(s.f), array_agg(p.n), array_agg(s.d) INTO c_file, c_par, c_dist FROM (
        SELECT se.cited_source_file AS f, se.cited_paragraphs AS ps,
               (se.embedding::vector(%2$s) <=> p_query_embedding::vector(%2$s))::float8 AS d
        FROM rag.sentences se WHERE se.embedding_model = %3$L
        ORDER BY se.embedding::vector(%2$s) <=> p_query_embedding::vector(%2$s) LIMIT 2 * p_k) s, unnest(s.ps) AS p(n);
    WITH cited AS (
        SELECT c.f, c.n, 1 - min(c.d) AS sim FROM unnest(c_file, c_par, c_dist) AS c(f, n, d) GROUP BY c.f, c.n
    ), para AS (
        SELECT x.f, x.n, x.sim FROM (SELECT cited.*, rank() OVER (ORDER BY cited.sim DESC) AS r FROM cited) x
        WHERE x.r <= 2 * p_k
    ), one AS (
        SELECT c.*, para.sim FROM para
        CROSS JOIN LATERAL (
            SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                   n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
                   CASE WHEN n.embedding_model = %3$L THEN 1 - (n.embedding <=> p_query_embedding) END AS own
            FROM rag.hierarchical_content_nodes n
            WHERE n.source_file = para.f AND n.paragraph = para.n AND n.level = 0
            ORDER BY own DESC NULLS LAST, n.chunk_index LIMIT 1) c
    ), top AS (
        SELECT one.*, row_number() OVER (ORDER BY one.sim DESC, one.own DESC NULLS LAST, one.id)::int AS r FROM one
    )
    SELECT array_agg(ROW(t.id, t.source_file, t.chunk_index, t.level, t.node_type, t.heading_path,
                         t.parent_source_file, t.content, t.content_token_count, t.book, t.node_order, t.paragraph,
                         t.sim, t.r, NULL::int, NULL::float8, NULL::int, NULL::float8, NULL::float8, t.r, t.sim,
                         NULL::json, NULL::json, NULL::json)::rag.search_hit ORDER BY t.r)
    INTO s_rows
    FROM top t WHERE t.r <= 2 * p_k;
    RETURN QUERY SELECT * FROM rag._interleave(f_rows, s_rows, st.sentence_after, st.sentence_every, p_k);
END
$body$
$f$, v_name, p_dimension, p_model);
    EXECUTE format('COMMENT ON FUNCTION rag.%I(text, vector, integer) IS %L', v_name,
                   format('The default search for model %s, generated by rag._install_model_search; do not edit.', p_model));
    EXECUTE format('REVOKE EXECUTE ON FUNCTION rag.%I(text, vector, integer) FROM PUBLIC', v_name);
    EXECUTE format('GRANT EXECUTE ON FUNCTION rag.%I(text, vector, integer) TO bookrag_reader', v_name);
    RETURN v_name;
END
$$;
REVOKE EXECUTE ON FUNCTION rag._install_model_search(TEXT, INT) FROM bookrag_reader;

-- function: _search_in_sections sha256:fb7814b4b01da6203b658cdf2431ff2bb0c89ab79973b606985fceda2e228004
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

-- function: search_two_stage sha256:a62cd8c69bc3803dead3d6c0dbbfdb52c338cd4a8aef41423d595ee7c0c264ad
-- rag.search_two_stage: the best sections by their summaries and paragraphs, then their best paragraphs, from one hybrid search.
CREATE OR REPLACE FUNCTION rag.search_two_stage(
    p_query           TEXT,
    p_query_embedding vector,
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_sections        INT DEFAULT 5,
    p_section_weight  FLOAT8 DEFAULT 0.3,
    p_pool            INT DEFAULT 100,
    p_within          TEXT DEFAULT NULL,
    p_fusion          TEXT DEFAULT NULL,
    p_normalisation   TEXT DEFAULT NULL,
    p_bm25_weight     FLOAT8 DEFAULT NULL,
    p_vector_weight   FLOAT8 DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Two-stage retrieval (seeds/two-stage-search, section 4.2), both stages over one hybrid search:
  rag.search_hybrid over every level (k = greatest(p_pool, p_k, 10 x p_sections) rows, each
  branch's pool raised to that k by rag.search_hybrid; no chapter term); rows of levels 2-3
  (parts, the book) are left out.
  1. Sections: each section (a level-1 summary's own file, a paragraph's parent) gets the best
     fused score of its rows among those, so a section is found by its summary's words or by
     its own text; the p_sections best are kept, their scores min-max normalised over them
     (section_score in 0..1, 1 for the best).
  2. Paragraphs: the level-0 rows among those whose parent is a kept section, their fused
     scores min-max normalised over them; when they are fewer than p_k, a second search over
     the kept sections' paragraphs (k and pool greatest(p_pool, p_k)) gives them instead:
     rag._search_in_sections (static statements, migration 0016, decision 25), or with
     p_within rag.search_hybrid restricted to the sections and the subtree (as every second
     search until 0016). A section kept for its summary's score contributes only those of its
     paragraphs that are among the rows read (unless the second search runs).
  score = (1 - p_section_weight) * paragraph score + p_section_weight * section_score,
  so a paragraph is boosted by its section's score. Returns the p_k best (fewer only when fewer
  of the kept sections' paragraphs match), with their branch ranks and section_score.
  Until migration 0013 stage 2 always ran that second search (and until 0012 stage 1 read the
  summaries alone); reading the first search's rows gives the same quality within one question
  of the smallest tuning half at about half the cost (decision 22; recall@5 / MRR@10 with the
  sentence branch merged by rag.search, tuning halves: Bastiat 0.619 / 0.881 both, Tocqueville
  0.667 / 0.741 -> 0.651 / 0.742, PIAF 0.908 / 0.804 -> 0.912 / 0.808; mean of the held-out
  halves 0.688 -> 0.690).
Parameters:
  p_query, p_query_embedding  as in rag.search_hybrid (embedding may be NULL: BM25 only).
  p_k              rows returned, 1..1000 (default 10).
  p_book           NULL or one book.
  p_sections       sections kept, 1..100 (default 5).
  p_section_weight 0..1 (default 0.3, the seed's value).
  p_pool           candidates per branch, at least (default 100); rows read as said above (at most 1000).
  p_within         NULL or a source_file: only rows inside its subtree.
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight: passed to rag.search_hybrid
                   and rag._search_in_sections (NULL = rag._fusion_settings()); the chapter
                   term is not used here (the sections already rank the chapters).
Edge case: when no row of levels 0-1 matches, or none has a parent (a corpus without
summaries), no section is found and the function falls back to a flat hybrid search over
paragraphs (NOTICE).
Cost: one rag.search_hybrid reading its greatest(p_pool, p_k, 10 x p_sections) best rows (100
by default, content included), then two small statements over them in memory; a second
search when the first holds fewer than p_k of the kept sections' paragraphs (k 10: 5 of the
books' 177 evalset questions; 56 of an evenly spread 500 of PIAF's 3,835, whose articles have
about 4 paragraphs each; almost every query at 100k synthetic rows). With parent expansion
through rag.search, 1.3 times hybrid's time on the books in migration 0014's run of
bench/bench_search.py ("default+parent, general" against "hybrid+parent" since 0015, whose
generated function runs the plain default call: rag._install_model_search); with its second
search from static statements (0016), 2.01-2.04 times bm25 + vector at 100k rows where it was
2.22-2.25 (alternate runs, decision 25).
*/
DECLARE
    v_short  BOOLEAN;          -- fewer than p_k of the kept sections' paragraphs among the rows read
    v_rows   rag.search_hit[];
    v_files  TEXT[];
    v_scores FLOAT8[];
BEGIN
    PERFORM rag._check_search_args(p_query, p_k, p_book, NULL, NULL);
    IF p_sections IS NULL OR p_sections < 1 OR p_sections > 100 THEN
        RAISE EXCEPTION 'sections must be between 1 and 100, got %', coalesce(p_sections::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_section_weight IS NULL OR p_section_weight < 0 OR p_section_weight > 1 THEN
        RAISE EXCEPTION 'section_weight must be within 0..1, got %', coalesce(p_section_weight::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The one search both stages read (every level: a levels filter costs the BM25 scan more
    -- than the few part and book rows it would keep out).
    SELECT array_agg(h ORDER BY h.rank) INTO v_rows
    FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, greatest(p_pool, p_k, p_sections * 10)),
                           p_book => p_book, p_pool => p_pool, p_bm25_weight => p_bm25_weight,
                           p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                           p_normalisation => p_normalisation, p_chapter_weight => 0, p_within => p_within) h;

    -- Stage 1: the sections, best first, and their normalised scores.
    SELECT array_agg(s.source_file ORDER BY s.best DESC, s.source_file),
           array_agg(s.norm ORDER BY s.best DESC, s.source_file)
    INTO v_files, v_scores
    FROM (
        SELECT t.source_file, t.best,
               coalesce((t.best - min(t.best) OVER ()) / nullif(max(t.best) OVER () - min(t.best) OVER (), 0), 1) AS norm
        FROM (
            SELECT h.section AS source_file, max(h.score) AS best
            FROM (SELECT CASE WHEN h.level = 1 THEN h.source_file ELSE h.parent_source_file END AS section, h.score
                  FROM unnest(v_rows) h WHERE h.level <= 1) h
            WHERE h.section IS NOT NULL
            GROUP BY h.section
            ORDER BY best DESC, h.section
            LIMIT p_sections
        ) t
    ) s;

    IF v_files IS NULL THEN
        RAISE NOTICE 'no section matches (no summary, and no paragraph with a parent); falling back to a flat hybrid search over paragraphs';
        RETURN QUERY SELECT * FROM rag.search_hybrid(p_query, p_query_embedding, p_k => p_k,
                                                      p_book => p_book, p_levels => ARRAY[0], p_pool => p_pool,
                                                      p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight,
                                                      p_fusion => p_fusion, p_normalisation => p_normalisation,
                                                      p_chapter_weight => 0, p_within => p_within);
        RETURN;
    END IF;

    -- Stage 2: the kept sections' paragraphs among the same rows; when those rows hold fewer
    -- than p_k of them, a search inside the kept sections (stage 2 until migration 0013), so a
    -- list is never shorter than the sections allow.
    v_short := (SELECT count(*) FROM unnest(v_rows) h WHERE h.level = 0 AND h.parent_source_file = ANY(v_files)) < p_k;
    IF v_short AND p_within IS NULL THEN
        -- its static statements (migration 0016; the kept sections are in p_book already)
        RETURN QUERY SELECT * FROM rag._search_in_sections(
            p_query, p_query_embedding, (SELECT m.model FROM rag._corpus_model(p_query_embedding) m), v_files, v_scores,
            p_k, p_pool, p_section_weight, p_fusion, p_normalisation, p_bm25_weight, p_vector_weight);
        RETURN;
    ELSIF v_short THEN
        -- within a subtree: the hybrid search with its filters
        SELECT array_agg(h ORDER BY h.rank) INTO v_rows
        FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, greatest(p_k, p_pool)),
                               p_book => p_book, p_levels => ARRAY[0], p_parent_files => v_files,
                               p_pool => p_pool, p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight,
                               p_fusion => p_fusion, p_normalisation => p_normalisation,
                               p_chapter_weight => 0, p_within => p_within) h;
    END IF;
    RETURN QUERY
    WITH sec AS (
        SELECT f, sc FROM unnest(v_files, v_scores) AS u(f, sc)
    ), para AS (
        SELECT h.*, coalesce((h.score - min(h.score) OVER ()) / nullif(max(h.score) OVER () - min(h.score) OVER (), 0), 1) AS norm
        FROM unnest(v_rows) h
        WHERE h.level = 0 AND h.parent_source_file = ANY(v_files)
    ), scored AS (
        SELECT p.*, (1 - p_section_weight) * p.norm + p_section_weight * s.sc AS final, s.sc AS ssc
        FROM para p JOIN sec s ON s.f = p.parent_source_file
    )
    SELECT x.id, x.source_file, x.chunk_index, x.level, x.node_type, x.heading_path,
           x.parent_source_file, x.content, x.content_token_count, x.book, x.node_order, x.paragraph,
           x.final, (row_number() OVER (ORDER BY x.final DESC, x.rank, x.id))::int,
           x.bm25_rank, x.bm25_score, x.vector_rank, x.vector_score, x.ssc, NULL::int, NULL::float8,
           NULL::json, NULL::json, NULL::json
    FROM scored x
    ORDER BY x.final DESC, x.rank, x.id
    LIMIT p_k;
END
$$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_install_model_search', '3231ed00ee35e6374917de6a7e8b58d9a2abc66c157b9d5f8563f9ea5c1799a0', '0016_default_search_second_search_cached'),
    ('_search_in_sections', 'fb7814b4b01da6203b658cdf2431ff2bb0c89ab79973b606985fceda2e228004', '0016_default_search_second_search_cached'),
    ('search_two_stage', 'a62cd8c69bc3803dead3d6c0dbbfdb52c338cd4a8aef41423d595ee7c0c264ad', '0016_default_search_second_search_cached')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
